// module_cache.hpp: cubin -> loaded module -> ready CUfunction, once per (device, digest). Loading is where a
// kernel's resources meet the device: the dynamic shared-memory opt-in is set here, once, and the
// registers / shared memory / threads of the launch plan are checked against the device's limits, so that
// a launch never discovers them (DESIGN.md "Warm before capture").
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "runtime/cubin_store.hpp"
#include "runtime/device_info.hpp"
#include "runtime/kernel_handle.hpp"

namespace swapjit {

class ModuleCache {
 public:
  ModuleCache() = default;
  ~ModuleCache();  // unloads every module (the driver may already be gone at exit: errors are ignored)
  ModuleCache(const ModuleCache&) = delete;
  ModuleCache& operator=(const ModuleCache&) = delete;

  // Loads `cubin` (the compiled `key`) on `device` unless already loaded, gets the function by its
  // lowered name, forces it to load (cuFuncLoad: lazy loading would otherwise load it at the first
  // launch, perhaps inside a capture), sets its dynamic shared-memory limit to plan.smem_bytes and checks
  // the plan against the device. REQUIRES: the device's context is current. Thread-safe. Throws Error
  // naming the key (kUnsupported when the kernel cannot run on this device, kDriver on a driver error).
  KernelHandle load(const DeviceInfo& device, const CompileKey& key, const CubinResult& cubin);

  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<int, std::string>, KernelHandle> loaded_;  // (device, digest) -> handle
  std::map<std::pair<int, std::string>, CUmodule> modules_;
};

// cuOccupancyMaxActiveClusters for `f` launched with `plan`'s block and smem in clusters of `cluster`.
int max_active_clusters(CUfunction f, const LaunchPlan& plan, int cluster, const std::string& key_json);
// The same, or 0 where the device refuses the query (a cluster shape that is a speed-up, not a need: the wide
// and mid shapes, the bench's scan over cluster sizes).
int max_active_clusters_or_zero(CUfunction f, const LaunchPlan& plan, int cluster, const std::string& key_json);
// The wide and mid tilings' entry points of h (FamilyInfo::wide_entry, mid_entry) from `module`, for a plan with
// that shape (else nullptr), found and loaded. Throws kInternal naming the key when the cubin lacks one.
// REQUIRES: h.key and h.plan set.
void resolve_shape_entries(KernelHandle& h, CUmodule module);
// The function attributes a launch of h needs: the dynamic smem opt-in of h.plan (every entry), and for a plan with a wide
// shape (LaunchPlan::wide_cluster) the non-portable cluster opt-in and h.plan.wide_max_items from the wide
// cluster's occupancy (0 when the device refuses either: the portable shape then), and for a plan with a mid
// shape (LaunchPlan::mid_cluster, portable) h.plan.mid_max_items from its occupancy. load() calls it;
// `swapjit timeline` and the bench's occupancy rows call both on their own modules. REQUIRES: resolve_shape_entries.
void set_launch_attributes(KernelHandle& h);

// The checks load() applies, separated so tests can call them without a driver. Throws kUnsupported.
void check_plan_fits(const DeviceInfo& device, const LaunchPlan& plan, int registers, int static_smem,
                     int max_threads_of_function, const std::string& key_json);

}  // namespace swapjit

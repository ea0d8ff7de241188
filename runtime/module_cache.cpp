// module_cache.cpp: cuModuleLoadData once per (device, digest), limits checked at load.
#include "runtime/module_cache.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "jit/kernel_family.hpp"
#include "runtime/driver.hpp"

namespace swapjit {

void check_plan_fits(const DeviceInfo& device, const LaunchPlan& plan, int registers, int static_smem,
                     int max_threads_of_function, const std::string& key_json) {
  auto fail = [&](const std::string& what) {
    throw_error(ErrorCode::kUnsupported, fmt::format("kernel does not fit {} ({}): {}", device.name, device.arch, what),
                __FILE__, __LINE__, key_json);
  };
  if (plan.threads <= 0 || plan.ctas_per_item <= 0 || plan.cluster <= 0 || plan.smem_bytes < 0)
    fail(fmt::format("bad launch plan threads={} ctas_per_item={} cluster={} smem={}", plan.threads,
                     plan.ctas_per_item, plan.cluster, plan.smem_bytes));
  if (plan.threads > device.max_threads_per_block)
    fail(fmt::format("{} threads > device max {} per block", plan.threads, device.max_threads_per_block));
  if (max_threads_of_function > 0 && plan.threads > max_threads_of_function)
    fail(fmt::format("{} threads > the function's max {} (its registers limit the block)", plan.threads,
                     max_threads_of_function));
  if (registers > 0 && device.max_regs_per_block > 0 &&
      static_cast<long long>(registers) * plan.threads > device.max_regs_per_block)
    fail(fmt::format("{} registers x {} threads > {} registers per block", registers, plan.threads,
                     device.max_regs_per_block));
  if (device.max_smem_per_block_optin > 0 && static_smem + plan.smem_bytes > device.max_smem_per_block_optin)
    fail(fmt::format("static {} + dynamic {} bytes of shared memory > {} per block", static_smem, plan.smem_bytes,
                     device.max_smem_per_block_optin));
  // NOTE: 8 is the portable cluster limit. Only a wide shape goes past it, with the non-portable opt-in
  // set at load (up to 16 on sm_90).
  if (plan.cluster > 8) fail(fmt::format("cluster of {} CTAs > the portable limit of 8", plan.cluster));
  if (plan.wide_cluster < 0 || plan.wide_cluster > 16 || (plan.wide_cluster > 0 && plan.wide_cluster <= plan.cluster))
    fail(fmt::format("wide cluster of {} CTAs: not in {}..16", plan.wide_cluster, plan.cluster + 1));
  if (plan.mid_cluster < 0 || plan.mid_cluster > 8 || (plan.mid_cluster > 0 && plan.mid_cluster <= plan.cluster))
    fail(fmt::format("mid cluster of {} CTAs: not in {}..8", plan.mid_cluster, plan.cluster + 1));
  if (plan.cluster > 1 && plan.ctas_per_item % plan.cluster != 0)
    fail(fmt::format("ctas_per_item {} is not a multiple of cluster {}", plan.ctas_per_item, plan.cluster));
}

int max_active_clusters(CUfunction f, const LaunchPlan& plan, int cluster, const std::string& key_json) {
  CUlaunchAttribute attr = {};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = static_cast<unsigned>(cluster);
  attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
  CUlaunchConfig cfg = {};
  cfg.gridDimX = static_cast<unsigned>(cluster);
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = static_cast<unsigned>(plan.threads);
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = static_cast<unsigned>(plan.smem_bytes);
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int clusters = 0;
  SWAPJIT_CU_KEY(driver().cuOccupancyMaxActiveClusters(&clusters, f, &cfg), key_json);
  return clusters;
}

int max_active_clusters_or_zero(CUfunction f, const LaunchPlan& plan, int cluster, const std::string& key_json) {
  try {
    return max_active_clusters(f, plan, cluster, key_json);
  } catch (const Error&) {
    return 0;
  }
}

namespace {

// For a plan with a wide shape (LaunchPlan::wide_cluster): its entry's non-portable cluster opt-in and
// plan.wide_max_items from the occupancy of the wide cluster (0 when the device refuses either).
void enable_wide_shape(KernelHandle& h) {
  h.plan.wide_max_items = 0;
  if (h.plan.wide_cluster <= 0 || !h.wide_function) return;
  // The opt-in first: without it the occupancy query (and a launch) rejects more than 8 CTAs. A device
  // that refuses either keeps the key on its portable shape: wide tiling is a speed-up, not a need.
  const DriverApi& api = driver();
  if (api.cuFuncSetAttribute(h.wide_function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1) != CUDA_SUCCESS)
    return;
  // Wide only while every item's cluster is resident at once (one wave); past that the portable shape,
  // whose clusters are smaller and more of them fit, is the faster one.
  h.plan.wide_max_items = max_active_clusters_or_zero(h.wide_function, h.plan, h.plan.wide_cluster, h.key_json);
}

CUfunction shape_entry(CUmodule module, const char* name, const std::string& key_json) {
  CUfunction f = nullptr;
  if (name == nullptr || driver().cuModuleGetFunction(&f, module, name) != CUDA_SUCCESS || f == nullptr)
    throw_error(ErrorCode::kInternal,
                fmt::format("the cubin lacks the entry point {} that its launch plan needs", name ? name : "(none)"),
                __FILE__, __LINE__, key_json);
  if (driver().cuFuncLoad) SWAPJIT_CU_KEY(driver().cuFuncLoad(f), key_json);
  return f;
}

}  // namespace

void resolve_shape_entries(KernelHandle& h, CUmodule module) {
  const FamilyInfo& info = family_info(h.key.family);
  h.wide_function = h.plan.wide_cluster > 0 ? shape_entry(module, info.wide_entry, h.key_json) : nullptr;
  h.mid_function = h.plan.mid_cluster > 0 ? shape_entry(module, info.mid_entry, h.key_json) : nullptr;
}

void set_launch_attributes(KernelHandle& h) {
  for (CUfunction f : h.entries())
    if (f)
      SWAPJIT_CU_KEY(driver().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, h.plan.smem_bytes),
                     h.key_json);
  enable_wide_shape(h);
  // The mid shape (portable, no opt-in) under the same one-wave rule; 0 when the query fails: the portable
  // shape then takes those steps.
  h.plan.mid_max_items = h.plan.mid_cluster > 0 && h.mid_function
                             ? max_active_clusters_or_zero(h.mid_function, h.plan, h.plan.mid_cluster, h.key_json)
                             : 0;
}

KernelHandle ModuleCache::load(const DeviceInfo& device, const CompileKey& key, const CubinResult& cubin) {
  const auto id = std::make_pair(device.ordinal, cubin.digest);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = loaded_.find(id); it != loaded_.end()) return it->second;

  const DriverApi& api = driver();
  KernelHandle h;
  h.key = key;
  h.key_json = key.canonical_json();
  h.digest = cubin.digest;
  h.plan = launch_plan(key);
  if (cubin.cubin.empty() || cubin.lowered_name.empty())
    throw_error(ErrorCode::kInternal, "empty cubin or lowered name from the store", __FILE__, __LINE__, h.key_json);

  SWAPJIT_CU_KEY(api.cuCtxGetCurrent(&h.context), h.key_json);
  CUmodule module = nullptr;
  SWAPJIT_CU_KEY(api.cuModuleLoadData(&module, cubin.cubin.data()), h.key_json);
  try {
    SWAPJIT_CU_KEY(api.cuModuleGetFunction(&h.function, module, cubin.lowered_name.c_str()), h.key_json);
    if (api.cuFuncLoad) SWAPJIT_CU_KEY(api.cuFuncLoad(h.function), h.key_json);
    resolve_shape_entries(h, module);
    // Every entry the plan may launch is checked (the tilings' entries are compiled apart: their own registers).
    for (CUfunction f : h.entries()) {
      if (!f) continue;
      int registers = 0, static_smem = 0, max_threads = 0;
      // NOTE: these attribute queries also load the function on drivers without cuFuncLoad (< 12.4).
      SWAPJIT_CU_KEY(api.cuFuncGetAttribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS, f), h.key_json);
      SWAPJIT_CU_KEY(api.cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f), h.key_json);
      SWAPJIT_CU_KEY(api.cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f), h.key_json);
      check_plan_fits(device, h.plan, registers, static_smem, max_threads, h.key_json);
      h.registers = std::max(h.registers, registers);
      h.static_smem_bytes = std::max(h.static_smem_bytes, static_smem);
    }
    set_launch_attributes(h);
    if (h.plan.cluster > 1) {
      // A cluster that cannot be co-scheduled would fail at every launch: find out now.
      const int clusters = max_active_clusters(h.function, h.plan, h.plan.cluster, h.key_json);
      if (clusters < 1)
        throw_error(ErrorCode::kUnsupported,
                    fmt::format("a cluster of {} CTAs x {} threads x {} B smem cannot be co-scheduled on {}",
                                h.plan.cluster, h.plan.threads, h.plan.smem_bytes, device.name),
                    __FILE__, __LINE__, h.key_json);
    }
  } catch (...) {
    api.cuModuleUnload(module);
    throw;
  }
  modules_.emplace(id, module);
  loaded_.emplace(id, h);
  return h;
}

size_t ModuleCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loaded_.size();
}

ModuleCache::~ModuleCache() {
  // NOTE: at process exit the driver may be torn down before us; a failed unload is harmless then.
  try {
    const DriverApi& api = driver();
    for (auto& [id, module] : modules_) api.cuModuleUnload(module);
  } catch (...) {
  }
}

}  // namespace swapjit

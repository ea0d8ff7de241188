// service_impl.hpp: the insides of Service and DecodeAttention (include/swapjit/decode_attention.hpp).
// Internal: the C API and the tests include it (tests replace `cubin_source` with a fake store).
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/device_info.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/kernel_handle.hpp"
#include "runtime/module_cache.hpp"
#include "runtime/warmup.hpp"
#include "swapjit/decode_attention.hpp"

namespace swapjit {

struct Service::Impl {
  ServiceOptions options;
  int jobs = 1;
  std::unique_ptr<CubinStore> store;
  // Where warmup and the not-warmed path get cubins: store->get by default. Tests install a fake.
  CubinSource cubin_source;
  std::string arch;
  bool driver_ok = false;
  std::string no_driver_reason;
  DeviceInfo device;  // valid when driver_ok
  ModuleCache modules;
  std::atomic<bool> sealed{false};

  std::mutex mu;  // guards everything below
  std::vector<DecodeAttention::Impl*> layers;
  std::vector<CompileKey> registered;            // every key of every layer, de-duplicated, in order
  std::map<std::string, KernelHandle> loaded;    // canonical key JSON -> loaded kernel

  explicit Impl(ServiceOptions opts);
  void register_layer(DecodeAttention::Impl* layer);
  void unregister_layer(DecodeAttention::Impl* layer);
  // Compiles (or fetches) and loads one key now; the not-warmed path. REQUIRES: driver_ok.
  KernelHandle load_one(const CompileKey& key);
  // Throws kNoDriver with the reason when there is no driver.
  void require_driver() const;
};

struct DecodeAttention::Impl {
  struct Slot {
    std::atomic<bool> ready{false};  // set (release) after `handle` is written; read (acquire) per launch
    KernelHandle handle;
    std::string key_json;  // of the slot's key, "" when the slot is absent
  };

  Service::Impl* service = nullptr;
  LayerConfig config;
  LayerKeys lk;
  std::vector<CompileKey> keys;  // the present slots' keys, de-duplicated
  LayerDispatch dispatch;
  Slot slots[kSlotCount];
  std::mutex mu;  // serialises the not-warmed path's loads

  // The slot's handle, loading it first when not warmed (capture / seal rules of DESIGN.md).
  const KernelHandle& handle_for(int slot, CUstream stream);
  // Fills a slot from a loaded handle (warmup). Caller holds no lock of this layer.
  void fill(int slot, const KernelHandle& handle);
};

}  // namespace swapjit

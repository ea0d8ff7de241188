// service.cpp: Service (include/swapjit/decode_attention.hpp): the key registry, warmup and seal.
#include <fmt/format.h>

#include "runtime/driver.hpp"
#include "runtime/service_impl.hpp"

namespace swapjit {

Service::Impl::Impl(ServiceOptions opts) : options(std::move(opts)) {
  jobs = resolve_jobs(options.jobs);
  store = std::make_unique<CubinStore>(options.store);
  cubin_source = [s = store.get()](const CompileKey& key) { return s->get(key); };
  driver_ok = ::swapjit::has_driver();
  if (driver_ok) {
    device = query_device(options.device);
  } else {
    no_driver_reason = ::swapjit::no_driver_reason();
  }
  arch = !options.arch.empty() ? options.arch : driver_ok ? device.arch : std::string(kDefaultArch);
}

void Service::Impl::require_driver() const {
  if (!driver_ok) throw Error(ErrorCode::kNoDriver, no_driver_reason);
}

void Service::Impl::register_layer(DecodeAttention::Impl* layer) {
  std::lock_guard<std::mutex> lock(mu);
  layers.push_back(layer);
  for (const CompileKey& k : layer->keys)
    if (std::find(registered.begin(), registered.end(), k) == registered.end()) registered.push_back(k);
  // A layer built after warmup() gets the already loaded kernels at once.
  for (int s = 0; s < kSlotCount; ++s) {
    if (!layer->lk.present[s]) continue;
    if (auto it = loaded.find(layer->slots[s].key_json); it != loaded.end()) layer->fill(s, it->second);
  }
}

void Service::Impl::unregister_layer(DecodeAttention::Impl* layer) {
  std::lock_guard<std::mutex> lock(mu);
  std::erase(layers, layer);
}

KernelHandle Service::Impl::load_one(const CompileKey& key) {
  const std::string json = key.canonical_json();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = loaded.find(json); it != loaded.end()) return it->second;
  }
  require_driver();
  CubinResult cubin = cubin_source(key);
  ensure_context(options.device);
  KernelHandle h = modules.load(device, key, cubin);  // ModuleCache de-duplicates concurrent loads
  std::lock_guard<std::mutex> lock(mu);
  return loaded.emplace(json, h).first->second;
}

Service::Service(ServiceOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Service::~Service() = default;

void Service::warmup() {
  Impl& s = *impl_;
  std::vector<CompileKey> todo;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (const CompileKey& k : s.registered)
      if (!s.loaded.count(k.canonical_json())) todo.push_back(k);
  }
  // Compiling needs no driver: a CI box or a docker build stage fills the cache here, then learns below
  // that it cannot load.
  std::vector<CubinResult> cubins = fetch_cubins(todo, s.jobs, s.cubin_source);
  if (!s.driver_ok)
    throw Error(ErrorCode::kNoDriver,
                fmt::format("warmup compiled {} key(s) into the cache but cannot load them: {}", todo.size(),
                            s.no_driver_reason));
  ensure_context(s.options.device);
  for (size_t i = 0; i < todo.size(); ++i) {
    KernelHandle h = s.modules.load(s.device, todo[i], cubins[i]);
    std::lock_guard<std::mutex> lock(s.mu);
    s.loaded.emplace(h.key_json, std::move(h));
  }
  std::lock_guard<std::mutex> lock(s.mu);
  for (DecodeAttention::Impl* layer : s.layers)
    for (int slot = 0; slot < kSlotCount; ++slot) {
      if (!layer->lk.present[slot]) continue;
      auto it = s.loaded.find(layer->slots[slot].key_json);
      if (it == s.loaded.end())
        throw Error(ErrorCode::kInternal, "a registered key was not loaded by warmup()", layer->slots[slot].key_json);
      layer->fill(slot, it->second);
    }
}

void Service::seal() { impl_->sealed.store(true, std::memory_order_release); }
bool Service::has_driver() const { return impl_->driver_ok; }
std::string Service::arch() const { return impl_->arch; }
const ServiceOptions& Service::options() const { return impl_->options; }
CubinStore& Service::store() { return *impl_->store; }
Service::Impl& Service::impl() { return *impl_; }

}  // namespace swapjit

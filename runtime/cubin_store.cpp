// cubin_store.cpp: key -> verified cubin. In-process single flight (one producer per digest, waiters share
// its result or its error) over DiskCache's cross-process lock and atomic publish.
#include "runtime/cubin_store.hpp"

#include <chrono>
#include <future>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "cache/disk_cache.hpp"
#include "jit/digest.hpp"
#include "jit/error.hpp"

namespace swapjit {
namespace {

nlohmann::json resources_json(const ResourceUsage& r) {
  return {{"registers", r.registers},
          {"spill_store_bytes", r.spill_store_bytes},
          {"spill_load_bytes", r.spill_load_bytes},
          {"stack_frame_bytes", r.stack_frame_bytes},
          {"static_smem_bytes", r.static_smem_bytes},
          {"constant_bytes", r.constant_bytes},
          {"parsed", r.parsed}};
}

ResourceUsage resources_from_json(const nlohmann::json& j) {
  ResourceUsage r;
  if (!j.is_object()) return r;
  r.registers = j.value("registers", -1);
  r.spill_store_bytes = j.value("spill_store_bytes", 0);
  r.spill_load_bytes = j.value("spill_load_bytes", 0);
  r.stack_frame_bytes = j.value("stack_frame_bytes", 0);
  r.static_smem_bytes = j.value("static_smem_bytes", 0);
  r.constant_bytes = j.value("constant_bytes", 0);
  r.parsed = j.value("parsed", false);
  return r;
}

CubinResult to_result(const std::string& digest, cache::CacheEntry&& e, bool compiled, double ms) {
  CubinResult r;
  r.digest = digest;
  r.cubin = std::move(e.cubin);
  r.lowered_name = e.manifest.value("lowered_name", std::string());
  r.resources = resources_from_json(e.manifest.value("resources", nlohmann::json()));
  r.compiled = compiled;
  r.ms = ms;
  return r;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

StoreOptions StoreOptions::from_env() {
  StoreOptions o;
  o.roots = cache::DiskCache::default_roots();
  return o;
}

struct CubinStore::Impl {
  StoreOptions options;
  cache::DiskCache disk;
  StoreCounters counters;
  std::mutex mu;  // guards inflight
  std::unordered_map<std::string, std::shared_future<CubinResult>> inflight;

  explicit Impl(StoreOptions o)
      : options(std::move(o)),
        disk(options.roots.empty() ? cache::DiskCache::default_roots() : options.roots,
             options.lock_timeout_s) {}

  cache::EntryId entry_id(const CompileKey& key, const std::string& digest) const {
    return {key.arch, family_name(key.family), digest, key.canonical_json(), Toolchain::current().fingerprint()};
  }

  // The producer's work: disk hit, or compile + publish under the cross-process lock.
  CubinResult produce(const CompileKey& key, const std::string& digest) {
    auto t0 = std::chrono::steady_clock::now();
    cache::EntryId id = entry_id(key, digest);
    bool compiled_now = false;
    auto got = disk.get_or_build(id, [&]() {
      CompiledKernel k = options.compiler ? options.compiler(key) : compile_key(key);
      compiled_now = true;
      cache::BuiltCubin b;
      b.cubin = std::move(k.cubin);
      b.lowered_name = std::move(k.lowered_name);
      b.compile_ms = k.compile_ms;
      b.resources = resources_json(k.resources);
      return b;
    });
    if (got.healed) counters.healed.fetch_add(1);
    if (compiled_now) {
      counters.compiles.fetch_add(1);
    } else {
      counters.hits.fetch_add(1);
    }
    CubinResult r = to_result(digest, std::move(got.entry), compiled_now, 0);
    if (compiled_now && options.max_bytes > 0) disk.gc(options.max_bytes);
    r.ms = ms_since(t0);
    return r;
  }
};

CubinStore::CubinStore(StoreOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
CubinStore::~CubinStore() = default;

CubinResult CubinStore::get(const CompileKey& key) {
  auto t0 = std::chrono::steady_clock::now();
  std::string digest;
  try {
    key.validate();
    digest = key_digest(key);
  } catch (...) {
    impl_->counters.failures.fetch_add(1);
    throw;
  }
  std::promise<CubinResult> promise;
  std::shared_future<CubinResult> fut;
  bool producer = false;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    auto it = impl_->inflight.find(digest);
    if (it != impl_->inflight.end()) {
      fut = it->second;
    } else {
      fut = promise.get_future().share();
      impl_->inflight.emplace(digest, fut);
      producer = true;
    }
  }
  if (!producer) {
    // A waiter: shares the producer's result or rethrows its error (it already names the key).
    try {
      CubinResult r = fut.get();
      r.compiled = false;  // this call did not compile
      r.ms = ms_since(t0);
      impl_->counters.hits.fetch_add(1);
      return r;
    } catch (...) {
      impl_->counters.failures.fetch_add(1);
      throw;
    }
  }
  try {
    CubinResult r = impl_->produce(key, digest);
    promise.set_value(r);
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->inflight.erase(digest);
    return r;
  } catch (const Error& e) {
    impl_->counters.failures.fetch_add(1);
    // Errors from the cache or the compiler carry the key already; anything else gets it here.
    std::exception_ptr ep = e.key_json().empty()
                                ? std::make_exception_ptr(Error(e.code(), e.message(), key.canonical_json(), e.log()))
                                : std::current_exception();
    promise.set_exception(ep);
    {
      std::lock_guard<std::mutex> lk(impl_->mu);
      impl_->inflight.erase(digest);
    }
    std::rethrow_exception(ep);
  } catch (const std::exception& e) {
    impl_->counters.failures.fetch_add(1);
    auto ep = std::make_exception_ptr(
        Error(ErrorCode::kInternal, fmt::format("cubin store: {}", e.what()), key.canonical_json()));
    promise.set_exception(ep);
    {
      std::lock_guard<std::mutex> lk(impl_->mu);
      impl_->inflight.erase(digest);
    }
    std::rethrow_exception(ep);
  }
}

bool CubinStore::lookup(const CompileKey& key, CubinResult* out) {
  auto t0 = std::chrono::steady_clock::now();
  std::string digest = key_digest(key);
  auto hit = impl_->disk.lookup(impl_->entry_id(key, digest));
  if (!hit) return false;
  impl_->counters.hits.fetch_add(1);
  if (out) *out = to_result(digest, std::move(*hit), false, ms_since(t0));
  return true;
}

const StoreCounters& CubinStore::counters() const { return impl_->counters; }
const StoreOptions& CubinStore::options() const { return impl_->options; }
const std::vector<std::string>& CubinStore::roots() const { return impl_->disk.roots(); }
std::string CubinStore::prepare_writable_root() const { return impl_->disk.prepare_writable_root(); }

void CubinStore::enforce_size_cap() {
  if (impl_->options.max_bytes > 0) impl_->disk.gc(impl_->options.max_bytes);
}

}  // namespace swapjit

// cubin_store.hpp: key -> verified cubin, through the on-disk cache (cache/disk_cache.hpp) and NVRTC
// (jit/nvrtc_compiler.hpp). In-process single flight (N threads asking for one key cause one compile; the
// waiters share its result or its error) on top of the cache's cross-process lock. Needs no GPU driver.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "jit/compile_key.hpp"
#include "jit/nvrtc_compiler.hpp"

namespace swapjit {

struct StoreOptions {
  std::vector<std::string> roots;  // cache roots: the first writable, the rest read-only; empty = default
  double lock_timeout_s = 600;     // how long to wait for another process's compile of one key
  long long max_bytes = 0;         // size cap of the writable root (0 = none), enforced by gc
  // The compiler a miss runs; empty = compile_key() (NVRTC). Tests inject a fast fake here so the
  // multi-process and kill tests need no NVRTC; it must throw swapjit::Error on failure.
  std::function<CompiledKernel(const CompileKey&)> compiler;
  // From the environment (SWAPJIT_CACHE_DIR colon list; default $XDG_CACHE_HOME/swapjit or
  // ~/.cache/swapjit). Read once by the caller, never on the launch path.
  static StoreOptions from_env();
};

struct CubinResult {
  std::string digest;
  std::vector<char> cubin;
  std::string lowered_name;
  ResourceUsage resources;
  bool compiled = false;  // true when this call compiled (a miss), false on a cache hit
  double ms = 0;          // wall time of this lookup (compile or load+verify)
};

struct StoreCounters {
  std::atomic<long> hits{0}, compiles{0}, failures{0}, healed{0};
};

class CubinStore {
 public:
  explicit CubinStore(StoreOptions options);
  ~CubinStore();
  // Returns the cubin of `key`, compiling and publishing it on a miss. Throws Error with the key on failure.
  CubinResult get(const CompileKey& key);
  // Cache hit only (no compile); nullptr-like empty optional semantics via `found`.
  bool lookup(const CompileKey& key, CubinResult* out);
  const StoreCounters& counters() const;
  const StoreOptions& options() const;
  // The cache roots in use (options().roots, or the defaults when that was empty).
  const std::vector<std::string>& roots() const;
  // "" when the writable root can take new entries (its layout created, as a miss would), else why not.
  std::string prepare_writable_root() const;
  // Runs the size cap now (no-op when options().max_bytes == 0); get() runs it after each compile.
  void enforce_size_cap();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace swapjit

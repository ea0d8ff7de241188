// gpu_harness_bench_jit.cpp: the JIT and host-overhead numbers of `swapjit bench` (DESIGN.md "Measuring",
// JIT bullet; gpu_harness_bench.hpp's measure_jit): host time inside one launch call while the GPU is kept
// busy, store lookup + module load per key from a warm cache, and a model's warmup wall time from a cold
// and from a warm cache (cold compile ms per key with it).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "jit/error.hpp"
#include "jit/presets.hpp"
#include "runtime/driver.hpp"
#include "runtime/launcher.hpp"
#include "runtime/module_cache.hpp"
#include "runtime/service_impl.hpp"
#include "tools/gpu_harness_bench.hpp"
#include "runtime/launcher.hpp"

namespace swapjit::bench {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// (a) `call` timed on the host, o.calls times, in batches of o.calls_per_spin enqueued behind one spin
// kernel of o.spin_ms: the GPU is still spinning when the batch's last call returns (checked: the batch's
// enqueue time must stay below the spin's measured duration), so no call waits on a full launch queue.
json host_overhead(const std::string& what, const std::function<void()>& call, const BenchKernels& k, CUstream s,
                   const JitOptions& o) {
  call();  // once untimed: the first call of a slot may touch memory the later ones find cached
  SWAPJIT_CU(driver().cuStreamSynchronize(s));
  std::vector<double> us, spins;
  us.reserve(size_t(o.calls));
  bool busy = true;
  double worst_enqueue_ms = 0;
  harness::Event e0, e1;
  for (int done = 0; done < o.calls;) {
    const int n = std::min(std::max(o.calls_per_spin, 1), o.calls - done);
    e0.record(s);
    k.launch_spin(uint64_t(o.spin_ms * 1e6), s);
    e1.record(s);
    const auto b0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      call();
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    const double enqueue_ms = ms_since(b0);
    SWAPJIT_CU(driver().cuStreamSynchronize(s));
    const double spin = e1.since(e0);
    spins.push_back(spin);
    worst_enqueue_ms = std::max(worst_enqueue_ms, enqueue_ms);
    busy = busy && enqueue_ms < spin;
    done += n;
  }
  json j = {{"what", what},
            {"calls", us.size()},
            {"median_us", median(us)},
            {"p99_us", quantile(us, 0.99)},
            {"max_us", quantile(us, 1.0)},
            {"spin_ms_measured", median(spins)},
            {"worst_batch_enqueue_ms", worst_enqueue_ms},
            {"gpu_busy_throughout", busy}};
  std::printf("host time in %s: median %.2f us, p99 %.2f us, max %.2f us over %zu calls (spin %.1f ms, "
              "batch enqueue <= %.2f ms%s)\n",
              what.c_str(), median(us), quantile(us, 0.99), quantile(us, 1.0), us.size(), median(spins),
              worst_enqueue_ms, busy ? "" : "; WARNING: the GPU went idle during a batch");
  return j;
}

// (b) per registered key: CubinStore::get from the warm cache (read + verify) and ModuleCache::load into a
// fresh module cache (cuModuleLoadData, cuFuncLoad, attributes), timed separately.
json module_loads(Service& service) {
  std::vector<CompileKey> keys;
  {
    std::lock_guard<std::mutex> lk(service.impl().mu);
    keys = service.impl().registered;
  }
  ModuleCache fresh;
  json rows = json::array();
  std::vector<double> store_ms, load_ms;
  for (const CompileKey& key : keys) {
    auto t0 = Clock::now();
    CubinResult cr = service.store().get(key);
    const double st = ms_since(t0);
    t0 = Clock::now();
    fresh.load(service.impl().device, key, cr);
    const double ld = ms_since(t0);
    store_ms.push_back(st);
    load_ms.push_back(ld);
    rows.push_back({{"key", key.describe()}, {"store_ms", st}, {"load_ms", ld}, {"compiled", cr.compiled}});
  }
  std::printf("warm cache, per key (%zu keys): store get median %.3f ms (max %.3f), module load median %.3f ms "
              "(max %.3f)\n",
              keys.size(), median(store_ms), quantile(store_ms, 1.0), median(load_ms), quantile(load_ms, 1.0));
  return {{"keys", rows.size()},
          {"store_ms_median", median(store_ms)},
          {"load_ms_median", median(load_ms)},
          {"load_ms_max", quantile(load_ms, 1.0)},
          {"per_key", rows}};
}

// The layer configs of a preset: one per head-padded key (every layer has exactly one).
std::vector<LayerConfig> preset_layers(const JitOptions& o) {
  PresetOptions po;
  po.preset = o.preset;
  po.tp = {o.tp};
  std::vector<LayerConfig> out;
  for (const CompileKey& k : preset_keys(po)) {
    if (k.family != Family::kHeadpadDecode) continue;
    out.push_back(harness::layer_config_from(k, k.live_heads));
    if (o.cold_layers > 0 && int(out.size()) == o.cold_layers) break;
  }
  return out;
}

// (c) one Service::warmup() of `layers` over the cache root `dir`, in a fresh Service: wall time, and each
// key's store lookup (compiled or loaded, its ms) through a wrapper around the Service's cubin source.
json timed_warmup(const ServiceOptions& base, const std::string& dir, const std::vector<LayerConfig>& layers,
                  const char* label) {
  ServiceOptions so = base;
  so.store.roots = {dir};
  Service svc(so);
  std::mutex mu;
  json per_key = json::array();
  std::map<std::string, std::vector<double>> compile_ms;  // family -> ms of the keys compiled
  auto inner = svc.impl().cubin_source;
  svc.impl().cubin_source = [&, inner](const CompileKey& key) {
    CubinResult r = inner(key);
    std::lock_guard<std::mutex> lk(mu);
    per_key.push_back({{"key", key.describe()}, {"compiled", r.compiled}, {"ms", r.ms}});
    if (r.compiled) compile_ms[family_name(key.family)].push_back(r.ms);
    return r;
  };
  std::vector<std::unique_ptr<DecodeAttention>> registered;  // destroyed before svc (declared after it)
  for (const LayerConfig& lc : layers) registered.push_back(std::make_unique<DecodeAttention>(svc, lc));
  const auto t0 = Clock::now();
  svc.warmup();
  const double wall = ms_since(t0) / 1e3;
  json medians = json::object();
  std::string text;
  for (const auto& [family, v] : compile_ms) {
    medians[family] = median(v);
    text += fmt::format(" {} {:.0f} ms ({} keys)", family, median(v), v.size());
  }
  std::printf("warmup from a %s cache: %.2f s wall, %zu layers, %zu keys%s%s\n", label, wall, layers.size(),
              per_key.size(), compile_ms.empty() ? "" : "; compile median per key:", text.c_str());
  return {{"wall_s", wall},
          {"layers", layers.size()},
          {"keys", per_key.size()},
          {"jobs", svc.impl().jobs},
          {"compile_ms_median", medians},
          {"per_key", per_key}};
}

}  // namespace

json measure_jit(Service& service, DecodeAttention& layer, CacheSet& caches, const BenchKernels& k, CUstream s,
                 const JitOptions& o, int* failures) {
  json j = json::object();
  auto part = [&](const char* name, const std::function<json()>& f) {
    try {
      j[name] = f();
    } catch (const Error& e) {
      // Reported, not fatal: the other parts and the kernel tables still run.
      std::printf("jit %s FAILED: %s\n", name, e.what());
      j[name] = {{"error", e.what()}};
      ++*failures;
    }
  };
  std::printf("== JIT and host overhead ==\n");
  part("host_overhead", [&] {
    BenchInputs in(layer.config(), 1, /*cold=*/false, caches, 77);
    const BenchInputs::Set& set = in.sets[0];
    json rows = json::array();
    // The layer without the family: "h16 w128 k512 ..." (the key's describe() after its family/variant).
    const std::string key = layer.key_for(KernelChoice::kHeadpad).describe();
    const std::string name = key.substr(std::min(key.find(' ') + 1, key.size()));
    const char* pick = layer.choose(1, layer.config().window) == KernelChoice::kSwapab ? "swapab" : "headpad";
    rows.push_back(host_overhead(fmt::format("forward(auto = {}, T=1) {}", pick, name),
                                 [&] { layer.forward(set.step, s); }, k, s, o));
    rows.push_back(host_overhead("forward(headpad, T=1) " + name,
                                 [&] { layer.forward(set.step, s, KernelChoice::kHeadpad); }, k, s, o));
    rows.push_back(host_overhead("insert(swa, 1 row)", [&] { layer.insert(set.insert, true, s); }, k, s, o));
    // Controls: the driver's part of those times (no swapjit code but the launcher, then none at all).
    const KernelHandle ctl = k.empty_as_decode(launch_plan(layer.launch_key(1, layer.config().window)).cluster);
    rows.push_back(host_overhead(fmt::format("control: launch_kernel(empty kernel, cluster {} + PDL)", ctl.plan.cluster),
                                 [&] { launch_kernel(ctl, 1, nullptr, s); }, k, s, o));
    rows.push_back(host_overhead("control: bare cuLaunchKernelEx(empty kernel, no attributes)",
                                 [&] { k.launch_empty_bare(s); }, k, s, o));
    return rows;
  });
  part("module_load", [&] { return module_loads(service); });
  part("warmup", [&] {
    const std::vector<LayerConfig> layers = preset_layers(o);
    const std::string dir = (std::filesystem::temp_directory_path() /
                             fmt::format("swapjit-bench-cold-{}-{}", ::getpid(),
                                         Clock::now().time_since_epoch().count()))
                                .string();
    std::filesystem::create_directories(dir);
    json w = {{"preset", o.preset}, {"tp", o.tp}, {"cache_dir", dir}};
    try {
      w["cold"] = timed_warmup(service.options(), dir, layers, "cold");
      w["warm"] = timed_warmup(service.options(), dir, layers, "warm");
    } catch (...) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      throw;
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);  // a leftover temp dir is harmless: not worth failing the bench
    return w;
  });
  return j;
}

}  // namespace swapjit::bench

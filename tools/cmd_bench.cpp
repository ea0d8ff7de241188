// cmd_bench.cpp: `swapjit bench` (DESIGN.md "Measuring"). Per-call time = median replay time of a CUDA graph
// of 16 back-to-back calls over 16 input sets, / 16; each call follows a small kernel that writes its Q (so
// PDL cannot overlap a read that belongs after the wait). Warm = KV caches of 4096 slots (L2-resident);
// cold = caches of 1M slots with random slots. Swap-AB and head-padded in the same run, plus the floors
// of that run: an empty kernel in the same graph shape, and bytes read / measured copy bandwidth.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "jit/compile_key.hpp"
#include "jit/error.hpp"
#include "jit/kernel_family.hpp"
#include "runtime/driver.hpp"
#include "tools/gpu_harness_bench.hpp"
#include "tools/commands.hpp"

namespace swapjit::cli {
namespace {

using namespace swapjit::bench;

struct BenchArgs {
  std::vector<int> tokens{1, 2, 4, 8, 16, 32, 64};
  std::vector<int> heads{16, 32, 64};
  int replays = 20;
  bool no_cold = false;
  bool allow_no_gpu = false;
  std::string json;
  std::vector<std::string> cache_dirs;
};

constexpr int kPairSwa[3] = {kFormatV41Fp8, kFormatV41Fp8, kFormatV4Fp8};
constexpr int kPairComp[3] = {kFormatV41Fp8, kFormatV41Fp4, kFormatV4Fp8};

LayerConfig bench_layer(int heads, int pair, bool swa_only) {
  LayerConfig lc;
  lc.live_heads = heads;
  lc.window = 128;
  lc.topk = swa_only ? 0 : 512;  // V4.1-Flash compressed layer (ratio 2: 64-slot compressed pages)
  lc.swa_format = kPairSwa[pair];
  lc.comp_format = swa_only ? kFormatNone : kPairComp[pair];
  lc.swa_page = 64;
  lc.comp_page = swa_only ? 0 : 64;
  lc.q_layout = kQLayoutChunk16;
  lc.out_layout = kOutMxfp8Ofused;
  return lc;
}

std::string pair_name(const LayerConfig& lc) {
  return lc.topk ? fmt::format("{}+{}", format_name(lc.swa_format), format_name(lc.comp_format))
                 : std::string(format_name(lc.swa_format));
}

int run_bench(const BenchArgs& a) {
  std::string why;
  if (!harness::gpu_available(&why)) {
    if (a.allow_no_gpu) {
      std::printf("no GPU driver: bench skipped (%s)\n", why.c_str());
      return 0;
    }
    std::fprintf(stderr, "no GPU driver: `swapjit bench` needs a GPU (%s); pass --allow-no-gpu to skip\n",
                 why.c_str());
    return 2;
  }
  ServiceOptions so;
  so.store.roots = resolve_roots(a.cache_dirs);
  Service service(so);
  harness::make_context_current(so.device);
  harness::LayerPool pool(service);
  BenchKernels kernels;
  harness::Stream stream;

  struct Layer {
    LayerConfig config;
    bool swa_only;
    int pair;
  };
  std::vector<Layer> layers;
  for (bool swa_only : {false, true})
    for (int pair = 0; pair < 3; ++pair) {
      if (swa_only && pair == 1) continue;  // the SWA cache of pairing 1 is pairing 0's
      for (int h : a.heads) {
        layers.push_back({bench_layer(h, pair, swa_only), swa_only, pair});
        pool.get(layers.back().config);
      }
    }
  auto t0 = std::chrono::steady_clock::now();
  try {
    service.warmup();
  } catch (const Error& e) {
    // Reported, not fatal: each measurement of a failing key then fails on its own, naming it.
    std::printf("warmup failed (measurements continue): %s\n", e.what());
  }
  std::printf("warmup: %.1f s (%zu layers)\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), layers.size());
  const double bw = measure_copy_bandwidth(kernels, stream.get());
  std::printf("copy bandwidth (read + write): %.0f GB/s\n", bw / 1e9);

  nlohmann::json results = nlohmann::json::array(), occupancy = nlohmann::json::array();
  CacheSet caches(kernels, stream.get());
  int failures = 0;
  std::printf("%-8s %-16s %5s %4s %-5s %10s %10s %7s %10s %10s %10s\n", "layer", "kv", "heads", "T", "cache",
              "swapab_us", "headpad_us", "ratio", "empty_us", "bw_us", "MB_read");
  for (const Layer& L : layers) {
    DecodeAttention& layer = pool.get(L.config);
    ref::CaseShape probe = {};
    probe.heads = L.config.live_heads;
    probe.window = L.config.window;
    probe.topk = L.config.topk;
    probe.swa_page = L.config.swa_page;
    probe.comp_page = L.config.comp_page;
    probe.tokens = 1;
    if (harness::swapab_eligible(probe)) {
      try {
        OccupancyInfo oc = swapab_occupancy(service, layer.key_for(KernelChoice::kSwapab));
        std::printf("occupancy %s: %d clusters of %d CTAs (%d threads, %d B smem)\n",
                    layer.key_for(KernelChoice::kSwapab).describe().c_str(), oc.max_clusters, oc.cluster,
                    oc.threads, oc.smem_bytes);
        occupancy.push_back({{"key", layer.key_for(KernelChoice::kSwapab).describe()},
                             {"max_active_clusters", oc.max_clusters},
                             {"cluster", oc.cluster},
                             {"threads", oc.threads},
                             {"smem_bytes", oc.smem_bytes}});
      } catch (const Error& e) {
        std::printf("occupancy query failed: %s\n", e.what());
        ++failures;
      }
    }
    for (bool cold : {false, true}) {
      if (cold && a.no_cold) continue;
      for (int T : a.tokens) {
        probe.tokens = T;
        bool with_swapab = harness::swapab_eligible(probe, so.swapab_max_tokens);
        nlohmann::json r = {{"layer", L.swa_only ? "swa_only" : "compressed"},
                            {"kv", pair_name(L.config)},
                            {"heads", L.config.live_heads},
                            {"tokens", T},
                            {"cache", cold ? "cold" : "warm"}};
        try {
          BenchInputs in(L.config, T, cold, caches, uint64_t(T) * 131 + L.pair);
          double sw = -1, hp = -1;
          if (with_swapab) sw = time_calls(in, kernels, stream.get(), a.replays, [&](const DecodeStep& st) {
                                layer.forward(st, stream.get(), KernelChoice::kSwapab);
                              });
          hp = time_calls(in, kernels, stream.get(), a.replays, [&](const DecodeStep& st) {
            layer.forward(st, stream.get(), KernelChoice::kHeadpad);
          });
          double empty = time_calls(in, kernels, stream.get(), a.replays, [&](const DecodeStep& st) {
            kernels.launch_empty(unsigned(st.num_tokens), stream.get());
          });
          double bytes = double(in.bytes_read_per_call());
          double bw_floor_us = bytes / bw * 1e6;
          r["swapab_us"] = sw >= 0 ? nlohmann::json(sw * 1e3) : nlohmann::json(nullptr);
          r["headpad_us"] = hp * 1e3;
          r["ratio"] = sw >= 0 ? nlohmann::json(sw / hp) : nlohmann::json(nullptr);
          r["empty_floor_us"] = empty * 1e3;
          r["bandwidth_floor_us"] = bw_floor_us;
          r["bytes_read"] = bytes;
          std::printf("%-8s %-16s %5d %4d %-5s %10s %10.2f %7s %10.2f %10.2f %10.2f\n",
                      L.swa_only ? "swa" : "comp", pair_name(L.config).c_str(), L.config.live_heads, T,
                      cold ? "cold" : "warm", sw >= 0 ? fmt::format("{:.2f}", sw * 1e3).c_str() : "-",
                      hp * 1e3, sw >= 0 ? fmt::format("{:.3f}", sw / hp).c_str() : "-", empty * 1e3,
                      bw_floor_us, bytes / 1e6);
        } catch (const Error& e) {
          r["error"] = e.what();
          std::printf("%-8s %-16s %5d %4d %-5s FAILED: %s\n", L.swa_only ? "swa" : "comp",
                      pair_name(L.config).c_str(), L.config.live_heads, T, cold ? "cold" : "warm", e.what());
          ++failures;
        }
        std::fflush(stdout);
        results.push_back(r);
      }
    }
  }
  if (!a.json.empty()) {
    nlohmann::json j = {{"device", device_name()},
                        {"copy_bandwidth_gbps", bw / 1e9},
                        {"calls_per_graph", kSetsPerGraph},
                        {"replays", a.replays},
                        {"results", results},
                        {"occupancy", occupancy}};
    std::ofstream f(a.json);
    if (!f) throw Error(ErrorCode::kInvalidArgument, "cannot write --json file " + a.json);
    f << j.dump(1) << "\n";
  }
  std::printf("%d failures\n", failures);
  return failures ? 1 : 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Time the decode kernels in CUDA graphs (DESIGN.md \"Measuring\")");
  cmd->add_option("--tokens", args->tokens, "Decode token counts")->delimiter(',');
  cmd->add_option("--heads", args->heads, "Live head counts (64 and 128: head-padded only)")->delimiter(',');
  cmd->add_option("--replays", args->replays, "Timed graph replays per measurement (the median is kept)");
  cmd->add_flag("--no-cold", args->no_cold, "Skip the cold-cache (1M slot) measurements");
  cmd->add_option("--json", args->json, "Write the results as JSON to FILE");
  cmd->add_flag("--allow-no-gpu", args->allow_no_gpu, "Exit 0 (skipped) when there is no GPU driver");
  add_cache_dir_option(cmd, &args->cache_dirs);
  cmd->callback([args] {
    int rc = run_bench(*args);
    if (rc != 0) fail_with(rc);
  });
}

}  // namespace swapjit::cli

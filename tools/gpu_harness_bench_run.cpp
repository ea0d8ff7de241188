// gpu_harness_bench_run.cpp: the runner of `swapjit bench` (DESIGN.md "Measuring"; tools/cmd_bench.cpp
// parses the options). Per-call time = median replay time of a CUDA graph of 16 back-to-back calls over 16
// input sets, / 16; each call follows a small kernel that writes its Q (so PDL cannot overlap a read that
// belongs after the wait). Per-step time: the same graph with, per set, Q writer, kv_insert of the step's
// new SWA rows, decode. Warm = KV caches of 4096 slots (L2-resident); cold = caches of 1M slots with random
// slots. Swap-AB and head-padded in the same run, plus the floors of that run: an empty kernel in the same
// graph shape, and bytes read / measured copy bandwidth. Then the ratio summary; the JIT numbers first.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "jit/compile_key.hpp"
#include "jit/error.hpp"
#include "runtime/driver.hpp"
#include "tools/gpu_harness_bench.hpp"

namespace swapjit::bench {
namespace {

using nlohmann::json;

// The three record pairings that exist in practice (SPEC.md §2.2): SWA format, compressed format.
constexpr int kPairSwa[3] = {kFormatV41Fp8, kFormatV41Fp8, kFormatV4Fp8};
constexpr int kPairComp[3] = {kFormatV41Fp8, kFormatV41Fp4, kFormatV4Fp8};

struct Layer {
  ref::CaseShape shape;  // tokens set per measurement
  LayerConfig config;
  bool swa_only;
  int pair;
};

// V4.1-Flash shapes: window 128; compressed layers topk 512 over 64-slot pages (ratio 2).
Layer bench_layer(int heads, int pair, bool swa_only, int topk) {
  Layer L{};
  ref::CaseShape& s = L.shape;
  s.heads = heads;
  s.tokens = 1;
  s.window = 128;
  s.topk = swa_only ? 0 : topk;
  s.swa_format = kPairSwa[pair];
  s.comp_format = swa_only ? kFormatNone : kPairComp[pair];
  s.swa_page = 64;
  s.comp_page = swa_only ? 0 : 64;
  s.q_layout = kQLayoutChunk16;
  s.out_layout = kOutMxfp8Ofused;
  s.q_h_pad = heads > 64 ? 128 : 64;
  L.config = harness::layer_config_for(s);
  L.swa_only = swa_only;
  L.pair = pair;
  return L;
}

std::string pair_name(const LayerConfig& lc) {
  return lc.topk ? fmt::format("{}+{}", format_name(lc.swa_format), format_name(lc.comp_format))
                 : std::string(format_name(lc.swa_format));
}

std::string us_text(double ms) { return ms >= 0 ? fmt::format("{:.2f}", ms * 1e3) : "-"; }
json us_json(double ms) { return ms >= 0 ? json(ms * 1e3) : json(nullptr); }
json ratio_json(double a, double b) { return a >= 0 && b > 0 ? json(a / b) : json(nullptr); }

json occupancy_row(Service& service, const CompileKey& key) {
  OccupancyInfo oc = swapab_occupancy(service, key);
  std::printf("occupancy %s: %d clusters of %d CTAs (%d threads, %d B smem)", key.describe().c_str(),
              oc.max_clusters, oc.cluster, oc.threads, oc.smem_bytes);
  if (oc.wide_cluster > 0)
    std::printf(
        "; wide shape: %d clusters of %d CTAs, taken by launches of <= %d clusters (tokens x head groups)",
        oc.wide_max_clusters, oc.wide_cluster, oc.wide_max_clusters);
  if (oc.mid_cluster > 0)
    std::printf("; mid shape: %d clusters of %d CTAs, taken by the larger launches of <= %d clusters",
                oc.mid_max_clusters, oc.mid_cluster, oc.mid_max_clusters);
  std::printf("\n  clusters resident by size:");
  json by = json::object();
  for (size_t c = 2; c < oc.by_cluster.size(); ++c) {
    std::printf(" %zu:%d", c, oc.by_cluster[c]);
    by[std::to_string(c)] = oc.by_cluster[c];
  }
  std::printf("\n");
  return {{"key", key.describe()},
          {"max_active_clusters_by_size", by},
          {"max_active_clusters", oc.max_clusters},
          {"cluster", oc.cluster},
          {"threads", oc.threads},
          {"smem_bytes", oc.smem_bytes},
          {"wide_cluster", oc.wide_cluster},
          {"wide_max_active_clusters", oc.wide_max_clusters},
          {"mid_cluster", oc.mid_cluster},
          {"mid_max_active_clusters", oc.mid_max_clusters}};
}

}  // namespace

// The head-padded kernel's head split under `so` (layers of 64 and 128 heads, compressed and SWA-only), as
// {"64 compressed": [groups at T = 1, 2, ...], ...} up to the largest T the bench runs with.
static json headpad_groups_table(const ServiceOptions& so, int comp_topk, int max_tokens) {
  json t = json::object();
  for (int h : {64, 128})
    for (int topk : {comp_topk, 0}) {
      json g = json::array();
      for (int n = 1; n <= max_tokens; ++n) g.push_back(headpad_head_groups_for(so, h, topk, n));
      t[fmt::format("{} {}", h, topk > 0 ? "compressed" : "swa_only")] = g;
    }
  return t;
}

int run_bench(const BenchOptions& a) {
  if (int rc = harness::exit_code_without_gpu("bench", a.allow_no_gpu); rc >= 0) return rc;
  ServiceOptions so;
  so.store.roots = a.roots;
  so.swapab_split_max_tokens = a.split_max_tokens;
  so.swapab_split4_max_tokens = a.split4_max_tokens;
  so.headpad_split_max_tokens = a.headpad_split_max_tokens;
  so.headpad_split4_max_tokens = a.headpad_split4_max_tokens;
  Service service(so);
  harness::make_context_current(so.device);
  harness::LayerPool pool(service);
  BenchKernels kernels;
  harness::Stream stream;

  std::vector<Layer> layers;
  for (bool swa_only : {false, true})
    for (int pair : a.pairs) {
      SWAPJIT_REQUIRE(pair >= 0 && pair < 3, ErrorCode::kInvalidArgument, "bench pairing index outside 0..2");
      if (swa_only && pair == 1) continue;  // the SWA cache of pairing 1 is pairing 0's
      for (int h : a.heads) {
        layers.push_back(bench_layer(h, pair, swa_only, a.topk));
        pool.get(layers.back().config);
      }
    }
  SWAPJIT_REQUIRE(!layers.empty(), ErrorCode::kInvalidArgument, "bench: no layer (empty --heads or pairings)");
  auto t0 = std::chrono::steady_clock::now();
  try {
    service.warmup();
  } catch (const Error& e) {
    // Reported, not fatal: each measurement of a failing key then fails on its own, naming it.
    std::printf("warmup failed (measurements continue): %s\n", e.what());
  }
  std::printf("device: %s\nwarmup: %.1f s (%zu layers)\n", device_name().c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), layers.size());
  CacheSet caches(kernels, stream.get());
  kernels.set_copy_triggers_dependents(a.pdl_producer);  // after the caches' fills: only the timed graphs' Q writers
  kernels.set_copy_carveout(a.writer_carveout);
  int failures = 0;
  json doc = {{"device", device_name()},
              {"calls_per_graph", kSetsPerGraph},
              {"replays", a.replays},
              {"tokens", a.tokens},
              {"heads", a.heads},
              {"topk", a.topk},  // the compressed layers' (SWA-only layers: 0)
              {"q_writer_triggers_dependents", a.pdl_producer},
              {"q_writer_carveout_percent", a.writer_carveout},
              {"swapab_split_max_tokens",
               {{"16 compressed", swapab_split_max_tokens_for(so, 16, 512)},
                {"32 compressed", swapab_split_max_tokens_for(so, 32, 512)},
                {"swa_only", swapab_split_max_tokens_for(so, 16, 0)}}},
              {"swapab_split4_max_tokens",
               {{"32 compressed", swapab_split4_max_tokens_for(so, 32, 512)},
                {"32 swa_only", swapab_split4_max_tokens_for(so, 32, 0)}}},
              {"swapab_split_also_at",  // one more split token count past the caps (0: none)
               {{"16 compressed", swapab_split_also_at_for(so, 16, 512)},
                {"32 compressed four", swapab_split4_also_at_for(so, 32, 512)}}},
              {"headpad_head_groups",
               headpad_groups_table(so, a.topk, a.tokens.empty() ? 1 : *std::max_element(a.tokens.begin(), a.tokens.end()))}};
  json results = json::array(), occupancy = json::array();
  std::vector<CompileKey> occupancy_keys;  // reported once each
  // Written after the JIT part, after each layer and at the end ("complete": true), so that a run cut
  // short by a timeout still leaves the rows it measured.
  auto write_json = [&](bool complete) {
    if (a.json.empty()) return;
    doc["results"] = results;
    doc["rows"] = measurement_rows(results);
    doc["occupancy"] = occupancy;
    doc["failures"] = failures;
    doc["complete"] = complete;
    if (a.kernels) doc["summary"] = summarize(results);
    std::ofstream f(a.json);
    if (!f) throw Error(ErrorCode::kInvalidArgument, "cannot write --json file " + a.json);
    f << doc.dump(1) << "\n";
  };
  if (a.jit)
    doc["jit"] = measure_jit(service, pool.get(layers.front().config), caches, kernels, stream.get(), a.jit_options,
                             &failures);
  write_json(false);
  if (a.kernels) {
    const double bw = measure_copy_bandwidth(kernels, stream.get());
    std::printf("copy bandwidth (read + write): %.0f GB/s\n", bw / 1e9);
    doc["copy_bandwidth_gbps"] = bw / 1e9;
    std::printf("%-5s %-16s %5s %4s %-5s %9s %9s %6s %9s %9s %6s %8s %8s %8s\n", "layer", "kv", "heads", "T",
                "cache", "swapab", "headpad", "ratio", "step_sw", "step_hp", "s_rat", "empty", "bw_floor",
                "MB_read");
    for (Layer& L : layers) {
      DecodeAttention& layer = pool.get(L.config);
      const char* kind = L.swa_only ? "swa" : "comp";
      // Swap-AB is timed at every T its static conditions allow (past swapab_max_tokens too: the crossover
      // is what this bench is for).
      const bool has_swapab = harness::swapab_eligible(L.shape, harness::kNoTokenCap);
      // Every swap-AB key the layer launches: its own and its head splits' (the 8-head key's smem differs);
      // each key once over the bench.
      for (const CompileKey& key : layer.keys()) {
        if (!has_swapab || key.family != Family::kSwapabDecode) continue;
        if (std::find(occupancy_keys.begin(), occupancy_keys.end(), key) != occupancy_keys.end()) continue;
        occupancy_keys.push_back(key);
        try {
          occupancy.push_back(occupancy_row(service, key));
        } catch (const Error& e) {
          std::printf("occupancy query failed: %s\n", e.what());
          ++failures;
        }
      }
      for (bool cold : {false, true}) {
        if (cold && a.no_cold) continue;
        for (int T : a.tokens) {
          json r = {{"layer", L.swa_only ? "swa_only" : "compressed"}, {"kv", pair_name(L.config)},
                    {"heads", L.config.live_heads}, {"tokens", T}, {"cache", cold ? "cold" : "warm"}};
          try {
            BenchInputs in(L.config, T, cold, caches, uint64_t(T) * 131 + uint64_t(L.pair));
            auto decode = [&](KernelChoice c) {
              return time_calls(in, kernels, stream.get(), a.replays,
                                [&](const DecodeStep& st) { layer.forward(st, stream.get(), c); });
            };
            auto step = [&](KernelChoice c) {
              return time_sets(in, kernels, stream.get(), a.replays, [&](const BenchInputs::Set& st) {
                layer.insert(st.insert, /*swa=*/true, stream.get());
                layer.forward(st.step, stream.get(), c);
              });
            };
            const double sw = has_swapab ? decode(KernelChoice::kSwapab) : -1;
            const double hp = decode(KernelChoice::kHeadpad);
            // Layers of 64 or more heads: the head-padded kernel on one cluster a token as well (the mapping
            // unsplit; `headpad` is what the dispatch launches, possibly split: headpad_groups).
            const int hp_groups = headpad_head_groups_for(so, L.config.live_heads, L.config.topk, T);
            const double hp1 = L.config.live_heads < 64 ? -1
                               : hp_groups == 1        ? hp
                                                       : time_calls(in, kernels, stream.get(), a.replays,
                                                                    [&](const DecodeStep& st) {
                                                                      layer.forward(st, stream.get(),
                                                                                    KernelChoice::kHeadpad, 1);
                                                                    });
            const double ssw = has_swapab && !a.no_step ? step(KernelChoice::kSwapab) : -1;
            const double shp = a.no_step ? -1 : step(KernelChoice::kHeadpad);
            const double empty = time_calls(in, kernels, stream.get(), a.replays, [&](const DecodeStep& st) {
              kernels.launch_empty(unsigned(st.num_tokens), stream.get());
            });
            const double bytes = double(in.bytes_read_per_call());
            const double bw_floor_ms = bytes / bw * 1e3;
            r["swapab_us"] = us_json(sw);
            r["headpad_us"] = us_json(hp);
            if (hp1 >= 0) r["headpad_1cluster_us"] = us_json(hp1), r["headpad_groups"] = hp_groups;
            r["ratio"] = ratio_json(sw, hp);
            r["step_swapab_us"] = us_json(ssw);
            r["step_headpad_us"] = us_json(shp);
            r["step_ratio"] = ratio_json(ssw, shp);
            r["empty_floor_us"] = empty * 1e3;
            r["bandwidth_floor_us"] = bw_floor_ms * 1e3;
            r["bytes_read"] = bytes;
            std::printf("%-5s %-16s %5d %4d %-5s %9s %9s %6s %9s %9s %6s %8.2f %8.2f %8.2f\n", kind,
                        pair_name(L.config).c_str(), L.config.live_heads, T, cold ? "cold" : "warm",
                        us_text(sw).c_str(), us_text(hp).c_str(),
                        sw >= 0 ? fmt::format("{:.3f}", sw / hp).c_str() : "-", us_text(ssw).c_str(),
                        us_text(shp).c_str(), ssw >= 0 ? fmt::format("{:.3f}", ssw / shp).c_str() : "-",
                        empty * 1e3, bw_floor_ms * 1e3, bytes / 1e6);
            if (hp1 >= 0 && hp_groups > 1)
              std::printf("      headpad above on %d clusters a token; on one: %.2f us\n", hp_groups, hp1 * 1e3);
          } catch (const Error& e) {
            r["error"] = e.what();
            std::printf("%-5s %-16s %5d %4d %-5s FAILED: %s\n", kind, pair_name(L.config).c_str(),
                        L.config.live_heads, T, cold ? "cold" : "warm", e.what());
            ++failures;
          }
          std::fflush(stdout);
          results.push_back(r);
        }
      }
      write_json(false);
    }
    print_summary(summarize(results));
  }
  write_json(true);
  std::printf("%d failures\n", failures);
  return failures ? 1 : 0;
}

}  // namespace swapjit::bench

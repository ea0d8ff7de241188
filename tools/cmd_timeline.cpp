// cmd_timeline.cpp: `swapjit timeline`, a development tool for the decode kernels (GPU): compiles one key's
// source with -DSWAPJIT_TIMELINE (thread 0 of every CTA stamps %clock64 and %globaltimer at the phase
// boundaries, timeline_stamps.cuh dc::stamp()), launches it eagerly on a random case (full lists, warm L2), and
// prints per cluster rank the median time of each boundary since the cluster's first CTA entered, over
// the launches. The instrumented cubin is never cached and never used by a layer. With --chained K each
// timed sample is K launches back to back on one stream (programmatic dependent launch on, as in a layer's
// graph), and the stamps are the last launch's: its prologue overlaps the previous launch's tail, as a graph's
// calls do, where a lone launch (the default) starts on an idle GPU (H200, perf-notes session 34 run 5: the
// phases after the wait agree with a lone launch's within ~1 %). Neither is the bench's graph, where a Q writer
// that never triggers early sits between the calls, so the work before the dependency wait ("entry" to
// "dependency wait" here) is on a call's path there.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jit/error.hpp"
#include "jit/kernel_family.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "jit/specializer.hpp"
#include "kernels_src/swapab_traits.cuh"
#include "reference/step_case.hpp"
#include "runtime/driver.hpp"
#include "runtime/launcher.hpp"
#include "runtime/module_cache.hpp"
#include "runtime/step_params.hpp"
#include "tools/commands.hpp"
#include "tools/gpu_harness.hpp"
#include "tools/gpu_harness_bench.hpp"

namespace swapjit::cli {
namespace {

constexpr int kPoints =
    30;  // as timeline_stamps.cuh kTimelinePoints (the CTA capacity is read from the module)
// The stamp points of each kernel as (stamp index, name), in the order they are printed: the order of the
// kernel's phases (swapab_decode.cuh, swapab_tile_wgmma.cuh, headpad_decode.cuh). Indented names are the
// points inside a phase, stamped by thread 0 (its own view of the phase, not the CTA's).
using Points = std::vector<std::pair<int, std::string>>;
const Points kSwapabPoints = {{0, "entry"},
                              {1, "dependency wait"},
                              {2, "ids + Q (barrier 1)"},
                              {16, "  record loads issued (thread 0)"},
                              {12, "  Q RoPE (loads in flight)"},
                              {17, "  first item stored (thread 0)"},
                              {13, "  gather stored (thread 0)"},
                              {23, "  fastest warp's gather stored"},
                              {22, "  slowest warp's gather stored"},
                              {3, "gather (barrier 2)"},
                              {18, "  S^T first wgmma issued"},
                              {19, "  S^T wgmmas issued"},
                              {14, "  S^T wgmma retired"},
                              {4, "S^T (barrier 3)"},
                              {25, "  fastest warp's softmax done"},
                              {24, "  slowest warp's softmax done"},
                              {5, "softmax (barrier 4)"},
                              {20, "  O^T first wgmma issued"},
                              {21, "  O^T wgmmas issued"},
                              {15, "  O^T wgmma retired"},
                              {6, "O^T + export"},
                              {7, "publish cluster barrier"},
                              {8, "copies issued"},
                              {26, "  (m, L) rows arrived (thread 0)"},
                              {27, "  merge weights (thread 0)"},
                              {9, "copies arrived"},
                              {28, "  first task's slices read (thread 0)"},
                              {29, "  first task merged, before its epilogue"},
                              {10, "merge done"},
                              {11, "exit barrier"}};
const Points kHeadpadPoints = {{0, "entry"},
                               {1, "dependency wait"},
                               {11, "  Q loads issued, RoPE coefs"},
                               {7, "  Q stored"},
                               {23, "  fastest warp's first chunks stored"},
                               {22, "  slowest warp's first chunks stored"},
                               {19, "  first chunk stored (thread 0)"},
                               {2, "Q + first two chunks"},
                               {16, "  first chunk: S retired"},
                               {17, "  first chunk: P stored"},
                               {18, "  first chunk: P V issued"},
                               {20, "  first chunk: P V retired"},
                               {12, "  last chunk: S retired"},
                               {13, "  last chunk: P stored"},
                               {14, "  last chunk: P V issued"},
                               {15, "  last chunk: P V retired"},
                               {3, "chunk loop done"},
                               {4, "export + publish barrier"},
                               {8, "  copies arrived (push merge)"},
                               {5, "merge done"},
                               {6, "exit barrier"}};

struct TimelineArgs {
  int heads = 16, tokens = 1, launches = 50, chained = 1;
  bool swa_only = false, allow_no_gpu = false, narrow = false, lean = false;
  std::string kv = "v41_fp8+v41_fp8", variant, kernel = "swapab";
};

using bench::median;

int run(const TimelineArgs& a) {
  if (int code = harness::exit_code_without_gpu("timeline", a.allow_no_gpu); code >= 0) return code;
  harness::make_context_current(0);
  const auto plus = a.kv.find('+');
  const int swa_fmt = parse_format(a.kv.substr(0, plus), "kv");
  const int comp_fmt =
      a.swa_only ? kFormatNone : parse_format(plus == std::string::npos ? a.kv : a.kv.substr(plus + 1), "kv");
  const int topk = a.swa_only ? 0 : 512;
  SWAPJIT_REQUIRE(a.kernel == "swapab" || a.kernel == "headpad", ErrorCode::kInvalidArgument,
                  "timeline --kernel: swapab or headpad, not \"" + a.kernel + "\"");
  const bool swapab = a.kernel == "swapab";
  const Points& names = swapab ? kSwapabPoints : kHeadpadPoints;
  const int kUsedPoints = static_cast<int>(names.size());
  CompileKey key =
      make_decode_key(swapab ? Family::kSwapabDecode : Family::kHeadpadDecode, "sm_90a", a.heads, 128, topk,
                      swa_fmt, comp_fmt, 64, a.swa_only ? 0 : 64, kQLayoutChunk16, kOutMxfp8Ofused);
  if (!a.variant.empty()) key.variant = a.variant;
  key.validate();
  const CompiledKernel ck =
      compile_source(key, render_timeline_source(key, a.lean), family_info(key.family).entry_expression);
  harness::RawModule mod(std::string(ck.cubin.begin(), ck.cubin.end()));
  KernelHandle h;
  h.function = mod.function(ck.lowered_name.c_str());
  h.plan = launch_plan(key);
  h.key = key;
  h.key_json = key.canonical_json();
  resolve_shape_entries(h, mod.handle());  // as ModuleCache::load: few tokens take the wide shape
  set_launch_attributes(h);
  if (a.narrow) h.plan.wide_max_items = h.plan.mid_max_items = 0;  // unless asked for the portable one
  size_t tl_bytes = 0;
  const CUdeviceptr tl = mod.global("swapjit_timeline", &tl_bytes);
  const size_t max_ctas = tl_bytes / (size_t(kPoints) * 2 * 8);  // [CTA][point][clock, globaltimer]

  ref::CaseShape shape;
  shape.tokens = a.tokens, shape.heads = a.heads, shape.window = 128, shape.topk = topk;
  shape.swa_format = swa_fmt, shape.comp_format = comp_fmt, shape.swa_page = 64, shape.comp_page = 64;
  shape.q_layout = kQLayoutChunk16, shape.out_layout = kOutMxfp8Ofused;
  shape.q_h_pad = a.heads > 64 ? 128 : 64;
  ref::CaseOptions opt;
  opt.full_lengths = true, opt.minus_one_rate = 0, opt.duplicate_rate = 0;
  const ref::StepCase c = ref::make_case(shape, opt);
  harness::DeviceStep ds(c);
  DecodeParams params = make_decode_params(ds.step());
  harness::Stream stream;

  const LaunchShape shape_used = launch_shape(h.plan, a.tokens);
  const int cl = int(shape_used.cluster_x), ctas = int(shape_used.grid_x);
  SWAPJIT_REQUIRE(size_t(ctas) <= max_ctas, ErrorCode::kInvalidArgument,
                  "timeline: at most " + std::to_string(max_ctas) + " CTAs");
  // since[rank][point]: ns since the first entry of the CTA's cluster; cyc[rank][point]: own clock64 delta.
  std::vector<std::vector<std::vector<double>>> since(cl, std::vector<std::vector<double>>(kUsedPoints)),
      cyc = since;
  std::vector<unsigned long long> raw(max_ctas * kPoints * 2);
  // Across the grid (ns since the grid's first CTA entered): when the last token's cluster entered, and when
  // the last cluster left its exit barrier. Why: a step's time is its slowest cluster's, and clusters that
  // start late (the launch hands them out one after another) are invisible in the per-cluster medians below.
  std::vector<double> last_start, median_start, last_exit;
  const int last_point = names.back().first;
  // The point the times count from: the cluster's first entry, or chained, its first dependency wait (the
  // entries there are the previous launch's time earlier: the CTAs wait for it under PDL).
  const int ref = a.chained > 1 ? 1 : 0;
  SWAPJIT_CU(driver().cuMemsetD8(tl, 0, raw.size() * 8));
  for (int l = 0; l < a.launches + 3; ++l) {  // 3 untimed: module, L2 and instruction caches warm up
    // Every stamp the last launch writes comes after its dependency wait, so after every earlier launch's
    // stamps, except its entry (before the wait), which follows the earlier launches' entries: the buffer
    // holds the last launch's stamps alone.
    for (int k = 0; k < a.chained; ++k) launch_kernel(h, a.tokens, &params, stream.get());
    stream.sync();
    SWAPJIT_CU(driver().cuMemcpyDtoH(raw.data(), tl, raw.size() * 8));
    if (l < 3) continue;
    const auto gt = [&](int t, int r, int point) {
      return raw[(size_t(t * cl + r) * kPoints + point) * 2 + 1];
    };
    unsigned long long grid_first = ~0ull;
    for (int t = 0; t < a.tokens; ++t)
      for (int r = 0; r < cl; ++r) grid_first = std::min(grid_first, gt(t, r, 0));
    std::vector<double> starts;
    double exit_max = 0;
    for (int t = 0; t < a.tokens; ++t) {
      unsigned long long first = ~0ull, last = 0;
      for (int r = 0; r < cl; ++r)
        first = std::min(first, gt(t, r, 0)), last = std::max(last, gt(t, r, last_point));
      starts.push_back(double(first - grid_first));
      exit_max = std::max(exit_max, double(last - grid_first));
    }
    last_start.push_back(*std::max_element(starts.begin(), starts.end()));
    median_start.push_back(median(starts));
    last_exit.push_back(exit_max);
    for (int t = 0; t < a.tokens; ++t) {
      unsigned long long first = ~0ull;
      for (int r = 0; r < cl; ++r) first = std::min(first, raw[(size_t(t * cl + r) * kPoints + ref) * 2 + 1]);
      for (int r = 0; r < cl; ++r)
        for (int k = 0; k < kUsedPoints; ++k) {
          const size_t at = (size_t(t * cl + r) * kPoints + names[k].first) * 2;
          if (raw[at + 1] == 0)
            continue;  // a point this key never passes (the pull merge's "copies arrived")
          since[r][k].push_back(double(raw[at + 1]) - double(first));
          cyc[r][k].push_back(double(raw[at]) - double(raw[(size_t(t * cl + r) * kPoints + ref) * 2]));
        }
    }
  }
  const std::string chain = a.chained > 1 ? ", each the last of " + std::to_string(a.chained) + " back to back" : "";
  std::printf("timeline: %s, T=%d, clusters of %d, %d launches (median over launches and tokens)%s\n",
              key.describe().c_str(), a.tokens, cl, a.launches, chain.c_str());
  std::printf("%-26s", a.chained > 1 ? "point (ns since cluster's first dependency wait | own cycles since it)"
                                      : "point (ns since cluster's first entry | own cycles)");
  std::printf("\n%-26s", "");
  const int swa_tiles = swapab ? swapab_swa_tiles(key.shape()) : 0;
  for (int r = 0; r < cl; ++r) {
    if (swapab)
      std::printf("  rank %d (%s)      ", r, r < swa_tiles ? "swa " : "comp");
    else
      std::printf("  rank %-2d            ", r);
  }
  std::printf("\n");
  for (int k = 0; k < kUsedPoints; ++k) {
    std::printf("%-26s", names[k].second.c_str());
    for (int r = 0; r < cl; ++r) {
      if (since[r][k].empty())
        std::printf("  %7s | %7s", "-", "-");
      else
        std::printf("  %7.0f | %7.0f", median(since[r][k]), median(cyc[r][k]));
    }
    std::printf("\n");
  }
  std::printf(
      "grid (ns since its first CTA entered, median over launches): clusters entered by %.0f (median %.0f), "
      "the last cluster exited at %.0f\n",
      median(last_start), median(median_start), median(last_exit));
  return 0;
}

}  // namespace

void add_timeline_command(CLI::App& app) {
  auto a = std::make_shared<TimelineArgs>();
  CLI::App* cmd = app.add_subcommand(
      "timeline", "Development: phase timeline of one decode launch (an instrumented build of the key, GPU)");
  cmd->add_option("--kernel", a->kernel, "swapab or headpad");
  cmd->add_option("--heads", a->heads, "Live heads (swapab: 8, 16 or 32; headpad: 8 to 128)");
  cmd->add_option("--tokens", a->tokens, "Decode tokens T");
  cmd->add_option("--kv", a->kv, "Record formats SWA+compressed, e.g. v41_fp8+v41_fp4");
  cmd->add_flag("--swa-only", a->swa_only, "An SWA-only layer (no compressed list)");
  cmd->add_option("--variant", a->variant, "Kernel variant (default: the arch's preferred for the kernel)");
  cmd->add_option("--launches", a->launches, "Timed launches");
  cmd->add_option("--chained", a->chained,
                  "Launches back to back per timed sample (PDL on); the last one's stamps are kept")
      ->check(CLI::Range(1, 1000));
  cmd->add_flag("--lean", a->lean,
                "No per-warp points (their loop delays thread 0's later stamps by a few hundred cycles)");
  cmd->add_flag("--narrow", a->narrow,
                "swapab: the portable cluster shape even where the wide or mid one would run");
  cmd->add_flag("--allow-no-gpu", a->allow_no_gpu, "Exit 0 (skipped) when there is no GPU driver");
  cmd->callback([a] {
    if (int rc = run(*a); rc != 0) fail_with(rc);
  });
}

}  // namespace swapjit::cli

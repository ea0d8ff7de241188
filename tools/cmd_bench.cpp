// cmd_bench.cpp: `swapjit bench`: the command line of the bench runner (tools/gpu_harness_bench_run.cpp,
// DESIGN.md "Measuring"), and `swapjit bench --compare A.json B.json`, which needs no GPU: the two runs'
// swapab/headpad ratios row by row, non-zero exit when any pair disagrees by more than 10%.
#include <fstream>
#include <memory>

#include "jit/error.hpp"
#include "tools/commands.hpp"
#include "tools/gpu_harness_bench.hpp"

namespace swapjit::cli {
namespace {

struct BenchArgs {
  bench::BenchOptions options;
  bool quick = false, no_jit = false, jit_only = false;
  std::vector<std::string> compare;
  double tolerance = 0.10;
  std::vector<std::string> cache_dirs;
};

nlohmann::json load_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(ErrorCode::kInvalidArgument, "--compare: cannot read " + path);
  try {
    nlohmann::json j = nlohmann::json::parse(f);
    if (!j.contains("results") || !j["results"].is_array())
      throw Error(ErrorCode::kInvalidArgument, "--compare: " + path + " has no \"results\" array");
    return j;
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorCode::kInvalidArgument, "--compare: " + path + " is not JSON: " + e.what());
  }
}

int run_compare(const BenchArgs& a) {
  nlohmann::json x = load_json(a.compare[0]), y = load_json(a.compare[1]);
  std::printf("A = %s\nB = %s\n", a.compare[0].c_str(), a.compare[1].c_str());
  for (const auto* j : {&x, &y})
    if (!j->value("complete", true))
      std::printf("note: %s was cut short (\"complete\": false): only its measured rows are compared\n",
                  (j == &x ? a.compare[0] : a.compare[1]).c_str());
  int matched = 0;
  const int bad = bench::compare_runs(x, y, a.tolerance, &matched);
  if (matched == 0) {
    std::printf("compare: no ratio present in both files\n");
    return 1;
  }
  return bad ? 1 : 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  bench::BenchOptions& o = args->options;
  CLI::App* cmd = app.add_subcommand(
      "bench", "Time the decode kernels and whole steps in CUDA graphs, the JIT and host overhead "
               "(DESIGN.md \"Measuring\"); or compare two runs");
  CLI::Option* tokens = cmd->add_option("--tokens", o.tokens, "Decode token counts")->delimiter(',');
  cmd->add_option("--heads", o.heads, "Live head counts (64 and 128: head-padded only)")->delimiter(',');
  cmd->add_option("--pairs", o.pairs,
                  "Record pairings by index: 0 v41_fp8+v41_fp8, 1 v41_fp8+v41_fp4, 2 v4_fp8+v4_fp8 (SWA-only layers "
                  "of 0 and 2)")
      ->delimiter(',')
      ->check(CLI::Range(0, 2));
  cmd->add_option("--topk", o.topk, "The compressed layers' topk (512: V4.1-Flash; 1024: V4-Pro)")
      ->check(CLI::Range(1, 4096));
  CLI::Option* replays =
      cmd->add_option("--replays", o.replays, "Timed graph replays per measurement (the median is kept)");
  cmd->add_flag("--quick", args->quick,
                "Fewer token counts (1,4,16,64) and 10 replays, unless --tokens / --replays are given");
  cmd->add_flag("--no-cold", o.no_cold, "Skip the cold-cache (1M slot) measurements");
  cmd->add_flag("--no-step", o.no_step, "Skip the whole-step graphs (Q writer, kv_insert, decode)");
  cmd->add_flag("--pdl-producer", o.pdl_producer,
                "The Q writer before each call triggers its dependents at entry, as a PDL-aware Q projection would: "
                "the decode kernel's launch and prologue overlap it, its reads still wait (DESIGN.md's default: off)");
  cmd->add_option("--writer-carveout", o.writer_carveout,
                  "The Q writer's preferred shared-memory carve-out in percent (-1: no preference, DESIGN.md's "
                  "default; 100: the maximum, as a GEMM Q projection has)")
      ->check(CLI::Range(-1, 100));
  add_split_options(cmd, &o.split_max_tokens, &o.split4_max_tokens, &o.headpad_split_max_tokens,
                    &o.headpad_split4_max_tokens);
  cmd->add_flag("--no-jit", args->no_jit, "Skip the JIT and host-overhead measurements (run first by default)");
  cmd->add_flag("--jit", args->jit_only, "Only the JIT and host-overhead measurements (no kernel tables)");
  cmd->add_option("--jit-preset", o.jit_options.preset, "Model preset whose warmup is timed (cold and warm cache)");
  cmd->add_option("--jit-tp", o.jit_options.tp, "TP size of that preset");
  cmd->add_option("--jit-cold-layers", o.jit_options.cold_layers,
                  "Time the warmup of only the preset's first N layer configs (0 = all)");
  cmd->add_option("--jit-calls", o.jit_options.calls, "forward() calls timed on the host, per measurement");
  cmd->add_option("--json", o.json, "Write the results as JSON to FILE");
  cmd->add_option("--compare", args->compare,
                  "Compare two bench JSON files (A B): per row the swapab/headpad ratios and whether they "
                  "agree within --tolerance; no GPU needed; exit 1 on any disagreement")
      ->expected(2);
  cmd->add_option("--tolerance", args->tolerance, "Relative agreement of --compare (max/min - 1)");
  cmd->add_flag("--allow-no-gpu", o.allow_no_gpu, "Exit 0 (skipped) when there is no GPU driver");
  add_cache_dir_option(cmd, &args->cache_dirs);
  cmd->callback([args, tokens, replays] {
    BenchArgs a = *args;
    if (!a.compare.empty()) {
      int rc = run_compare(a);
      if (rc != 0) fail_with(rc);
      return;
    }
    bench::BenchOptions o = a.options;
    if (a.quick && tokens->count() == 0) o.tokens = {1, 4, 16, 64};
    if (a.quick && replays->count() == 0) o.replays = 10;
    if (a.no_jit && a.jit_only) throw Error(ErrorCode::kInvalidArgument, "--jit and --no-jit together");
    o.jit = !a.no_jit;
    o.kernels = !a.jit_only;
    o.roots = resolve_roots(a.cache_dirs);
    int rc = bench::run_bench(o);
    if (rc != 0) fail_with(rc);
  });
}

}  // namespace swapjit::cli

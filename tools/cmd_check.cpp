// cmd_check.cpp: `swapjit check`: the command line of the check runner (tools/gpu_harness_check.cpp):
// both decode kernels against the fp64 reference, kv_insert against the host encoder, determinism.
#include <memory>

#include "tools/commands.hpp"
#include "tools/gpu_harness_check.hpp"

namespace swapjit::cli {
namespace {

struct CheckArgs {
  harness::CheckOptions options;
  std::vector<std::string> cache_dirs;
};

}  // namespace

void add_check_command(CLI::App& app) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* cmd = app.add_subcommand("check", "Check the decode kernels and kv_insert against the fp64 "
                                              "reference on a GPU (SPEC.md §4)");
  cmd->add_option("--cases", args->options.cases, "Number of cases (0 = the whole list once; more wraps with new seeds)");
  cmd->add_option("--only", args->options.only, "Only these cases, by tag (a name's first word in --list, e.g. sw3)")
      ->delimiter(',');
  cmd->add_option("--seed", args->options.seed, "Seed of the random inputs");
  cmd->add_option("--kernel", args->options.kernel, "Which decode kernel: swapab, headpad or both")
      ->check(CLI::IsMember({"swapab", "headpad", "both"}));
  cmd->add_option("--json", args->options.json, "Write the results as JSON to FILE");
  cmd->add_flag("--allow-no-gpu", args->options.allow_no_gpu, "Exit 0 (skipped) when there is no GPU driver");
  add_split_options(cmd, &args->options.split_max_tokens, &args->options.split4_max_tokens,
                    &args->options.headpad_split_max_tokens, &args->options.headpad_split4_max_tokens);
  cmd->add_flag("--skip-insert", args->options.skip_insert, "Do not check kv_insert");
  cmd->add_flag("--list", args->options.list, "Build the cases on the host and list them (no GPU needed)");
  add_cache_dir_option(cmd, &args->cache_dirs);
  cmd->callback([args] {
    harness::CheckOptions o = args->options;
    o.roots = resolve_roots(args->cache_dirs);
    int rc = harness::run_check(o);
    if (rc != 0) fail_with(rc);
  });
}

}  // namespace swapjit::cli

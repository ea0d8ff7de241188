// commands.hpp: how the swapjit CLI's command groups plug into main.cpp. Each group lives in its own
// tools/cmd_*.cpp and registers its subcommands through one function. A command's callback reports
// failure by throwing swapjit::Error (main prints it and exits 1) or CLI::RuntimeError(code) for a plain
// non-zero exit after it printed its own report.
#pragma once
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "runtime/cubin_store.hpp"

namespace swapjit::cli {

// Command groups (tools/cmd_<group>.cpp).
void add_precompile_command(CLI::App& app);
void add_cache_command(CLI::App& app);
void add_explain_command(CLI::App& app);
void add_info_command(CLI::App& app);
// Written in tools/cmd_check.cpp and tools/cmd_bench.cpp by other engineers. Declared weak so the CLI
// links before those files exist; main() skips a group whose function is absent (null).
void add_check_command(CLI::App& app) __attribute__((weak));
void add_bench_command(CLI::App& app) __attribute__((weak));
void add_timeline_command(CLI::App& app) __attribute__((weak));

// Helpers shared by the command groups (tools/cli_common.cpp).
// Adds `--cache-dir DIR` (repeatable; colon lists allowed) to `cmd`, stored in `*dirs`.
void add_cache_dir_option(CLI::App* cmd, std::vector<std::string>* dirs);
// Adds `--split-max-tokens N` and `--split4-max-tokens N` (ServiceOptions::swapab_split_max_tokens and
// swapab_split4_max_tokens: -1 the measured default, 0 never, else the cap) to `cmd`, and the head-padded
// kernel's `--headpad-split-max-tokens N` / `--headpad-split4-max-tokens N` (layers of 64 or more heads).
void add_split_options(CLI::App* cmd, int* split_max_tokens, int* split4_max_tokens, int* headpad_split_max_tokens,
                       int* headpad_split4_max_tokens);
// Roots from --cache-dir if given, else SWAPJIT_CACHE_DIR / the default.
std::vector<std::string> resolve_roots(const std::vector<std::string>& dirs);
// SWAPJIT_JOBS, else the hardware threads (at least 1).
int default_jobs();
// "12.3 KiB"
std::string human_bytes(long long bytes);
// Ends the command with a non-zero exit code after it printed its own report.
[[noreturn]] void fail_with(int code);

}  // namespace swapjit::cli

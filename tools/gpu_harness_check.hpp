// gpu_harness_check.hpp: the runner of `swapjit check`, callable without the CLI (the CPU tests run it
// over a fake driver). tools/cmd_check.cpp maps the command line onto CheckOptions.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tools/gpu_harness.hpp"

namespace swapjit::harness {

struct CheckOptions {
  int cases = 0;  // 0 = the whole list once
  std::vector<std::string> only;  // case tags to keep ("sw3": a name's first word), before `cases`; empty = all
  uint64_t seed = 1;
  std::string kernel = "both";  // swapab, headpad or both
  std::string json;             // write the rows as JSON here ("" = no file)
  bool allow_no_gpu = false;
  bool skip_insert = false;
  bool list = false;
  std::vector<std::string> roots;  // cache roots; empty = SWAPJIT_CACHE_DIR / the default
  int split_max_tokens = -1;       // ServiceOptions::swapab_split_max_tokens (-1: the per-head default)
  int split4_max_tokens = -1;      // ServiceOptions::swapab_split4_max_tokens (-1: the per-head default)
  int headpad_split_max_tokens = -1;   // ServiceOptions::headpad_split_max_tokens (-1: the default)
  int headpad_split4_max_tokens = -1;  // ServiceOptions::headpad_split4_max_tokens (-1: the default)
};

// Prints the table (or, with `list`, the case list) to stdout. Returns the exit code: 0 all passed, 1 a
// check failed (or a listed case is invalid), 2 no GPU (without allow_no_gpu). Throws Error for a setup
// failure outside the cases.
int run_check(const CheckOptions& options);

}  // namespace swapjit::harness

// cli_common.cpp: helpers shared by the swapjit CLI's command groups.
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "cache/disk_cache.hpp"
#include "tools/commands.hpp"

namespace swapjit::cli {

void add_cache_dir_option(CLI::App* cmd, std::vector<std::string>* dirs) {
  cmd->add_option("--cache-dir", *dirs,
                  "cache root(s); the first is writable, the rest read-only (default: SWAPJIT_CACHE_DIR, "
                  "else $XDG_CACHE_HOME/swapjit or ~/.cache/swapjit)");
}

void add_split_options(CLI::App* cmd, int* split_max_tokens, int* split4_max_tokens, int* headpad_split_max_tokens,
                       int* headpad_split4_max_tokens) {
  cmd->add_option("--split-max-tokens", *split_max_tokens,
                  "swap-AB at 16 and 32 heads: steps of at most N tokens split each token's heads over two "
                  "clusters; 0 never, -1 the per-head default (docs/perf-notes.md)")
      ->check(CLI::Range(-1, 1 << 20));
  cmd->add_option(
         "--split4-max-tokens", *split4_max_tokens,
         "swap-AB at 32 heads: steps of at most N tokens split each token's heads over four clusters "
         "(checked first); 0 never, -1 the default")
      ->check(CLI::Range(-1, 1 << 20));
  cmd->add_option("--headpad-split-max-tokens", *headpad_split_max_tokens,
                  "head-padded kernel at 64 or more heads: steps of at most N tokens split each token's heads "
                  "over two clusters; 0 never, -1 the default")
      ->check(CLI::Range(-1, 1 << 20));
  cmd->add_option("--headpad-split4-max-tokens", *headpad_split4_max_tokens,
                  "head-padded kernel at 64 or more heads: ... over four clusters (checked first); 0 never, -1 the "
                  "default")
      ->check(CLI::Range(-1, 1 << 20));
}

std::vector<std::string> resolve_roots(const std::vector<std::string>& dirs) {
  std::vector<std::string> roots;
  for (const auto& d : dirs) {
    size_t start = 0;
    while (start <= d.size()) {
      size_t end = d.find(':', start);
      if (end == std::string::npos) end = d.size();
      if (end > start) roots.push_back(d.substr(start, end - start));
      start = end + 1;
    }
  }
  if (roots.empty()) roots = cache::DiskCache::default_roots();
  return roots;
}

int default_jobs() {
  if (const char* env = std::getenv("SWAPJIT_JOBS"); env && *env) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

std::string human_bytes(long long bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

void fail_with(int code) { throw CLI::RuntimeError(code); }

}  // namespace swapjit::cli

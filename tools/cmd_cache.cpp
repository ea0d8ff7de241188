// cmd_cache.cpp: `swapjit cache ls | verify | gc`: inspect, check and trim the on-disk cubin cache.
// ls and verify only read; gc touches only the writable (first) root.
#include <cstdio>
#include <ctime>

#include <fmt/format.h>

#include "cache/disk_cache.hpp"
#include "tools/commands.hpp"

namespace swapjit::cli {
namespace {

std::string key_summary(const cache::EntryInfo& e) {
  if (!e.manifest.is_object() || !e.manifest.contains("key")) return "?";
  const auto& k = e.manifest["key"];
  if (!k.is_object()) return k.dump();
  // The fields that tell entries of one family apart, in a fixed short form.
  std::string s = k.value("variant", std::string("?"));
  if (k.value("live_heads", 0) > 0) s += fmt::format(" h{}", k.value("live_heads", 0));
  if (k.value("window", 0) > 0) s += fmt::format(" w{}", k.value("window", 0));
  if (k.value("topk", 0) > 0) s += fmt::format(" k{}", k.value("topk", 0));
  for (const char* f : {"swa_format", "comp_format", "q_layout", "out_layout"}) {
    if (k.contains(f) && k[f].is_string() && k[f].get<std::string>() != "none")
      s += " " + k[f].get<std::string>();
  }
  if (k.value("swa_page", 0) > 0) s += fmt::format(" p{}", k.value("swa_page", 0));
  if (k.value("comp_page", 0) > 0) s += fmt::format("/{}", k.value("comp_page", 0));
  return s;
}

std::string time_text(double t) {
  if (t <= 0) return "-";
  std::time_t tt = static_cast<std::time_t>(t);
  char buf[32];
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%SZ", &tm);
  return buf;
}

void run_ls(const std::vector<std::string>& dirs) {
  cache::DiskCache disk(resolve_roots(dirs));
  auto entries = disk.list();
  long long total = 0;
  std::printf("%-16s %-16s %-8s %-50s %10s %-21s %s\n", "digest", "family", "arch", "key", "size", "last use",
              "state");
  for (const auto& e : entries) {
    total += e.bytes;
    std::printf("%-16.16s %-16s %-8s %-50s %10s %-21s %s%s\n", e.digest.c_str(), e.family.c_str(),
                e.arch.c_str(), key_summary(e).c_str(), human_bytes(e.bytes).c_str(), time_text(e.last_use).c_str(),
                e.ok ? "ok" : "BAD", e.read_only ? " (read-only root)" : "");
  }
  std::printf("%zu entries, %s, roots:", entries.size(), human_bytes(total).c_str());
  for (const auto& r : disk.roots()) std::printf(" %s", r.c_str());
  std::printf("\n");
}

void run_verify(const std::vector<std::string>& dirs) {
  cache::DiskCache disk(resolve_roots(dirs));
  auto entries = disk.list();
  int bad = 0;
  for (const auto& e : entries) {
    if (e.ok) continue;
    ++bad;
    std::printf("BAD %s: %s\n", e.dir.c_str(), e.problem.c_str());
  }
  std::printf("verify: %zu entries, %d bad\n", entries.size(), bad);
  std::fflush(stdout);
  if (bad > 0) fail_with(1);
}

void run_gc(const std::vector<std::string>& dirs, long long max_bytes) {
  cache::DiskCache disk(resolve_roots(dirs));
  auto r = disk.gc(max_bytes);
  std::printf("gc %s: %s -> %s; removed %d entries, %d quarantined, %d stale build dirs\n",
              disk.roots().front().c_str(), human_bytes(r.bytes_before).c_str(), human_bytes(r.bytes_after).c_str(),
              r.entries_removed, r.quarantine_removed, r.tmp_removed);
}

}  // namespace

void add_cache_command(CLI::App& app) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto max_bytes = std::make_shared<long long>(-1);
  CLI::App* cache = app.add_subcommand("cache", "inspect, verify and trim the cubin cache");
  cache->require_subcommand(1);
  CLI::App* ls = cache->add_subcommand("ls", "list entries: digest, family, key, size, last use");
  add_cache_dir_option(ls, dirs.get());
  ls->callback([dirs]() { run_ls(*dirs); });
  CLI::App* verify = cache->add_subcommand("verify", "check every entry (marker, manifest, sha256); non-zero "
                                                     "exit on any bad entry");
  add_cache_dir_option(verify, dirs.get());
  verify->callback([dirs]() { run_verify(*dirs); });
  CLI::App* gc = cache->add_subcommand("gc", "remove least-recently-used entries until under --max-bytes");
  gc->add_option("--max-bytes", *max_bytes, "size cap of the writable root in bytes")->required();
  add_cache_dir_option(gc, dirs.get());
  gc->callback([dirs, max_bytes]() { run_gc(*dirs, *max_bytes); });
}

}  // namespace swapjit::cli

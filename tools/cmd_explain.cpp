// cmd_explain.cpp: `swapjit explain --key FILE.json`: is this key in the cache, and if not, why not?
// On a miss it finds the nearest entry of the same arch and family and names the key fields and the
// toolchain fields that differ (the usual answer: a toolkit upgrade or an edited kernel source).
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "cache/disk_cache.hpp"
#include "jit/compile_key.hpp"
#include "jit/digest.hpp"
#include "tools/commands.hpp"

namespace swapjit::cli {
namespace {

// Names of the top-level fields where `a` and `b` differ, with both values.
std::vector<std::string> json_diff(const nlohmann::json& a, const nlohmann::json& b) {
  std::vector<std::string> out;
  if (!a.is_object() || !b.is_object()) {
    if (a != b) out.push_back(fmt::format("(whole value) {} vs {}", a.dump(), b.dump()));
    return out;
  }
  for (auto it = a.begin(); it != a.end(); ++it) {
    if (!b.contains(it.key())) {
      out.push_back(fmt::format("{}: {} vs (absent)", it.key(), it.value().dump()));
    } else if (b[it.key()] != it.value()) {
      out.push_back(fmt::format("{}: {} vs {}", it.key(), it.value().dump(), b[it.key()].dump()));
    }
  }
  for (auto it = b.begin(); it != b.end(); ++it)
    if (!a.contains(it.key())) out.push_back(fmt::format("{}: (absent) vs {}", it.key(), it.value().dump()));
  return out;
}

// Returns true on a hit.
bool explain_one(const CompileKey& key, const cache::DiskCache& disk) {
  const std::string digest = key_digest(key);
  const std::string family = family_name(key.family);
  std::printf("key     %s\n        %s\n digest %s\n", key.describe().c_str(), key.canonical_json().c_str(),
              digest.c_str());
  cache::EntryId id{key.arch, family, digest, key.canonical_json(), ""};
  for (size_t i = 0; i < disk.roots().size(); ++i) {
    std::string dir = disk.entry_dir(disk.roots()[i], id);
    if (!std::filesystem::exists(dir)) continue;
    std::string problem = cache::DiskCache::check_entry(dir, digest, nullptr);
    if (problem.empty()) {
      std::printf("HIT     %s%s\n\n", dir.c_str(), i > 0 ? " (read-only root)" : "");
      return true;
    }
    std::printf("BAD     %s: %s (the next get quarantines and recompiles it)\n", dir.c_str(), problem.c_str());
  }
  std::printf("MISS\n");
  const nlohmann::json want_key = nlohmann::json::parse(key.canonical_json());
  const nlohmann::json want_tc = nlohmann::json::parse(Toolchain::current().fingerprint());
  const cache::EntryInfo* nearest = nullptr;
  std::vector<std::string> best_key_diff, best_tc_diff;
  auto entries = disk.list();
  for (const auto& e : entries) {
    if (e.arch != key.arch || e.family != family || !e.manifest.is_object()) continue;
    auto kd = json_diff(want_key, e.manifest.value("key", nlohmann::json()));
    auto td = json_diff(want_tc, e.manifest.value("toolchain", nlohmann::json()));
    if (!nearest || kd.size() + td.size() < best_key_diff.size() + best_tc_diff.size()) {
      nearest = &e;
      best_key_diff = std::move(kd);
      best_tc_diff = std::move(td);
    }
  }
  if (!nearest) {
    std::printf("        no entry of %s for %s in any root: never compiled here\n\n", family.c_str(),
                key.arch.c_str());
    return false;
  }
  std::printf("nearest %s\n", nearest->dir.c_str());
  for (const auto& d : best_key_diff) std::printf("  key field differs:       %s (wanted vs cached)\n", d.c_str());
  for (const auto& d : best_tc_diff) std::printf("  toolchain field differs: %s (wanted vs cached)\n", d.c_str());
  if (best_key_diff.empty() && best_tc_diff.empty())
    std::printf("  key and toolchain match: the digest differs by its compile options (a different "
                "swapjit build?)\n");
  std::printf("\n");
  return false;
}

void run_explain(const std::string& key_file, const std::vector<std::string>& dirs) {
  auto keys = read_key_file(key_file);
  for (auto& k : keys) k.validate();
  cache::DiskCache disk(resolve_roots(dirs));
  int misses = 0;
  for (const auto& k : keys)
    if (!explain_one(k, disk)) ++misses;
  std::printf("explain: %zu keys, %zu hits, %d misses\n", keys.size(), keys.size() - misses, misses);
}

}  // namespace

void add_explain_command(CLI::App& app) {
  auto key_file = std::make_shared<std::string>();
  auto dirs = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand("explain", "say whether a key is cached, and on a miss what differs from "
                                                "the nearest cached entry");
  cmd->add_option("--key", *key_file, "a JSON file: one key object or an array of keys")->required();
  add_cache_dir_option(cmd, dirs.get());
  cmd->callback([key_file, dirs]() { run_explain(*key_file, *dirs); });
}

}  // namespace swapjit::cli

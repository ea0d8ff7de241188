// cache_maint.cpp: list (with full verification) and the size cap / LRU gc of the on-disk cache.
#include <algorithm>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "cache/disk_cache.hpp"
#include "jit/error.hpp"

namespace swapjit::cache {
namespace fs = std::filesystem;
namespace {

std::vector<fs::path> subdirs(const fs::path& p) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(p, ec)) return out;
  for (auto it = fs::directory_iterator(p, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code ec2;
    if (it->is_directory(ec2)) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Directories under v1/ that are not <arch> directories.
bool is_reserved(const std::string& name) { return name == "tmp" || name == "locks" || name == "quarantine"; }

}  // namespace

std::vector<EntryInfo> DiskCache::list() const {
  std::vector<EntryInfo> out;
  for (size_t r = 0; r < roots_.size(); ++r) {
    fs::path v1 = fs::path(roots_[r]) / kLayoutVersion;
    for (const auto& arch : subdirs(v1)) {
      if (is_reserved(arch.filename().string())) continue;
      for (const auto& family : subdirs(arch)) {
        for (const auto& entry : subdirs(family)) {
          EntryInfo info;
          info.root = roots_[r];
          info.dir = entry.string();
          info.arch = arch.filename().string();
          info.family = family.filename().string();
          info.digest = entry.filename().string();
          info.read_only = r > 0;
          info.bytes = tree_bytes(info.dir);
          info.last_use = mtime_seconds(info.dir);
          CacheEntry e;
          info.problem = check_entry(info.dir, info.digest, &e);
          info.ok = info.problem.empty();
          if (info.ok) {
            info.manifest = std::move(e.manifest);
          } else if (auto text = read_file(info.dir + "/" + kManifestFile)) {
            try {
              info.manifest = nlohmann::json::parse(text->begin(), text->end());
            } catch (const nlohmann::json::exception&) {
            }
          }
          out.push_back(std::move(info));
        }
      }
    }
  }
  return out;
}

GcResult DiskCache::gc(long long max_bytes) {
  SWAPJIT_REQUIRE(max_bytes >= 0, ErrorCode::kInvalidArgument, "gc: max_bytes must be >= 0");
  GcResult res;
  const std::string root = roots_.front();
  const fs::path v1 = fs::path(root) / kLayoutVersion;
  res.bytes_before = tree_bytes(v1.string());
  long long total = res.bytes_before;
  const double now = static_cast<double>(std::time(nullptr));

  // 1. Quarantined entries: kept only for a post-mortem, the first to go.
  for (const auto& q : subdirs(v1 / "quarantine")) {
    if (total <= max_bytes) break;
    long long b = tree_bytes(q.string());
    remove_tree(q.string());
    total -= b;
    ++res.quarantine_removed;
  }
  // 2. Build dirs older than an hour: left by a killed process (a live build renames within seconds;
  // an hour leaves any slow compile alone). Removed whatever the cap, they are garbage.
  for (const auto& t : subdirs(v1 / "tmp")) {
    if (now - mtime_seconds(t.string()) < 3600) continue;
    long long b = tree_bytes(t.string());
    remove_tree(t.string());
    total -= b;
    ++res.tmp_removed;
  }
  // 3. Entries, least recently used first. Each is first renamed into tmp/ (it disappears atomically, so a
  // concurrent reader sees a miss, never half an entry), then removed. A reader that already opened the
  // files keeps them (unlinked files stay readable while open).
  if (total > max_bytes) {
    std::vector<EntryInfo> entries;
    for (auto& e : list())
      if (!e.read_only) entries.push_back(std::move(e));
    std::sort(entries.begin(), entries.end(),
              [](const EntryInfo& a, const EntryInfo& b) { return a.last_use < b.last_use; });
    for (const auto& e : entries) {
      if (total <= max_bytes) break;
      std::string doomed = (v1 / "tmp" / unique_name("gc." + e.digest)).string();
      try {
        fs_->make_dirs((v1 / "tmp").string());
        if (!fs_->rename_dir(e.dir, doomed)) continue;
      } catch (const Error&) {
        continue;  // vanished under us (another gc) or not ours to move: skip it
      }
      remove_tree(doomed);
      total -= e.bytes;
      ++res.entries_removed;
    }
  }
  res.bytes_after = tree_bytes(v1.string());
  return res;
}

}  // namespace swapjit::cache

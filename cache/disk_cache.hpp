// disk_cache.hpp: the on-disk cubin cache (DESIGN.md "Cache entry = directory").
//
//   <root>/v1/<arch>/<family>/<digest>/{kernel.cubin, manifest.json, COMMITTED}
//   <root>/v1/tmp/<unique>/            private build dirs, renamed into place when complete
//   <root>/v1/locks/<digest>.lock      per-digest flock: one process builds, the others wait then load
//   <root>/v1/quarantine/<digest>.<t>  bad entries moved aside (checksum mismatch, no marker, bad manifest)
//
// Several roots: the first is writable, the rest are read-only (a precompiled bundle in a deploy image);
// lookups check all, in order, and a hit in a read-only root writes nothing. cache/ knows keys only as
// strings (canonical JSON, digest, arch, family names), so it does not depend on jit/ beyond the error type.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/fs.hpp"

namespace swapjit::cache {

// Which entry: where it lives and what to write into its manifest and error messages.
struct EntryId {
  std::string arch;       // "sm_90a"
  std::string family;     // "swapab_decode"
  std::string digest;     // lowercase hex; the directory name
  std::string key_json;   // canonical key JSON (errors name it; the manifest stores it)
  std::string toolchain;  // toolchain fingerprint JSON (stored in the manifest for `explain`)
};

// What a builder hands to the cache to publish.
struct BuiltCubin {
  std::vector<char> cubin;
  std::string lowered_name;
  double compile_ms = 0;
  nlohmann::json resources = nlohmann::json::object();
};
// Called with the digest lock held, only on a miss. May throw; the error reaches the caller unchanged.
using Builder = std::function<BuiltCubin()>;

struct CacheEntry {
  std::vector<char> cubin;
  nlohmann::json manifest;
  std::string dir;         // the entry directory it came from
  bool read_only = false;  // served from a read-only root
};

struct GetResult {
  CacheEntry entry;
  bool built = false;    // this call ran the builder and published
  bool healed = false;   // a bad entry was quarantined on the way
  double lock_wait_ms = 0;
};

// One entry found by list()/verify(), with the outcome of its full check.
struct EntryInfo {
  std::string root, dir, arch, family, digest;
  nlohmann::json manifest;  // null when unreadable
  long long bytes = 0;
  double last_use = 0;      // seconds since the epoch (the entry dir's mtime)
  bool read_only = false;
  bool ok = false;
  std::string problem;      // why it is bad, when !ok
};

struct GcResult {
  long long bytes_before = 0, bytes_after = 0;
  int entries_removed = 0, quarantine_removed = 0, tmp_removed = 0;
};

class DiskCache {
 public:
  // `roots`: the first writable, the rest read-only; must not be empty. Nothing is created on disk until
  // the first publish, so read-only uses (ls, verify, explain) never write.
  explicit DiskCache(std::vector<std::string> roots, double lock_timeout_s = 600,
                     std::shared_ptr<FileSystem> fs = nullptr);

  // A verified hit from any root, or nullopt. Bad entries are skipped here and healed by get_or_build
  // (under the digest lock, so a healthy entry just published by another process is never quarantined).
  std::optional<CacheEntry> lookup(const EntryId& id) const;

  // Hit, or: take the digest lock, look again (another process may have published), quarantine a bad
  // entry, run `build`, publish atomically, release. Throws Error(kCacheIo) naming the key and the dir
  // when the writable root is unusable or the lock times out; a builder's exception passes through.
  GetResult get_or_build(const EntryId& id, const Builder& build);

  // Creates the writable root's layout (its lock dir) as a miss would, and returns "" when that works, else
  // why the root is not usable (the message get_or_build throws). For callers about to fill the cache
  // (precompile), so that an unusable root is reported once instead of once a key.
  std::string prepare_writable_root() const;

  // Every entry of every root with a full check (marker, manifest, sha256, digest == dir name).
  std::vector<EntryInfo> list() const;
  // Removes least-recently-used entries of the writable root (quarantine and stale tmp dirs first) until
  // the root holds at most `max_bytes`.
  GcResult gc(long long max_bytes);

  const std::vector<std::string>& roots() const { return roots_; }
  std::string entry_dir(const std::string& root, const EntryId& id) const;
  // Checks one entry directory; returns "" when good, else the reason. Fills `out` on success.
  static std::string check_entry(const std::string& dir, const std::string& digest, CacheEntry* out);

  // SWAPJIT_CACHE_DIR (colon list) or $XDG_CACHE_HOME/swapjit or ~/.cache/swapjit.
  static std::vector<std::string> default_roots();

 private:
  void publish(const std::string& root, const EntryId& id, const BuiltCubin& built, CacheEntry* out);
  void quarantine(const std::string& root, const std::string& dir, const std::string& digest);
  std::vector<std::string> roots_;
  double lock_timeout_s_;
  std::shared_ptr<FileSystem> fs_;
};

// The file names inside an entry.
inline constexpr const char* kCubinFile = "kernel.cubin";
inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kCommittedFile = "COMMITTED";
inline constexpr const char* kLayoutVersion = "v1";

// The swapjit version the library was built as (for manifests and `swapjit info`).
const char* library_version();

}  // namespace swapjit::cache

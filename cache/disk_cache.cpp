// disk_cache.cpp: lookup, get-or-build and the atomic publish of the on-disk cubin cache.
// (list() and gc() live in cache_maint.cpp.)
#include "cache/disk_cache.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "jit/error.hpp"

namespace swapjit::cache {
namespace {

std::string join(const std::string& a, const std::string& b) { return a + "/" + b; }

nlohmann::json json_or_string(const std::string& text) {
  if (text.empty()) return nullptr;
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return text;  // a test's or an old toolchain's free-form fingerprint: keep it as written
  }
}

std::string hostname() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

}  // namespace

const char* library_version() {
#ifdef SWAPJIT_VERSION
  return SWAPJIT_VERSION;
#else
  return "unknown";
#endif
}

DiskCache::DiskCache(std::vector<std::string> roots, double lock_timeout_s, std::shared_ptr<FileSystem> fs)
    : roots_(std::move(roots)), lock_timeout_s_(lock_timeout_s), fs_(std::move(fs)) {
  if (!fs_) fs_ = std::make_shared<FileSystem>();
  if (roots_.empty()) SWAPJIT_THROW(ErrorCode::kInvalidArgument, "DiskCache needs at least one cache root");
  for (auto& r : roots_) {
    if (r.empty()) SWAPJIT_THROW(ErrorCode::kInvalidArgument, "empty cache root path");
    while (r.size() > 1 && r.back() == '/') r.pop_back();
  }
}

std::string DiskCache::entry_dir(const std::string& root, const EntryId& id) const {
  return fmt::format("{}/{}/{}/{}/{}", root, kLayoutVersion, id.arch, id.family, id.digest);
}

std::string DiskCache::check_entry(const std::string& dir, const std::string& digest, CacheEntry* out) {
  // The marker first: it is written last, so its absence means an incomplete or tampered entry.
  if (::access(join(dir, kCommittedFile).c_str(), F_OK) != 0) return "missing COMMITTED marker";
  auto mtext = read_file(join(dir, kManifestFile));
  if (!mtext) return "manifest.json unreadable";
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(mtext->begin(), mtext->end());
  } catch (const nlohmann::json::exception& e) {
    return fmt::format("manifest.json does not parse: {}", e.what());
  }
  if (!m.is_object() || !m.contains("cubin_sha256") || !m["cubin_sha256"].is_string())
    return "manifest.json has no cubin_sha256";
  if (!digest.empty() && m.value("digest", std::string()) != digest)
    return fmt::format("manifest digest '{}' is not the directory name", m.value("digest", std::string()));
  auto cubin = read_file(join(dir, kCubinFile));
  if (!cubin) return "kernel.cubin unreadable";
  if (cubin->empty()) return "kernel.cubin is empty";
  std::string sha = sha256_hex_bytes(cubin->data(), cubin->size());
  if (sha != m["cubin_sha256"].get<std::string>())
    return fmt::format("kernel.cubin sha256 {} does not match the manifest's {}", sha,
                       m["cubin_sha256"].get<std::string>());
  if (out) {
    out->cubin = std::move(*cubin);
    out->manifest = std::move(m);
    out->dir = dir;
  }
  return "";
}

std::optional<CacheEntry> DiskCache::lookup(const EntryId& id) const {
  for (size_t i = 0; i < roots_.size(); ++i) {
    std::string dir = entry_dir(roots_[i], id);
    if (::access(dir.c_str(), F_OK) != 0) continue;
    CacheEntry e;
    if (check_entry(dir, id.digest, &e).empty()) {
      e.read_only = i > 0;
      if (!e.read_only) touch_mtime(dir);  // the LRU clock of gc(); never in a read-only root
      return e;
    }
  }
  return std::nullopt;
}

std::string DiskCache::prepare_writable_root() const {
  const std::string& root = roots_.front();
  try {
    fs_->make_dirs(join(join(root, kLayoutVersion), "locks"));
  } catch (const Error& e) {
    return fmt::format("the writable cache root '{}' is not usable (set SWAPJIT_CACHE_DIR to a writable directory): {}",
                       root, e.what());
  }
  return "";
}

GetResult DiskCache::get_or_build(const EntryId& id, const Builder& build) {
  GetResult r;
  if (auto hit = lookup(id)) {
    r.entry = std::move(*hit);
    return r;
  }
  const std::string& root = roots_.front();
  const std::string v1 = join(root, kLayoutVersion);
  if (std::string problem = prepare_writable_root(); !problem.empty())
    throw Error(ErrorCode::kCacheIo, problem, id.key_json);
  FileLock lock(fmt::format("{}/locks/{}.lock", v1, id.digest), lock_timeout_s_, id.key_json);
  r.lock_wait_ms = lock.waited_ms();

  // Under the lock: another process may have published while we waited; a bad entry is ours to heal.
  std::string dir = entry_dir(root, id);
  if (::access(dir.c_str(), F_OK) == 0) {
    CacheEntry e;
    std::string problem = check_entry(dir, id.digest, &e);
    if (problem.empty()) {
      touch_mtime(dir);
      r.entry = std::move(e);
      return r;
    }
    quarantine(root, dir, id.digest);
    r.healed = true;
  }
  for (size_t i = 1; i < roots_.size(); ++i) {
    CacheEntry e;
    if (check_entry(entry_dir(roots_[i], id), id.digest, &e).empty()) {
      e.read_only = true;
      r.entry = std::move(e);
      return r;
    }
  }
  BuiltCubin built = build();
  if (built.cubin.empty())
    throw Error(ErrorCode::kInternal, "the builder returned an empty cubin", id.key_json);
  publish(root, id, built, &r.entry);
  r.built = true;
  return r;
}

void DiskCache::publish(const std::string& root, const EntryId& id, const BuiltCubin& built,
                        CacheEntry* out) {
  const std::string v1 = join(root, kLayoutVersion);
  nlohmann::json m = {
      {"layout", kLayoutVersion},
      {"digest", id.digest},
      {"arch", id.arch},
      {"family", id.family},
      {"key", json_or_string(id.key_json)},
      {"toolchain", json_or_string(id.toolchain)},
      {"cubin_sha256", sha256_hex_bytes(built.cubin.data(), built.cubin.size())},
      {"cubin_bytes", built.cubin.size()},
      {"lowered_name", built.lowered_name},
      {"compile_ms", built.compile_ms},
      {"resources", built.resources},
      {"created_unix", static_cast<long long>(std::time(nullptr))},
      {"created_by_pid", static_cast<long long>(::getpid())},
      {"created_on_host", hostname()},
      {"swapjit_version", library_version()},
  };
  std::string mtext = m.dump(2) + "\n";
  std::string tmp_parent = join(v1, "tmp");
  std::string tmp = join(tmp_parent, unique_name(id.digest));
  std::string parent = fmt::format("{}/{}/{}", v1, id.arch, id.family);
  try {
    fs_->make_dirs(tmp);
    fs_->make_dirs(parent);
    fs_->write_file(join(tmp, kCubinFile), built.cubin.data(), built.cubin.size());
    fs_->write_file(join(tmp, kManifestFile), mtext.data(), mtext.size());
    // COMMITTED last: an entry without it is never loaded, whatever else is in the directory.
    fs_->write_file(join(tmp, kCommittedFile), "1\n", 2);
    fs_->fsync_dir(tmp);
    std::string dir = entry_dir(root, id);
    if (!fs_->rename_dir(tmp, dir)) {
      // Someone else won (possible only without our lock, e.g. a foreign tool): theirs stays.
      remove_tree(tmp);
    }
    fs_->fsync_dir(parent);
    if (out) {
      out->cubin = built.cubin;
      out->manifest = std::move(m);
      out->dir = dir;
      out->read_only = false;
    }
  } catch (const Error& e) {
    remove_tree(tmp);
    throw Error(e.code(), fmt::format("publishing cache entry {} failed: {}", entry_dir(root, id), e.message()),
                id.key_json, e.log());
  } catch (...) {
    remove_tree(tmp);
    throw;
  }
}

void DiskCache::quarantine(const std::string& root, const std::string& dir, const std::string& digest) {
  const std::string q = join(join(root, kLayoutVersion), "quarantine");
  try {
    fs_->make_dirs(q);
    std::string to = fmt::format("{}/{}.{}", q, digest, unique_name(std::to_string(std::time(nullptr))));
    if (fs_->rename_dir(dir, to)) return;
  } catch (const Error&) {
    // fall through: removing the bad entry is enough to heal it
  }
  remove_tree(dir);
}

std::vector<std::string> DiskCache::default_roots() {
  std::vector<std::string> roots;
  if (const char* env = std::getenv("SWAPJIT_CACHE_DIR"); env && *env) {
    std::string s = env;
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find(':', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) roots.push_back(s.substr(start, end - start));
      start = end + 1;
    }
    if (!roots.empty()) return roots;
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return {std::string(xdg) + "/swapjit"};
  if (const char* home = std::getenv("HOME"); home && *home) return {std::string(home) + "/.cache/swapjit"};
  return {"/tmp/swapjit-cache"};
}

}  // namespace swapjit::cache

// fs.hpp: the cache's file-system seam and its cross-process lock. Every write the cache makes goes
// through FileSystem (write + fsync, directory fsync, rename, mkdir), so a test can subclass it and
// inject a fault (a failing rename, a crash in the middle of a publish) and check that nothing partial
// remains (STYLE.md: LevelDB's Env). Reads are plain POSIX: a failed read is a miss, never a crash.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace swapjit::cache {

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Creates (truncates) `path`, writes all `size` bytes and fsyncs the file. Throws Error(kCacheIo).
  virtual void write_file(const std::string& path, const void* data, size_t size);
  // fsync(2) on a directory, so a rename or a new file in it survives a power loss. Throws Error(kCacheIo).
  virtual void fsync_dir(const std::string& path);
  // rename(2) of a directory. Returns false when `to` already exists (another publisher won);
  // throws Error(kCacheIo) on any other failure.
  virtual bool rename_dir(const std::string& from, const std::string& to);
  // mkdir -p. Throws Error(kCacheIo) naming the first directory that could not be made.
  virtual void make_dirs(const std::string& path);
};

// Whole-file read; nullopt when the file is missing or unreadable.
std::optional<std::vector<char>> read_file(const std::string& path);
// Lowercase hex sha256 (OpenSSL; cache/ uses only jit's digest *type*, the string).
std::string sha256_hex_bytes(const void* data, size_t size);
// rm -rf that never throws (best effort; the cache must not crash its caller while cleaning up).
void remove_tree(const std::string& path) noexcept;
// Sum of the regular files' sizes under `path` (0 when missing).
long long tree_bytes(const std::string& path) noexcept;
// Seconds since the epoch of `path`'s mtime; 0 when missing.
double mtime_seconds(const std::string& path) noexcept;
// Sets `path`'s mtime to now (the LRU "last use" of an entry). Best effort, never throws.
void touch_mtime(const std::string& path) noexcept;
// A name no other process or thread will pick: pid, thread-local counter, random bits.
std::string unique_name(const std::string& stem);

// flock(LOCK_EX) on a lock file, polled until a timeout. The kernel drops a flock when its holder dies
// (even by SIGKILL), so a killed compile never blocks the others for longer than it lived.
class FileLock {
 public:
  // Creates `path` if needed. Throws Error(kCacheIo) naming `what` (the key), the lock path and the
  // timeout when the lock is not free within `timeout_s` seconds.
  FileLock(const std::string& path, double timeout_s, const std::string& what);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  double waited_ms() const { return waited_ms_; }

 private:
  int fd_ = -1;
  double waited_ms_ = 0;
};

}  // namespace swapjit::cache

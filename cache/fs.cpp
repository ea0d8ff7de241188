// fs.cpp: POSIX implementation of the cache's file-system seam, reads, and the flock-based lock.
#include "cache/fs.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "jit/error.hpp"

namespace swapjit::cache {
namespace fs = std::filesystem;

static std::string errno_text(int e) { return fmt::format("{} ({})", std::strerror(e), e); }

void FileSystem::write_file(const std::string& path, const void* data, size_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) SWAPJIT_THROW(ErrorCode::kCacheIo, fmt::format("cannot create '{}': {}", path, errno_text(errno)));
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      SWAPJIT_THROW(ErrorCode::kCacheIo, fmt::format("cannot write '{}': {}", path, errno_text(e)));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    SWAPJIT_THROW(ErrorCode::kCacheIo, fmt::format("cannot fsync '{}': {}", path, errno_text(e)));
  }
  if (::close(fd) != 0)
    SWAPJIT_THROW(ErrorCode::kCacheIo, fmt::format("cannot close '{}': {}", path, errno_text(errno)));
}

void FileSystem::fsync_dir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) SWAPJIT_THROW(ErrorCode::kCacheIo, fmt::format("cannot open dir '{}': {}", path, errno_text(errno)));
  // NOTE: some file systems (tmpfs, some network mounts) reject fsync on a directory with EINVAL; the
  // rename is still atomic there, so only real I/O errors fail the publish.
  int rc = ::fsync(fd);
  int e = errno;
  ::close(fd);
  if (rc != 0 && e != EINVAL && e != EROFS)
    SWAPJIT_THROW(ErrorCode::kCacheIo, fmt::format("cannot fsync dir '{}': {}", path, errno_text(e)));
}

bool FileSystem::rename_dir(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) == 0) return true;
  // rename(2) onto a non-empty directory fails with ENOTEMPTY or EEXIST: someone else published first.
  if (errno == ENOTEMPTY || errno == EEXIST) return false;
  SWAPJIT_THROW(ErrorCode::kCacheIo,
                fmt::format("cannot rename '{}' to '{}': {}", from, to, errno_text(errno)));
}

void FileSystem::make_dirs(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec || !fs::is_directory(path))
    SWAPJIT_THROW(ErrorCode::kCacheIo, fmt::format("cannot create cache directory '{}': {}", path,
                                                   ec ? ec.message() : std::string("not a directory")));
}

std::optional<std::vector<char>> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return std::nullopt;
  }
  std::vector<char> out(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got != out.size()) return std::nullopt;
  return out;
}

std::string sha256_hex_bytes(const void* data, size_t size) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data, size, md, &len, EVP_sha256(), nullptr) != 1)
    SWAPJIT_THROW(ErrorCode::kInternal, "EVP_Digest(sha256) failed");
  static const char* hex = "0123456789abcdef";
  std::string s(2 * len, '0');
  for (unsigned i = 0; i < len; ++i) {
    s[2 * i] = hex[md[i] >> 4];
    s[2 * i + 1] = hex[md[i] & 15];
  }
  return s;
}

void remove_tree(const std::string& path) noexcept {
  std::error_code ec;
  fs::remove_all(path, ec);
}

long long tree_bytes(const std::string& path) noexcept {
  std::error_code ec;
  long long total = 0;
  if (!fs::exists(path, ec)) return 0;
  for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code ec2;
    if (it->is_regular_file(ec2)) total += static_cast<long long>(it->file_size(ec2));
  }
  return total;
}

double mtime_seconds(const std::string& path) noexcept {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<double>(st.st_mtim.tv_sec) + 1e-9 * static_cast<double>(st.st_mtim.tv_nsec);
}

void touch_mtime(const std::string& path) noexcept {
  // UTIME_NOW on mtime only; atime is left alone (many mounts are noatime, so it is not a usable LRU clock).
  struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  (void)::utimensat(AT_FDCWD, path.c_str(), times, 0);
}

std::string unique_name(const std::string& stem) {
  static std::atomic<unsigned long> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   (static_cast<unsigned long long>(::getpid()) << 32)};
  return fmt::format("{}.{}.{}.{:016x}", stem, ::getpid(), counter.fetch_add(1), rng());
}

FileLock::FileLock(const std::string& path, double timeout_s, const std::string& what) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    SWAPJIT_THROW(ErrorCode::kCacheIo,
                  fmt::format("cannot open lock file '{}' for {}: {}", path, what, errno_text(errno)));
  auto t0 = std::chrono::steady_clock::now();
  // Poll with LOCK_NB instead of a blocking flock so the wait has a timeout and a clear message.
  for (int attempt = 0;; ++attempt) {
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) break;
    int e = errno;
    if (e != EWOULDBLOCK && e != EINTR) {
      ::close(fd_);
      fd_ = -1;
      SWAPJIT_THROW(ErrorCode::kCacheIo, fmt::format("flock('{}') for {} failed: {}", path, what, errno_text(e)));
    }
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (waited >= timeout_s) {
      ::close(fd_);
      fd_ = -1;
      SWAPJIT_THROW(ErrorCode::kCacheIo,
                    fmt::format("timed out after {:.1f} s waiting for the cache lock '{}' held by another "
                                "process compiling {} (raise the lock timeout, or find the holder with "
                                "`fuser {}`)",
                                waited, path, what, path));
    }
    // Short sleeps first (a hit published by the holder is usually quick), then 20 ms.
    std::this_thread::sleep_for(std::chrono::milliseconds(attempt < 20 ? 2 : 20));
  }
  waited_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

FileLock::~FileLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

}  // namespace swapjit::cache

// test_multiprocess.cpp: the cache across processes: eight processes filling one cold dir build every key
// exactly once; a process SIGKILLed in the middle of a build or a publish leaves nothing that loads and
// never blocks the next one. Builders are fakes (no NVRTC) so this stays fast.
#include <signal.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "cache/disk_cache.hpp"
#include "jit/error.hpp"
#include "tests/catch.hpp"
#include "tests/temp_dir.hpp"

using namespace swapjit;
using namespace swapjit::cache;
namespace fs = std::filesystem;

namespace {

using testing::TempDir;

EntryId make_id(int i) {
  return {"sm_90a", "kv_insert", fmt::format("{:064x}", 0xabc000 + i), fmt::format(R"({{"key":{}}})", i), "{}"};
}

// Appends "<digest> <pid>\n" to `log` under flock: the count of real builds across processes.
void record_build(const std::string& log, const std::string& digest) {
  int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) ::_exit(3);
  ::flock(fd, LOCK_EX);
  std::string line = fmt::format("{} {}\n", digest, ::getpid());
  if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) ::_exit(4);
  ::flock(fd, LOCK_UN);
  ::close(fd);
}

bool wait_for_file(const std::string& path, double seconds) {
  for (int i = 0; i < seconds * 100; ++i) {
    if (fs::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

int wait_status(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

// A child that runs get_or_build with `fs` and a builder that touches `started` and then sleeps (when
// `hang_in_build`) so the parent can SIGKILL it mid-build. Never returns.
[[noreturn]] void child_build(const std::string& root, const EntryId& id, std::shared_ptr<FileSystem> fs,
                              const std::string& started, bool hang_in_build) {
  try {
    DiskCache dc({root}, 60, std::move(fs));
    dc.get_or_build(id, [&]() {
      std::ofstream(started) << "1";
      if (hang_in_build) ::sleep(60);
      BuiltCubin b;
      b.cubin.assign(100, 'k');
      return b;
    });
  } catch (...) {
    ::_exit(2);
  }
  ::_exit(0);
}

// Dies (SIGKILL, as an OOM killer would) at one step of the publish.
class DieDuringPublishFs : public FileSystem {
 public:
  explicit DieDuringPublishFs(std::string at) : at_(std::move(at)) {}
  void write_file(const std::string& path, const void* data, size_t size) override {
    if (at_ == "before-commit" && path.ends_with(kCommittedFile)) ::raise(SIGKILL);
    FileSystem::write_file(path, data, size);
  }
  bool rename_dir(const std::string& from, const std::string& to) override {
    if (at_ == "before-rename") ::raise(SIGKILL);
    return FileSystem::rename_dir(from, to);
  }

 private:
  std::string at_;
};

}  // namespace

TEST_CASE("multiprocess: 8 processes on one cold dir build each key exactly once", "[cache]") {
  TempDir t;
  const std::string root = t.path + "/cache";
  const std::string log = t.path + "/builds.log";
  const int kProcs = 8, kKeys = 6;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Each child walks the keys in its own order, so they collide on different keys at once.
      std::vector<int> order(kKeys);
      for (int i = 0; i < kKeys; ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), std::mt19937(p));
      try {
        DiskCache dc({root}, 60);
        for (int i : order) {
          auto id = make_id(i);
          auto r = dc.get_or_build(id, [&]() {
            record_build(log, id.digest);
            std::this_thread::sleep_for(std::chrono::milliseconds(30));  // a compile takes a while
            BuiltCubin b;
            std::string payload = fmt::format("cubin-of-{}", i);
            b.cubin.assign(payload.begin(), payload.end());
            return b;
          });
          if (std::string(r.entry.cubin.begin(), r.entry.cubin.end()) != fmt::format("cubin-of-{}", i)) ::_exit(5);
        }
      } catch (...) {
        ::_exit(6);
      }
      ::_exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = wait_status(pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  std::map<std::string, int> builds;
  std::ifstream in(log);
  for (std::string digest, pid; in >> digest >> pid;) ++builds[digest];
  CHECK(builds.size() == static_cast<size_t>(kKeys));
  for (const auto& [digest, n] : builds) {
    INFO(digest);
    CHECK(n == 1);
  }
  DiskCache dc({root});
  auto entries = dc.list();
  CHECK(entries.size() == static_cast<size_t>(kKeys));
  for (const auto& e : entries) CHECK(e.ok);
  CHECK(fs::is_empty(root + "/v1/tmp"));
}

TEST_CASE("multiprocess: a build killed by SIGKILL leaves no entry and does not block the next", "[cache]") {
  TempDir t;
  const std::string root = t.path + "/cache";
  const std::string started = t.path + "/started";
  auto id = make_id(1);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) child_build(root, id, nullptr, started, /*hang_in_build=*/true);
  REQUIRE(wait_for_file(started, 20));
  ::kill(pid, SIGKILL);
  int status = wait_status(pid);
  CHECK(WIFSIGNALED(status));
  DiskCache dc({root}, 5);  // the dead holder's flock is gone: this must not wait the 5 s out
  CHECK_FALSE(dc.lookup(id).has_value());
  auto r = dc.get_or_build(id, []() {
    BuiltCubin b;
    b.cubin.assign(10, 'h');
    return b;
  });
  CHECK(r.built);
  CHECK(r.lock_wait_ms < 1000);
  CHECK(dc.lookup(id).has_value());
}

TEST_CASE("multiprocess: a publish killed by SIGKILL leaves nothing that loads; the next get heals", "[cache]") {
  auto at = GENERATE(std::string("before-commit"), std::string("before-rename"));
  INFO(at);
  TempDir t;
  const std::string root = t.path + "/cache";
  const std::string started = t.path + "/started";
  auto id = make_id(2);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) child_build(root, id, std::make_shared<DieDuringPublishFs>(at), started, false);
  int status = wait_status(pid);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  DiskCache dc({root}, 5);
  CHECK_FALSE(dc.lookup(id).has_value());
  CHECK(dc.list().empty());  // the half-built dir sits in v1/tmp, which is never an entry
  CHECK_FALSE(fs::is_empty(root + "/v1/tmp"));
  auto r = dc.get_or_build(id, []() {
    BuiltCubin b;
    b.cubin.assign(10, 'h');
    return b;
  });
  CHECK(r.built);
  REQUIRE(dc.lookup(id).has_value());
  // gc clears build dirs left by dead processes once they are old (an hour: a live compile is never that old).
  for (auto& p : fs::directory_iterator(root + "/v1/tmp")) {
    struct timespec ts[2] = {{0, UTIME_OMIT}, {1000, 0}};
    REQUIRE(::utimensat(AT_FDCWD, p.path().c_str(), ts, 0) == 0);
  }
  auto g = dc.gc(1LL << 40);
  CHECK(g.tmp_removed == 1);
  CHECK(fs::is_empty(root + "/v1/tmp"));
  CHECK(dc.lookup(id).has_value());
}

// test_cli.cpp: the swapjit CLI as a user runs it (the built binary, SWAPJIT_CLI_PATH): bad key files
// exit non-zero naming the problem and write nothing; cache ls / verify / gc; explain on a hit and a miss;
// info. Entries are made in-process with a fake compiler, so no NVRTC compile runs here.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "jit/digest.hpp"
#include "runtime/cubin_store.hpp"
#include "tests/catch.hpp"
#include "tests/temp_dir.hpp"
#include "tests/sample_keys.hpp"

using namespace swapjit;
namespace fs = std::filesystem;

namespace {

using testing::TempDir;

struct Run {
  int rc = -1;
  std::string out;  // stdout and stderr together
};

// Runs the CLI with SWAPJIT_CACHE_DIR=`cache` (unset when empty).
Run run_cli(const std::string& args, const std::string& cache) {
  std::string cmd = cache.empty() ? "env -u SWAPJIT_CACHE_DIR " : fmt::format("SWAPJIT_CACHE_DIR='{}' ", cache);
  cmd += fmt::format("'{}' {} 2>&1", SWAPJIT_CLI_PATH, args);
  Run r;
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

CompileKey key_with_heads(int heads) { return testing::sample_swapab_key(heads); }

// Publishes `key` into `root` through a CubinStore with a fake compiler; returns the entry dir.
std::string publish_fake(const std::string& root, const CompileKey& key) {
  StoreOptions o;
  o.roots = {root};
  o.compiler = [](const CompileKey& k) {
    CompiledKernel c;
    std::string payload = "FAKE-CUBIN " + k.canonical_json();
    c.cubin.assign(payload.begin(), payload.end());
    c.lowered_name = "entry";
    return c;
  };
  CubinStore store(o);
  auto r = store.get(key);
  return fmt::format("{}/v1/{}/{}/{}", root, key.arch, family_name(key.family), r.digest);
}

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

}  // namespace

TEST_CASE("cli: bad key files exit non-zero, name the problem and write nothing", "[cli]") {
  TempDir t;
  const std::string cache = t.path + "/cache";
  nlohmann::json good = key_with_heads(16).to_json();
  struct Bad {
    const char* name;
    std::string text;
    const char* must_name;
  };
  auto with = [&](const char* field, nlohmann::json v) {
    auto j = good;
    j[field] = v;
    return j.dump();
  };
  std::vector<Bad> cases = {
      {"malformed JSON", "{\"family\": \"swapab_decode\",", "malformed"},
      {"unknown field", with("bogus_field", 1), "bogus_field"},
      {"heads 0", with("live_heads", 0), "live_heads"},
      {"page not a power of two", with("swa_page", 48), "swa_page"},
      {"unknown format", with("comp_format", "fp3"), "comp_format"},
      {"a bad key inside an array", "[" + good.dump() + "," + with("window", -1) + "]", "index 1"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    std::string file = write_file(t.path + "/bad.json", c.text);
    for (const char* cmd : {"precompile --keys", "explain --key"}) {
      INFO(cmd);
      Run r = run_cli(fmt::format("{} '{}'", cmd, file), cache);
      INFO(r.out);
      CHECK(r.rc != 0);
      CHECK(has(r.out, c.must_name));
      CHECK(has(r.out, "bad.json"));
      CHECK_FALSE(fs::exists(cache));
    }
  }
  Run r = run_cli("precompile --keys '" + t.path + "/missing.json'", cache);
  CHECK(r.rc != 0);
  CHECK(has(r.out, "missing.json"));
  CHECK(run_cli("precompile", cache).rc != 0);  // neither --preset nor --keys
}

TEST_CASE("cli: cache ls / verify / gc on a cache with a flipped byte", "[cli]") {
  TempDir t;
  const std::string cache = t.path + "/cache";
  std::string dir16 = publish_fake(cache, key_with_heads(16));
  std::string dir32 = publish_fake(cache, key_with_heads(32));
  std::string digest16 = fs::path(dir16).filename().string();

  Run ls = run_cli("cache ls", cache);
  INFO(ls.out);
  CHECK(ls.rc == 0);
  CHECK(has(ls.out, digest16.substr(0, 16)));
  CHECK(has(ls.out, "swapab_decode"));
  CHECK(has(ls.out, "h32"));
  CHECK(has(ls.out, "2 entries"));

  Run ok = run_cli("cache verify", cache);
  INFO(ok.out);
  CHECK(ok.rc == 0);
  CHECK(has(ok.out, "0 bad"));

  {
    std::fstream f(dir16 + "/kernel.cubin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5);
    f.put('!');
  }
  Run bad = run_cli("cache verify", cache);
  INFO(bad.out);
  CHECK(bad.rc != 0);
  CHECK(has(bad.out, dir16));
  CHECK(has(bad.out, "sha256"));
  CHECK_FALSE(has(bad.out, dir32));
  // --cache-dir overrides the environment.
  CHECK(run_cli(fmt::format("cache verify --cache-dir '{}'", cache), t.path + "/elsewhere").rc != 0);

  Run gc = run_cli("cache gc --max-bytes 0", cache);
  INFO(gc.out);
  CHECK(gc.rc == 0);
  CHECK_FALSE(fs::exists(dir16));
  CHECK_FALSE(fs::exists(dir32));
  CHECK(run_cli("cache verify", cache).rc == 0);
  CHECK(run_cli("cache gc", cache).rc != 0);  // --max-bytes is required
}

TEST_CASE("cli: explain says hit, or which key fields differ from the nearest entry", "[cli]") {
  TempDir t;
  const std::string cache = t.path + "/cache";
  publish_fake(cache, key_with_heads(16));
  std::string hit_file = write_file(t.path + "/k16.json", key_with_heads(16).to_json().dump());
  std::string miss_file = write_file(t.path + "/k32.json", key_with_heads(32).to_json().dump());
  Run hit = run_cli("explain --key '" + hit_file + "'", cache);
  INFO(hit.out);
  CHECK(hit.rc == 0);
  CHECK(has(hit.out, "HIT"));
  Run miss = run_cli("explain --key '" + miss_file + "'", cache);
  INFO(miss.out);
  CHECK(miss.rc == 0);
  CHECK(has(miss.out, "MISS"));
  CHECK(has(miss.out, "live_heads: 32 vs 16"));
  CHECK_FALSE(has(miss.out, "toolchain field differs"));
}

TEST_CASE("cli: info reports versions and cache roots; an unknown command fails", "[cli]") {
  TempDir t;
  const std::string cache = t.path + "/rw:" + t.path + "/ro";
  Run info = run_cli("info", cache);
  INFO(info.out);
  CHECK(info.rc == 0);
  CHECK(has(info.out, "nvrtc:"));
  CHECK(has(info.out, "driver:"));
  CHECK(has(info.out, t.path + "/rw (writable)"));
  CHECK(has(info.out, t.path + "/ro (read-only)"));
  CHECK_FALSE(fs::exists(t.path + "/rw"));  // info writes nothing
  CHECK(run_cli("no-such-command", cache).rc != 0);
}

TEST_CASE("cli: precompile into an unwritable root fails with a clear message", "[cli]") {
  TempDir t;
  std::string file = write_file(t.path + "/k.json", key_with_heads(16).to_json().dump());
  Run r = run_cli("precompile --keys '" + file + "' --cache-dir /dev/null/swapjit", "");
  INFO(r.out);
  CHECK(r.rc != 0);
  CHECK(has(r.out, "/dev/null/swapjit"));
  CHECK(has(r.out, "1 failed"));
}

TEST_CASE("cli: an unusable writable root is reported once, and a read-only root's hits still count", "[cli]") {
  TempDir t;
  const std::string ro = t.path + "/ro";
  publish_fake(ro, key_with_heads(16));
  nlohmann::json arr = nlohmann::json::array();
  for (int heads : {8, 16, 32}) arr.push_back(key_with_heads(heads).to_json());
  const std::string file = write_file(t.path + "/k.json", arr.dump());
  Run r = run_cli("precompile --keys '" + file + "' --cache-dir /dev/null/swapjit --cache-dir '" + ro + "' --jobs 2", "");
  INFO(r.out);
  CHECK(r.rc != 0);
  CHECK(has(r.out, "3 keys, 1 hits, 0 compiled, 2 failed"));
  // Once where it starts and once beside the summary, not once a key.
  size_t n = 0;
  for (size_t at = 0; (at = r.out.find("'/dev/null/swapjit' is not usable", at)) != std::string::npos; ++at) ++n;
  CHECK(n == 2);
}

TEST_CASE("cli: the GPU commands without a driver exit 2 saying so, and 0 with --allow-no-gpu", "[cli]") {
  if (void* h = ::dlopen("libcuda.so.1", RTLD_LAZY)) {  // with a driver they would run on the GPU
    ::dlclose(h);
    WARN("a GPU driver is present: this no-driver test does not apply");
    return;
  }
  TempDir dir;
  for (const std::string cmd : {"check", "bench", "timeline"}) {
    INFO(cmd);
    const Run r = run_cli(cmd, dir.path);
    CHECK(r.rc == 2);
    CHECK(has(r.out, "no GPU driver: `swapjit " + cmd + "` needs a GPU"));
    CHECK(has(r.out, "libcuda.so.1"));
    const Run ok = run_cli(cmd + " --allow-no-gpu", dir.path);
    CHECK(ok.rc == 0);
    CHECK(has(ok.out, cmd + " skipped"));
  }
}

TEST_CASE("cli: timeline refuses a --chained count below 1 before it needs a GPU", "[cli]") {
  TempDir dir;
  for (const std::string bad : {"0", "-3", "many"}) {
    INFO(bad);
    const Run r = run_cli("timeline --chained " + bad + " --allow-no-gpu", dir.path);
    CHECK(r.rc != 0);
    CHECK(has(r.out, "--chained"));
    CHECK_FALSE(has(r.out, "skipped"));
  }
  CHECK(run_cli("timeline --chained 4 --allow-no-gpu", dir.path).rc == 0);
}

TEST_CASE("cli: bench refuses a Q writer carve-out outside -1..100 before it needs a GPU", "[cli]") {
  TempDir dir;
  for (const std::string bad : {"101", "-2", "half"}) {
    INFO(bad);
    const Run r = run_cli("bench --writer-carveout " + bad, dir.path);
    CHECK(r.rc != 0);
    CHECK(has(r.out, "--writer-carveout"));
    CHECK_FALSE(has(r.out, "skipped"));
  }
}

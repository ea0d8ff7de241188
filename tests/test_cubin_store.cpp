// test_cubin_store.cpp: CubinStore over the disk cache with a fake compiler hook (no NVRTC): in-process
// single flight, shared errors that carry the key, hits across store instances, healing, counters.
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "jit/digest.hpp"
#include "jit/error.hpp"
#include "runtime/cubin_store.hpp"
#include "tests/catch.hpp"
#include "tests/temp_dir.hpp"
#include "tests/sample_keys.hpp"

using namespace swapjit;
namespace fs = std::filesystem;

namespace {

using testing::TempDir;

CompileKey key_with_heads(int heads) { return testing::sample_swapab_key(heads); }

// A compiler that counts its calls and takes `ms` per compile.
StoreOptions fake_options(const std::string& root, std::atomic<int>* calls, int ms = 0, bool fail = false) {
  StoreOptions o;
  o.roots = {root};
  o.lock_timeout_s = 30;
  o.compiler = [calls, ms, fail](const CompileKey& key) {
    calls->fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    if (fail) throw Error(ErrorCode::kCompileFailed, "fake NVRTC error", key.canonical_json(), "fake log line");
    CompiledKernel k;
    std::string payload = "CUBIN:" + key.canonical_json();
    k.cubin.assign(payload.begin(), payload.end());
    k.lowered_name = "_ZN7swapjit20swapab_decode_kernelE";
    k.compile_ms = ms;
    k.resources.registers = 168;
    k.resources.parsed = true;
    return k;
  };
  return o;
}

}  // namespace

TEST_CASE("cubin store: N threads asking one key cause one compile", "[cache]") {
  TempDir t;
  std::atomic<int> calls{0};
  CubinStore store(fake_options(t.path, &calls, 300));
  const CompileKey key = key_with_heads(16);
  const int kThreads = 8;
  std::vector<CubinResult> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back([&, i]() { results[i] = store.get(key); });
  for (auto& th : threads) th.join();
  CHECK(calls.load() == 1);
  int compiled = 0;
  for (const auto& r : results) {
    compiled += r.compiled ? 1 : 0;
    CHECK(r.cubin == results[0].cubin);
    CHECK(r.digest == key_digest(key));
    CHECK(r.lowered_name == "_ZN7swapjit20swapab_decode_kernelE");
    CHECK(r.resources.registers == 168);
  }
  CHECK(compiled == 1);
  CHECK(store.counters().compiles.load() == 1);
  CHECK(store.counters().hits.load() == kThreads - 1);
  CHECK(store.counters().failures.load() == 0);
}

TEST_CASE("cubin store: waiters share the producer's error, which names the key and the log", "[cache]") {
  TempDir t;
  std::atomic<int> calls{0};
  CubinStore store(fake_options(t.path, &calls, 300, /*fail=*/true));
  const CompileKey key = key_with_heads(32);
  const int kThreads = 4;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&]() {
      try {
        store.get(key);
      } catch (const Error& e) {
        if (e.code() == ErrorCode::kCompileFailed && e.key_json() == key.canonical_json() &&
            std::string(e.what()).find("fake log line") != std::string::npos)
          errors.fetch_add(1);
      }
    });
  for (auto& th : threads) th.join();
  CHECK(errors.load() == kThreads);
  CHECK(calls.load() == 1);
  CHECK(store.counters().failures.load() == kThreads);
  CubinResult r;
  CHECK_FALSE(store.lookup(key, &r));  // nothing was published
}

TEST_CASE("cubin store: a second store on the same root hits; a corrupted entry is healed", "[cache]") {
  TempDir t;
  std::atomic<int> calls{0};
  const CompileKey key = key_with_heads(16);
  CubinResult first;
  {
    CubinStore store(fake_options(t.path, &calls));
    first = store.get(key);
    CHECK(first.compiled);
  }
  CubinStore store(fake_options(t.path, &calls));
  CubinResult hit;
  REQUIRE(store.lookup(key, &hit));
  CHECK(hit.cubin == first.cubin);
  CHECK(hit.resources.registers == 168);
  CubinResult again = store.get(key);
  CHECK_FALSE(again.compiled);
  CHECK(calls.load() == 1);

  // Corrupt the cubin on disk: lookup misses, get recompiles and counts a heal.
  std::string path = store.roots().front() + "/v1/sm_90a/swapab_decode/" + first.digest + "/kernel.cubin";
  REQUIRE(fs::exists(path));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2);
    f.put('#');
  }
  CHECK_FALSE(store.lookup(key, nullptr));
  CubinResult healed = store.get(key);
  CHECK(healed.compiled);
  CHECK(healed.cubin == first.cubin);
  CHECK(calls.load() == 2);
  CHECK(store.counters().healed.load() == 1);
}

TEST_CASE("cubin store: an invalid key fails before anything touches the disk", "[cache]") {
  TempDir t;
  std::atomic<int> calls{0};
  std::string root = t.path + "/never";
  CubinStore store(fake_options(root, &calls));
  CompileKey bad = key_with_heads(16);
  bad.swa_page = 48;  // not a power of two
  CHECK_THROWS_AS(store.get(bad), Error);
  CHECK(calls.load() == 0);
  CHECK_FALSE(fs::exists(root));
  CHECK(store.counters().failures.load() == 1);
}

TEST_CASE("cubin store: the size cap runs after compiles", "[cache]") {
  TempDir t;
  std::atomic<int> calls{0};
  StoreOptions o = fake_options(t.path, &calls);
  o.max_bytes = 1;  // below one entry's size: each compile's gc empties the root; get() still returns
  CubinStore store(o);
  store.get(key_with_heads(16));
  store.get(key_with_heads(32));
  CHECK(calls.load() == 2);
  CubinResult r;
  CHECK_FALSE(store.lookup(key_with_heads(16), &r));
}

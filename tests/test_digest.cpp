// test_digest.cpp: the digest is pinned under an injected toolchain (a silent change would orphan every
// cache), and changes when any single input changes. Toolchain::current() reports this machine's toolkit.
#include <set>
#include <string>

#include "jit/digest.hpp"
#include "jit/embedded_sources.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "tests/catch.hpp"
#include "tests/sample_keys.hpp"

using namespace swapjit;

namespace {

// The mma variant, pinned: the digest literal below was computed for it (the mutation test turns it into
// "wgmma", sm_90a's preferred variant).
CompileKey digest_key() {
  CompileKey k = testing::sample_swapab_key(32, kFormatV4Fp8, kFormatV4Fp8, 128);
  k.variant = "mma";
  return k;
}

Toolchain fixed_toolchain() {
  Toolchain t;
  t.nvrtc_major = 13;
  t.nvrtc_minor = 0;
  t.nvrtc_library_sha256 = std::string(64, 'a');
  t.cccl_version = 3000001;
  t.sources_sha256 = std::string(64, 'b');
  return t;
}

}  // namespace

TEST_CASE("sha256 matches the FIPS 180-2 vectors", "[jit]") {
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("toolchain fingerprint is canonical JSON with no path", "[jit]") {
  CHECK(fixed_toolchain().fingerprint() ==
        R"({"cccl_version":3000001,"nvrtc_library_sha256":")" + std::string(64, 'a') +
            R"(","nvrtc_major":13,"nvrtc_minor":0,"sources_sha256":")" + std::string(64, 'b') + R"("})");
}

TEST_CASE("digest options are the compile options minus include paths", "[jit]") {
  auto opts = digest_compile_options(digest_key());
  const std::vector<std::string> expected = {"--std=c++20",     "--gpu-architecture=sm_90a",
                                             "-default-device", "--ptxas-options=-v",
                                             "-lineinfo",       "-DNDEBUG"};
  CHECK(opts == expected);
}

TEST_CASE("key digest is pinned under a fixed toolchain", "[jit]") {
  // Literal: sha256 of the documented digest text (jit/digest.cpp key_digest), computed independently.
  CHECK(key_digest(digest_key(), fixed_toolchain()) ==
        "2239d46a111454a79629b061212c7e2da68a6fdcdfe8ebb0c464d30c61a6cec6");
}

TEST_CASE("key digest changes when any single input changes", "[jit]") {
  const Toolchain t0 = fixed_toolchain();
  const CompileKey k0 = digest_key();
  std::set<std::string> seen = {key_digest(k0, t0)};
  auto expect_new = [&](const CompileKey& k, const Toolchain& t) {
    INFO(k.canonical_json() << " / " << t.fingerprint());
    CHECK(seen.insert(key_digest(k, t)).second);
  };
  CompileKey k = k0;
  k.family = Family::kHeadpadDecode;
  expect_new(k, t0);
  k = k0;
  k.variant = "wgmma";
  expect_new(k, t0);
  k = k0;
  k.arch = "sm_100a";
  expect_new(k, t0);
  k = k0;
  k.live_heads = 16;
  expect_new(k, t0);
  k = k0;
  k.window = 64;
  expect_new(k, t0);
  k = k0;
  k.topk = 256;
  expect_new(k, t0);
  k = k0;
  k.swa_format = kFormatV41Fp8;
  expect_new(k, t0);
  k = k0;
  k.comp_format = kFormatV41Fp4;
  expect_new(k, t0);
  k = k0;
  k.swa_page = 32;
  expect_new(k, t0);
  k = k0;
  k.comp_page = 64;
  expect_new(k, t0);
  k = k0;
  k.q_layout = kQLayoutPlain;
  expect_new(k, t0);
  k = k0;
  k.out_layout = kOutBf16;
  expect_new(k, t0);
  Toolchain t = t0;
  t.nvrtc_major = 12;
  expect_new(k0, t);
  t = t0;
  t.nvrtc_minor = 1;
  expect_new(k0, t);
  t = t0;
  t.nvrtc_library_sha256[0] = 'c';
  expect_new(k0, t);
  t = t0;
  t.cccl_version = 3000002;
  expect_new(k0, t);
  t = t0;
  t.sources_sha256[63] = 'c';
  expect_new(k0, t);
  // Same inputs, same digest.
  CHECK(key_digest(digest_key(), fixed_toolchain()) == key_digest(k0, t0));
}

TEST_CASE("Toolchain::current describes this process's NVRTC and sources", "[jit]") {
  const Toolchain& t = Toolchain::current();
  CHECK(&t == &Toolchain::current());
  CHECK(t.nvrtc_major >= 12);
  CHECK(t.nvrtc_library_sha256.size() == 64);
  CHECK(t.cccl_version >= 2000000);  // CCCL 2.x or newer is what CUDA 12.x / 13.x ship
  CHECK(t.sources_sha256 == embedded_sources_sha256());
  CHECK(t.fingerprint().find('/') == std::string::npos);  // no path in what the digest hashes
  CHECK(!embedded_sources().empty());
  CHECK(key_digest(digest_key()).size() == 64);
}

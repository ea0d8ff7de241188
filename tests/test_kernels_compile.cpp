// test_kernels_compile.cpp: the kv_insert and headpad_decode kernels compile through the real NVRTC path
// (swapjit::compile_key) for sm_90a for every record pairing and the key axes that change their code
// (heads 8..128, pages, both Q layouts, both output layouts, SWA-only), with ptxas's report clean: no
// spills, no stack frame (no local memory), dynamic + static smem within the 227 KiB opt-in limit. Also
// checks the host-side launch plans against the traits (the same constexpr functions the kernels use).
// Set SWAPJIT_FULL_KERNEL_MATRIX=1 for the full cross product (several minutes on a CPU); the default is
// a covering set in which every axis value appears with every record pairing.
#include <cstdlib>
#include <string>
#include <vector>

#include "jit/compile_key.hpp"
#include "jit/error.hpp"
#include "jit/kernel_family.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "kernels_src/headpad_traits.cuh"
#include "kernels_src/kv_insert_traits.cuh"
#include "tests/catch.hpp"
#include "tests/compile_checks.hpp"
#include "tests/sample_keys.hpp"

using namespace swapjit;

namespace {

using testing::compile_clean;
using testing::kSmemOptinLimit;

using testing::RecordPairing;
const std::vector<RecordPairing> kPairings = {
    {kFormatV41Fp8, kFormatV41Fp8}, {kFormatV41Fp8, kFormatV41Fp4}, {kFormatV4Fp8, kFormatV4Fp8},
    {kFormatV41Fp8, kFormatNone},   {kFormatV41Fp4, kFormatNone},   {kFormatV4Fp8, kFormatNone},
};

CompileKey headpad_key(int heads, RecordPairing pr, int swa_page, int comp_page, int topk, int q, int out) {
  return testing::decode_key(Family::kHeadpadDecode, heads, pr, swa_page, comp_page, topk, q, out);
}

std::vector<CompileKey> headpad_keys() {
  const bool full = std::getenv("SWAPJIT_FULL_KERNEL_MATRIX") != nullptr;
  const int heads[] = {8, 16, 32, 64, 128};
  const int pages[] = {32, 64, 128};
  const int topks[] = {512, 1024, 2048};
  std::vector<CompileKey> keys;
  int i = 0;  // rotates the secondary axes in the covering set
  for (const RecordPairing& pr : kPairings) {
    for (int h : heads) {
      if (full) {
        for (int sp : pages)
          for (int cp : pages)
            for (int q : {kQLayoutPlain, kQLayoutChunk16})
              for (int o : {kOutMxfp8Ofused, kOutBf16}) keys.push_back(headpad_key(h, pr, sp, cp, 512, q, o));
      } else {
        keys.push_back(headpad_key(h, pr, pages[i % 3], pages[(i + 1) % 3], topks[i % 3],
                                   i % 2 ? kQLayoutPlain : kQLayoutChunk16, (i / 2) % 2 ? kOutBf16 : kOutMxfp8Ofused));
        ++i;
      }
    }
  }
  return keys;
}


}  // namespace

TEST_CASE("headpad launch plans follow the traits", "[kernels]") {
  for (const CompileKey& k : headpad_keys()) {
    INFO(k.describe());
    const KeyShape s = k.shape();
    const LaunchPlan plan = launch_plan(k);
    const LaunchPlan direct = headpad_plan(s, parse_variant(k.variant));
    CHECK(plan.threads == direct.threads);
    CHECK(plan.cluster == direct.cluster);
    CHECK(plan.ctas_per_item == direct.ctas_per_item);
    CHECK(plan.smem_bytes == direct.smem_bytes);
    CHECK(headpad_key_supported(s));
    CHECK(plan.threads == kHeadpadThreads);
    CHECK(plan.cluster >= 1);
    CHECK(plan.cluster <= kHeadpadMaxCluster);
    CHECK(plan.ctas_per_item == plan.cluster);  // one cluster per decode token
    CHECK(plan.cluster % headpad_mtiles(s) == 0);
    CHECK(headpad_mtiles(s) == (k.live_heads > 64 ? 2 : 1));
    CHECK(plan.smem_bytes <= kSmemOptinLimit);
    // One CTA per SM (the plan is sized for it): more than half the SM's 228 KiB.
    CHECK(plan.smem_bytes > 233472 / 2 - 1024);
  }
}

TEST_CASE("headpad cluster shapes of the model layers", "[kernels]") {
  // V4.1-Flash compressed layer: 128 + 512 entries = 10 chunks of 64 -> 5 CTAs of 2 chunks.
  CHECK(headpad_cluster(KeyShape{64, 128, 512, kFormatV41Fp8, kFormatV41Fp4, 64, 64, 2, 1}) == 5);
  // SWA-only layer: 2 chunks -> two one-chunk CTAs (kHeadpadOneChunkMaxCluster; session 10 run 8).
  CHECK(headpad_cluster(KeyShape{32, 128, 0, kFormatV41Fp8, kFormatNone, 64, 0, 2, 1}) == 2);
  // 128 + 128 entries: 4 chunks -> 4 one-chunk CTAs; 128 + 192: 5 chunks -> 3 CTAs of up to 2.
  CHECK(headpad_cluster(KeyShape{16, 128, 128, kFormatV41Fp8, kFormatV41Fp8, 64, 64, 2, 1}) == 4);
  CHECK(headpad_cluster(KeyShape{16, 128, 192, kFormatV41Fp8, kFormatV41Fp8, 64, 64, 2, 1}) == 3);
  // V4-Pro (128 heads, topk 1024): two M tiles x 4 entry shares = the portable limit.
  CHECK(headpad_cluster(KeyShape{128, 128, 1024, kFormatV4Fp8, kFormatV4Fp8, 64, 32, 2, 1}) == 8);
  // topk 2048 at 16 heads: capped at 8 CTAs (each then takes ceil(34 / 8) = 5 chunks).
  CHECK(headpad_cluster(KeyShape{16, 128, 2048, kFormatV41Fp8, kFormatV41Fp8, 64, 128, 2, 1}) == 8);
  // Unsupported shapes are refused by the traits (the kernel static_asserts the same predicate).
  CHECK_FALSE(headpad_key_supported(KeyShape{24, 128, 512, kFormatV41Fp8, kFormatV41Fp4, 64, 64, 2, 1}));
  CHECK_FALSE(headpad_key_supported(KeyShape{64, 128, 512, kFormatV41Fp8, kFormatNone, 64, 64, 2, 1}));
  CHECK_FALSE(headpad_key_supported(KeyShape{64, 128, 512, kFormatV41Fp8, kFormatV41Fp4, 48, 64, 2, 1}));
}

TEST_CASE("kv_insert launch plans follow the traits", "[kernels]") {
  for (int f : {kFormatV41Fp8, kFormatV41Fp4, kFormatV4Fp8}) {
    const LaunchPlan p = kv_insert_plan(KeyShape{0, 0, 0, f, kFormatNone, 64, 0, 0, 0}, kVariantSimt);
    CHECK(p.threads * KvInsertTraits::kDimsPerThread == kHeadDim);
    CHECK(p.ctas_per_item == 1);
    CHECK(p.cluster == 1);
    CHECK(p.smem_bytes == 0);
  }
}

TEST_CASE("every kv_insert key compiles for sm_90a with a clean ptxas report", "[kernels][nvrtc]") {
  for (int f : {kFormatV41Fp8, kFormatV41Fp4, kFormatV4Fp8}) {
    for (int page : {1, 32, 64, 128}) {
      const CompileKey k = make_kv_insert_key("sm_90a", f, page);
      k.validate();
      const CompiledKernel ck = compile_clean(k);
      CHECK(ck.resources.registers <= 64);  // 64-thread CTAs; nothing here needs more
    }
  }
}

TEST_CASE("every headpad key compiles for sm_90a with a clean ptxas report", "[kernels][nvrtc]") {
  int compiled = 0;
  for (const CompileKey& k : headpad_keys()) {
    k.validate();
    compile_clean(k);
    ++compiled;
  }
  CHECK(compiled >= 30);
}

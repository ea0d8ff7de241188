// test_swapab_compile.cpp: every swapab_decode key the product can register compiles through the real NVRTC
// path (swapjit::compile_key) for sm_90a with a clean ptxas report (no spills, no stack frame = no local
// memory, dynamic + static smem within the 227 KiB opt-in limit), and the host launch plan is the traits'
// plan (cluster = SWA tiles + compressed tiles <= 8, one cluster per token, smem as the traits lay it out).
// Axes: heads 8/16/32, the three record pairings plus SWA-only layers of each SWA format, compressed pages
// 64/128 (and 1, the V4 ratio-128 view), both Q layouts, both output layouts. The default set covers every
// axis value with every pairing; SWAPJIT_FULL_KERNEL_MATRIX=1 compiles the full cross product.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "jit/compile_key.hpp"
#include "jit/error.hpp"
#include "jit/kernel_family.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "jit/specializer.hpp"
#include "kernels_src/swapab_traits.cuh"
#include "tests/catch.hpp"
#include "tests/compile_checks.hpp"
#include "tests/sample_keys.hpp"

using namespace swapjit;

namespace {

using testing::kSmemOptinLimit;

using testing::RecordPairing;
const std::vector<RecordPairing> kPairs = {{kFormatV41Fp8, kFormatV41Fp8}, {kFormatV41Fp8, kFormatV41Fp4},
                                           {kFormatV4Fp8, kFormatV4Fp8},   {kFormatV41Fp8, kFormatNone},
                                           {kFormatV4Fp8, kFormatNone}};

CompileKey swapab_key(int heads, RecordPairing pr, int comp_page, int q, int out, int window = 128, int topk = 512) {
  return testing::decode_key(Family::kSwapabDecode, heads, pr, 64, comp_page, topk, q, out, window);
}

std::vector<CompileKey> swapab_keys() {
  const bool full = std::getenv("SWAPJIT_FULL_KERNEL_MATRIX") != nullptr;
  std::vector<CompileKey> keys;
  int i = 0;  // rotates the secondary axes in the covering set
  for (const RecordPairing& pr : kPairs) {
    for (int h : {8, 16, 32}) {
      if (full) {
        for (int cp : {64, 128})
          for (int q : {kQLayoutPlain, kQLayoutChunk16})
            for (int o : {kOutMxfp8Ofused, kOutBf16}) keys.push_back(swapab_key(h, pr, cp, q, o));
      } else {
        for (int cp : {64, 128}) {
          keys.push_back(swapab_key(h, pr, cp, i % 2 ? kQLayoutPlain : kQLayoutChunk16,
                                    (i / 2) % 2 ? kOutBf16 : kOutMxfp8Ofused));
          ++i;
        }
      }
    }
  }
  // Odd shapes: a window that is not a multiple of 64, the 8-CTA limit, 1-slot compressed pages.
  keys.push_back(swapab_key(32, kPairs[1], 64, kQLayoutChunk16, kOutMxfp8Ofused, 100, 300));
  keys.push_back(swapab_key(16, kPairs[0], 128, kQLayoutPlain, kOutBf16, 128, 768));
  keys.push_back(swapab_key(16, kPairs[2], 1, kQLayoutChunk16, kOutMxfp8Ofused, 128, 512));
  keys.push_back(swapab_key(16, kPairs[3], 0, kQLayoutChunk16, kOutBf16, 64, 0));
  return keys;
}

}  // namespace

TEST_CASE("swapab launch plans follow the traits", "[kernels]") {
  for (const CompileKey& k : swapab_keys()) {
    INFO(k.describe());
    k.validate();
    const KeyShape s = k.shape();
    REQUIRE(swapab_key_supported(s));
    const LaunchPlan plan = launch_plan(k);
    const LaunchPlan direct = swapab_plan(s, parse_variant(k.variant));
    CHECK(plan.threads == direct.threads);
    CHECK(plan.cluster == direct.cluster);
    CHECK(plan.ctas_per_item == direct.ctas_per_item);
    CHECK(plan.smem_bytes == direct.smem_bytes);
    CHECK(plan.threads == kSwapabThreads);
    // One cluster per decode token, one CTA per tile: ceil(window / 64) + ceil(topk / 128).
    CHECK(plan.ctas_per_item == plan.cluster);
    CHECK(plan.cluster == (k.window + 63) / 64 + (k.topk + 127) / 128);
    CHECK(plan.cluster >= 1);
    CHECK(plan.cluster <= 8);
    CHECK(plan.smem_bytes <= kSmemOptinLimit);
    // Wide tiling: wgmma keys with a compressed list, 64-slot compressed tiles, at most 16 CTAs.
    CHECK(plan.wide_cluster == direct.wide_cluster);
    CHECK(plan.wide_max_items == 0);  // the loader's to set, from the device
    const int wide = (k.window + 63) / 64 + (k.topk + 63) / 64;
    const bool has_wide = k.variant == "wgmma" && k.topk > 0 && wide <= 16 && wide > plan.cluster;
    CHECK(plan.wide_cluster == (has_wide ? wide : 0));
    // Mid tiling: wgmma keys with a compressed list, 96-slot compressed tiles, a portable cluster larger
    // than the key's, and whole softmax slots per thread.
    CHECK(plan.mid_cluster == direct.mid_cluster);
    CHECK(plan.mid_max_items == 0);
    const int mid = (k.window + 63) / 64 + (k.topk + 95) / 96;
    const int tph = std::min(kSwapabThreads / k.live_heads, 32);
    const bool has_mid = k.variant == "wgmma" && k.topk > 0 && mid <= 8 && mid > plan.cluster && 96 % tph == 0;
    CHECK(plan.mid_cluster == (has_mid ? mid : 0));
    const SwapabSmem m = swapab_smem(s, parse_variant(k.variant));
    // The fp32 O^T export aliases the KV tile (mma) or Q and the scores (wgmma), and must fit inside them
    // without reaching P, which the wgmma O^T reads while other warpgroups export.
    if (k.variant == "wgmma") {
      CHECK(m.oexp == m.q);
      CHECK(m.oexp + k.live_heads * kHeadDim * 4 <= m.p_hi);
    } else {
      CHECK(m.oexp == m.kv);
      CHECK(k.live_heads * kHeadDim * 4 <= m.q - m.kv);
    }
    CHECK(m.total == plan.smem_bytes);
  }
}

TEST_CASE("swapab plan numbers of the model layers", "[kernels]") {
  // V4.1-Flash compressed layer: 2 SWA + 4 compressed CTAs; 32 heads x 128-slot tiles within one SM.
  const KeyShape flash{32, 128, 512, kFormatV41Fp8, kFormatV41Fp4, 64, 64, kQLayoutChunk16, kOutMxfp8Ofused};
  CHECK(swapab_cluster(flash) == 6);
  CHECK(swapab_plan(flash, kVariantMma).smem_bytes == 199680);  // incl. 1024 B of base-alignment slack
  CHECK(swapab_plan(flash, kVariantMma).smem_bytes > 233472 / 2 - 1024);  // sized for one CTA per SM
  // wgmma: the score buffer holds the K parts (4 x (64 + 4) floats per head, the rows padded against bank
  // conflicts): 18 KiB more at 32 heads.
  CHECK(swapab_plan(flash, kVariantWgmma).smem_bytes == 218112);
  CHECK(swapab_plan(flash, kVariantWgmma).smem_bytes <= kSmemOptinLimit);
  // Few tokens: 2 SWA + 8 compressed CTAs of 64 slots each (non-portable cluster), wgmma only.
  CHECK(swapab_plan(flash, kVariantWgmma).wide_cluster == 10);
  CHECK(swapab_plan(flash, kVariantMma).wide_cluster == 0);
  // 8 to 16 tokens or so: 2 SWA + 6 compressed CTAs of 96 slots (portable), wgmma only.
  CHECK(swapab_plan(flash, kVariantWgmma).mid_cluster == 8);
  CHECK(swapab_plan(flash, kVariantMma).mid_cluster == 0);
  // SWA-only layer: 2 CTAs of 64 slots, smem sized for 64-slot tiles.
  const KeyShape swa{16, 128, 0, kFormatV41Fp8, kFormatNone, 64, 0, kQLayoutChunk16, kOutMxfp8Ofused};
  CHECK(swapab_cluster(swa) == 2);
  CHECK(swapab_tile_alloc(swa) == 64);
  // V4-Pro's topk 1024 needs 10 CTAs: not a swap-AB key (SPEC §1, §5).
  CHECK_FALSE(swapab_key_supported(KeyShape{16, 128, 1024, kFormatV4Fp8, kFormatV4Fp8, 64, 32, 2, 1}));
  CHECK_FALSE(swapab_key_supported(KeyShape{64, 128, 512, kFormatV41Fp8, kFormatV41Fp4, 64, 64, 2, 1}));
  CHECK_FALSE(swapab_key_supported(KeyShape{32, 128, 512, kFormatV41Fp8, kFormatNone, 64, 64, 2, 1}));
  CHECK_FALSE(swapab_key_supported(KeyShape{32, 128, 512, kFormatV41Fp8, kFormatV41Fp4, 48, 64, 2, 1}));
}

TEST_CASE("every swapab key compiles for sm_90a with a clean ptxas report", "[kernels][nvrtc]") {
  int compiled = 0;
  for (const CompileKey& k : swapab_keys()) {
    k.validate();
    CHECK(k.variant == "wgmma");  // the preferred variant on sm_90a
    testing::compile_clean(k);
    ++compiled;
  }
  CHECK(compiled >= 34);
}

TEST_CASE("the timeline build (swapjit timeline) of a decode key compiles, and only it has the stamp buffer",
          "[kernels][nvrtc]") {
  CompileKey headpad = testing::sample_swapab_key(64);
  headpad.family = Family::kHeadpadDecode;
  headpad.variant = "mma";
  for (const char* variant : {"wgmma", "mma", "headpad"}) {
    CompileKey k = testing::sample_swapab_key(32);
    k.variant = variant;
    if (k.variant == "headpad") k = headpad;
    INFO(k.describe());
    const CompiledKernel plain = compile_key(k);
    const CompiledKernel timed =
        compile_source(k, render_timeline_source(k, false), family_info(k.family).entry_expression);
    const std::string sym = "swapjit_timeline";
    CHECK(std::search(timed.cubin.begin(), timed.cubin.end(), sym.begin(), sym.end()) != timed.cubin.end());
    CHECK(std::search(plain.cubin.begin(), plain.cubin.end(), sym.begin(), sym.end()) == plain.cubin.end());
    CHECK(timed.resources.spill_store_bytes == 0);
    // The lean build (`swapjit timeline --lean`): the stamps without the per-warp points' shared array.
    const CompiledKernel lean =
        compile_source(k, render_timeline_source(k, true), family_info(k.family).entry_expression);
    CHECK(std::search(lean.cubin.begin(), lean.cubin.end(), sym.begin(), sym.end()) != lean.cubin.end());
    CHECK(lean.resources.spill_store_bytes == 0);
    CHECK(lean.resources.static_smem_bytes < timed.resources.static_smem_bytes);
  }
}

TEST_CASE("the mma variant of swapab keys still compiles for sm_90a (it also serves sm_100a)", "[kernels][nvrtc]") {
  const auto keys = swapab_keys();
  for (size_t i = 0; i < keys.size(); i += 5) {  // a spread of head counts, pairings and layouts
    CompileKey k = keys[i];
    k.variant = "mma";
    INFO(k.describe());
    k.validate();
    testing::compile_clean(k);
  }
}

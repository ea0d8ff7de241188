// test_presets.cpp: the key sets of the model presets (SPEC.md §1, §5, §6), counted by hand.
#include <algorithm>
#include <string>

#include "jit/error.hpp"
#include "jit/kernel_family.hpp"
#include "jit/presets.hpp"
#include "tests/catch.hpp"
#include "tests/sample_keys.hpp"

using namespace swapjit;

namespace {

PresetOptions opts(const char* preset, std::vector<int> tp, const char* kv = "", const char* arch = "sm_90a") {
  return testing::preset_options(preset, std::move(tp), kv, arch);
}

int count(const std::vector<CompileKey>& keys, Family f) {
  return static_cast<int>(
      std::count_if(keys.begin(), keys.end(), [&](const auto& k) { return k.family == f; }));
}

void check_unique_and_valid(const std::vector<CompileKey>& keys) {
  for (size_t i = 0; i < keys.size(); ++i) {
    INFO(keys[i].canonical_json());
    CHECK_NOTHROW(keys[i].validate());
    for (size_t j = i + 1; j < keys.size(); ++j) CHECK_FALSE(keys[i] == keys[j]);
  }
}

}  // namespace

TEST_CASE("v4.1-flash at TP 2 and 4 gives the hand-counted key set", "[jit]") {
  auto keys = preset_keys(opts("v4.1-flash", {2, 4}));
  check_unique_and_valid(keys);
  // Per TP: SWA-only keys for the 2 SWA formats + compressed keys for 3 pairings x 2 pages (64, 128) = 8,
  // each for headpad and swapab (16 and 32 heads are both eligible). Swap-AB also at half the heads (the
  // split steps' keys): TP2's 16-head split keys are TP4's own, so {32, 16, 8} x 8 = 24. kv_insert:
  // {v41_fp8, v41_fp4, v4_fp8} x pages {64, 128} = 6.
  CHECK(count(keys, Family::kHeadpadDecode) == 16);
  CHECK(count(keys, Family::kSwapabDecode) == 24);
  CHECK(count(keys, Family::kKvInsert) == 6);
  CHECK(keys.size() == 46);
  for (const auto& k : keys) {
    CHECK(k.arch == "sm_90a");
    if (k.family == Family::kKvInsert) {
      CHECK(k.variant == "simt");
      continue;
    }
    CHECK(k.variant == preferred_variant(k.family, "sm_90a"));
    if (k.family == Family::kSwapabDecode)
      CHECK((k.live_heads == 8 || k.live_heads == 16 || k.live_heads == 32));
    else
      CHECK((k.live_heads == 16 || k.live_heads == 32));
    CHECK(k.window == 128);
    CHECK((k.topk == 0 || k.topk == 512));
    CHECK(k.swa_page == 64);
    CHECK((k.comp_page == 0 || k.comp_page == 64 || k.comp_page == 128));
    CHECK(k.q_layout == kQLayoutChunk16);
    CHECK(k.out_layout == kOutMxfp8Ofused);
  }
}

TEST_CASE("--kv narrows a preset to one pairing", "[jit]") {
  auto keys = preset_keys(opts("v4.1-flash", {2}, "v41_fp8+v41_fp4"));
  check_unique_and_valid(keys);
  // headpad: SWA-only + pages 64 and 128 = 3; swapab the same at 32, 16 and 8 heads (the split keys) = 9;
  // kv_insert (v41_fp8, 64), (v41_fp4, 64/128).
  CHECK(count(keys, Family::kHeadpadDecode) == 3);
  CHECK(count(keys, Family::kSwapabDecode) == 9);
  CHECK(count(keys, Family::kKvInsert) == 3);
  for (const auto& k : keys)
    if (k.topk > 0) CHECK(k.comp_format == kFormatV41Fp4);
  CHECK_THROWS_AS(preset_keys(opts("v4.1-flash", {2}, "v41_fp4+v41_fp4")), Error);
}

TEST_CASE("v4-pro gets swap-AB only where the cluster fits", "[jit]") {
  // TP8: 16 heads. Compressed layers need 2 + 8 = 10 CTAs > 8: head-padded only; SWA-only layers get both.
  auto keys = preset_keys(opts("v4-pro", {8}));
  check_unique_and_valid(keys);
  CHECK(count(keys, Family::kHeadpadDecode) == 3);  // SWA-only, page 32 (ratio 4), page 1 (ratio 128)
  CHECK(count(keys, Family::kSwapabDecode) == 2);   // the SWA-only layer at 16 heads and its 8-head split key
  CHECK(count(keys, Family::kKvInsert) == 3);  // v4_fp8 at pages 64, 32, 1
  for (const auto& k : keys)
    if (k.family == Family::kSwapabDecode) CHECK(k.topk == 0);
  // TP1: 128 heads: no swap-AB at all; the head-padded keys of 128 heads and of its halves and quarters (64
  // and 32 heads: small steps split over two or four clusters a token).
  auto tp1 = preset_keys(opts("v4-pro", {1}));
  CHECK(count(tp1, Family::kSwapabDecode) == 0);
  CHECK(count(tp1, Family::kHeadpadDecode) == 9);
}

TEST_CASE("v4-flash TP 1, 2, 4, 8 and preset errors", "[jit]") {
  auto keys = preset_keys(opts("v4-flash", {1, 2, 4, 8}));
  check_unique_and_valid(keys);
  // headpad 3 per TP (TP1's split keys of 32 and 16 heads are TP2's and TP4's own); swapab 3 per TP at 32
  // and 16 heads (TP2, TP4), none at 128 or 64 (TP1, TP2), plus their split keys (16 and 8 heads; TP2's 16 are
  // TP4's own): {32, 16, 8} x 3.
  CHECK(count(keys, Family::kHeadpadDecode) == 12);
  CHECK(count(keys, Family::kSwapabDecode) == 9);
  CHECK(count(keys, Family::kKvInsert) == 3);
  CHECK(compressed_page_for_ratio(2) == 64);
  CHECK(compressed_page_for_ratio(1) == 128);
  CHECK(compressed_page_for_ratio(4) == 32);
  CHECK(compressed_page_for_ratio(128) == 1);
  CHECK_THROWS_AS(preset_keys(opts("v5-ultra", {1})), Error);
  CHECK_THROWS_AS(preset_keys(opts("v4-flash", {3})), Error);
  CHECK_THROWS_AS(preset_keys(opts("v4-flash", {})), Error);
  // An arch older than sm_90 has no decode variant.
  CHECK_THROWS_AS(preset_keys(opts("v4-flash", {2}, "", "sm_80")), Error);
}

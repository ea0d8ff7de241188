// test_export_pack24.cpp: the swap-AB push merge's packed export (kernels_src/export_pack24.cuh) replayed on the
// host from its own constants: the export's fragment words (swapab_tile_wgmma.cuh export_packed) placed as
// stmatrix.trans places them, then read back as the merge reads a task (swapab_merge.cuh unpack_task). A
// hand-worked value pins the byte order (so a pack and an unpack that share one mistake cannot pass together),
// random values bound the error, and the special values keep their class.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "kernels_src/export_pack24.cuh"
#include "tests/catch.hpp"
#include "tests/prmt_host.hpp"

namespace pk = swapjit::pack24;
using swapjit::test::prmt;

namespace {

// Two heads' 16 dims (one 16-dim block) through the export: thread (r = l / 4, c = l % 4) holds heads h0, h1 at
// dims r and r + 8 in registers e = 0..3 (h0 r, h1 r, h0 r + 8, h1 r + 8). Its hi words are fragment elements
// (row r, columns h0 and h1) of matrices half 0 and 1, its lo word of the elements' matrix; .trans stores
// column h as head h's 16-B row, element r at 2 r.
void export_two_heads(const float (&v0)[16], const float (&v1)[16], uint8_t (&u0)[pk::kUnitBytes],
                      uint8_t (&u1)[pk::kUnitBytes]) {
  for (int r = 0; r < 8; ++r) {
    const uint32_t x[4] = {pk::round24(std::bit_cast<uint32_t>(v0[r])), pk::round24(std::bit_cast<uint32_t>(v1[r])),
                           pk::round24(std::bit_cast<uint32_t>(v0[r + 8])),
                           pk::round24(std::bit_cast<uint32_t>(v1[r + 8]))};
    const uint32_t hi[2] = {prmt(x[0], x[1], pk::kHiPair), prmt(x[2], x[3], pk::kHiPair)};
    const uint32_t lo = prmt(prmt(x[0], x[2], pk::kLoPair), prmt(x[1], x[3], pk::kLoPair), pk::kLoQuad);
    for (int half = 0; half < 2; ++half) {
      const uint16_t a = uint16_t(hi[half]), b = uint16_t(hi[half] >> 16);  // columns h0, h1
      std::memcpy(u0 + 16 * half + 2 * r, &a, 2);
      std::memcpy(u1 + 16 * half + 2 * r, &b, 2);
    }
    const uint16_t a = uint16_t(lo), b = uint16_t(lo >> 16);
    std::memcpy(u0 + pk::kLoOffset + 2 * r, &a, 2);
    std::memcpy(u1 + pk::kLoOffset + 2 * r, &b, 2);
  }
}

// The head-padded kernel's export (headpad_decode.cuh export_packed): its fragment rows are heads and its
// columns dims, so thread (r = l / 4, c = l % 4) holds, for one head, dims 2c, 2c + 1 of n-tile 2k (x[0][0..1])
// and of n-tile 2k + 1 (x[1][0..1]), i.e. dims d and d + 8 of the 16-dim block for d = 2c, 2c + 1. Its hi words
// are one head's fragment elements (columns 2c, 2c + 1); stmatrix (non-trans) stores the fragment row (the
// head) as the 16-B row, column j at 2 j.
void export_head_headpad(const float (&v)[16], uint8_t (&u)[pk::kUnitBytes]) {
  for (int c = 0; c < 4; ++c) {
    uint32_t x[2][2];
    for (int j = 0; j < 2; ++j)
      for (int e = 0; e < 2; ++e) x[j][e] = pk::round24(std::bit_cast<uint32_t>(v[8 * j + 2 * c + e]));
    const uint32_t hi[2] = {prmt(x[0][0], x[0][1], pk::kHiPair), prmt(x[1][0], x[1][1], pk::kHiPair)};
    const uint32_t lo = prmt(prmt(x[0][0], x[1][0], pk::kLoPair), prmt(x[0][1], x[1][1], pk::kLoPair), pk::kLoQuad);
    for (int j = 0; j < 2; ++j) std::memcpy(u + 16 * j + 4 * c, &hi[j], 4);  // columns 2c, 2c + 1 of n-tile 2k + j
    std::memcpy(u + pk::kLoOffset + 4 * c, &lo, 4);                        // elements 2c, 2c + 1
  }
}

// The merge's read of N dims from dim d (0, 4, 8, 12) of a unit.
template <int N>
void unpack_task(const uint8_t* unit, int d, float (&out)[N]) {
  uint32_t hw[N / 2], lw[N / 2];
  std::memcpy(hw, unit + 2 * d, sizeof hw);
  std::memcpy(lw, unit + pk::kLoOffset + 2 * (d & 7), sizeof lw);
  const uint32_t half = (d >> 3) & 1;
  const uint32_t s0 = pk::kDimSel[0][0] + 0x11u * half, s1 = pk::kDimSel[0][1] + 0x11u * half;
  REQUIRE(s0 == pk::kDimSel[half][0]);
  REQUIRE(s1 == pk::kDimSel[half][1]);
  for (int k = 0; k < N / 2; ++k) {
    out[2 * k] = std::bit_cast<float>(prmt(hw[k], lw[k], s0));
    out[2 * k + 1] = std::bit_cast<float>(prmt(hw[k], lw[k], s1));
  }
}

// What the format keeps of x: the top 24 bits of x + 0x80, the low byte repeating bits 8..15.
uint32_t expected_bits(float x) {
  const uint32_t r = pk::round24(std::bit_cast<uint32_t>(x)) & 0xFFFFFF00u;
  return r | ((r >> 8) & 0xFFu);
}

void round_trip_both_ways(const float (&v0)[16], const float (&v1)[16]) {
  uint8_t u0[pk::kUnitBytes], u1[pk::kUnitBytes];
  export_two_heads(v0, v1, u0, u1);
  for (int head = 0; head < 2; ++head) {
    const float(&v)[16] = head == 0 ? v0 : v1;
    const uint8_t* u = head == 0 ? u0 : u1;
    for (int d = 0; d < 16; d += 8) {  // 8-dim tasks
      float o[8];
      unpack_task<8>(u, d, o);
      for (int i = 0; i < 8; ++i) REQUIRE(std::bit_cast<uint32_t>(o[i]) == expected_bits(v[d + i]));
    }
    for (int d = 0; d < 16; d += 4) {  // 4-dim tasks
      float o[4];
      unpack_task<4>(u, d, o);
      for (int i = 0; i < 4; ++i) REQUIRE(std::bit_cast<uint32_t>(o[i]) == expected_bits(v[d + i]));
    }
  }
}

}  // namespace

TEST_CASE("pack24: a hand-worked unit") {
  // Head 0's dim 9 = pi (0x40490FDB): + 0x80 carries into 0x40491 05B, so its high half 0x4049 sits at bytes
  // 18..19 (2 * 9), its low byte 0x10 in element 1 (dim 9 = 1 + 8: the element's high byte), byte 35.
  float v0[16] = {}, v1[16] = {};
  v0[9] = std::bit_cast<float>(0x40490FDBu);
  v1[2] = -1.0f;  // 0xBF800000: high half 0xBF80 at bytes 4..5, low byte 0x00 at byte 36 (element 2, low byte)
  uint8_t u0[pk::kUnitBytes], u1[pk::kUnitBytes];
  export_two_heads(v0, v1, u0, u1);
  CHECK(u0[18] == 0x49);
  CHECK(u0[19] == 0x40);
  CHECK(u0[35] == 0x10);
  CHECK(u0[34] == 0x00);
  CHECK(u1[4] == 0x80);
  CHECK(u1[5] == 0xBF);
  CHECK(u1[36] == 0x00);
  float o[8];
  unpack_task<8>(u0, 8, o);
  CHECK(std::bit_cast<uint32_t>(o[1]) == 0x40491010u);
  unpack_task<8>(u1, 0, o);
  CHECK(o[2] == -1.0f);
}

TEST_CASE("pack24: random partials come back within 3 x 2^-16 relative, every dim of both heads") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-60, 60);
  double worst = 0.0;
  for (int n = 0; n < 20000; ++n) {
    float v0[16], v1[16];
    for (int i = 0; i < 16; ++i) {
      v0[i] = std::ldexp(mant(rng), expo(rng));
      v1[i] = std::ldexp(mant(rng), expo(rng));
    }
    round_trip_both_ways(v0, v1);
    for (float x : v0) {
      if (x == 0.0f) continue;
      const double y = std::bit_cast<float>(expected_bits(x));
      const double rel = std::fabs(y - x) / std::fabs(double(x));
      worst = std::max(worst, rel);
      REQUIRE(rel < 3 * std::ldexp(1.0, -16));
      REQUIRE(std::signbit(y) == std::signbit(x));
    }
  }
  CHECK(worst > std::ldexp(1.0, -17));  // rounding happened: the bound is not vacuous
}

TEST_CASE("pack24: zeros, infinities and NaN keep their class") {
  const float inf = std::numeric_limits<float>::infinity();
  float v0[16] = {-0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN()}, v1[16] = {};
  round_trip_both_ways(v0, v1);
  uint8_t u0[pk::kUnitBytes], u1[pk::kUnitBytes];
  export_two_heads(v0, v1, u0, u1);
  float o[4];
  unpack_task<4>(u0, 0, o);
  CHECK((o[0] == 0.0f && std::signbit(o[0])));
  CHECK(o[1] == inf);
  CHECK(o[2] == -inf);
  CHECK(std::isnan(o[3]));
}

TEST_CASE("pack24: the unit swizzle keeps aligned groups of 8 units and spreads 8 heads over 8 bank groups") {
  for (int h = 0; h < 32; ++h)
    for (int b = 0; b < 32; ++b) CHECK(pk::unit_index(h, b) / 8 == (h * 32 + b) / 8);
  for (int b = 0; b < 32; ++b) {
    unsigned groups = 0;
    for (int h = 0; h < 8; ++h) groups |= 1u << ((pk::unit_index(h, b) * pk::kUnitBytes / 16) % 8);
    CHECK(groups == 0xFFu);
  }
}

TEST_CASE("pack24: the head-padded kernel's fragment words give the same units") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-40, 40);
  for (int n = 0; n < 20000; ++n) {
    float v[16], other[16];
    for (int i = 0; i < 16; ++i) {
      v[i] = std::ldexp(mant(rng), expo(rng));
      other[i] = std::ldexp(mant(rng), expo(rng));
    }
    uint8_t hp[pk::kUnitBytes], sa[pk::kUnitBytes], sb[pk::kUnitBytes];
    export_head_headpad(v, hp);
    export_two_heads(v, other, sa, sb);  // the swap-AB export of the same head: byte for byte the same unit
    REQUIRE(std::memcmp(hp, sa, pk::kUnitBytes) == 0);
    for (int d = 0; d < 16; d += 8) {
      float o[8];
      unpack_task<8>(hp, d, o);
      for (int i = 0; i < 8; ++i) REQUIRE(std::bit_cast<uint32_t>(o[i]) == expected_bits(v[d + i]));
    }
  }
}

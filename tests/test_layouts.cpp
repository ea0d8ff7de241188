// test_layouts.cpp: Q layouts and output layouts of reference/layouts.hpp: fixed offsets worked out by
// hand, bijectivity, round trips (N_total not a multiple of 4), and one MXFP8 output block by hand.
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "kernels_src/key_shape.cuh"
#include "reference/layouts.hpp"
#include "reference/numerics.hpp"
#include "tests/catch.hpp"

using namespace swapjit;
using namespace swapjit::ref;

TEST_CASE("q layouts: hand offsets and round trips", "[ref][layouts]") {
  // plain, token stride 16 * 512 + 8: (t 1, h 2, d 3) -> 8200 + 1024 + 3 = 9227.
  CHECK(q_index(kQLayoutPlain, 0, 8200, 1, 2, 3) == 9227);
  // chunk16, H_pad 64, stride 64 * 512: (t 0, h 5, d 37) -> (37/16) * 1024 + 5 * 16 + 5 = 2133;
  //   (t 2, h 0, d 511) -> 2 * 32768 + 31 * 1024 + 15 = 97295.
  CHECK(q_index(kQLayoutChunk16, 64, 32768, 0, 5, 37) == 2133);
  CHECK(q_index(kQLayoutChunk16, 64, 32768, 2, 0, 511) == 97295);
  std::mt19937 rng(5);
  for (int layout : {kQLayoutPlain, kQLayoutChunk16}) {
    for (int heads : {16, 32}) {
      const int T = 3, hpad = 64;
      const int64_t stride = q_min_token_stride(layout, heads, hpad) + 16;  // a gap between tokens
      std::vector<uint16_t> logical(size_t(T) * heads * 512), back(logical.size());
      for (auto& v : logical) v = uint16_t(rng() % 0xFFFF);
      std::vector<uint16_t> buf(q_buffer_elems(layout, T, heads, hpad, stride), 0xFFFF);
      pack_q(layout, T, heads, hpad, stride, logical.data(), buf.data());
      size_t written = 0;
      for (auto v : buf) written += v != 0xFFFF;
      CHECK(written == logical.size());  // no two elements collide (values are never 0xFFFF)
      unpack_q(layout, T, heads, hpad, stride, buf.data(), back.data());
      CHECK(back == logical);
    }
  }
}

TEST_CASE("mxfp8 output: hand offsets, and the scale bytes tile the buffer", "[ref][layouts]") {
  // n_groups_alloc 3, N_total 5 -> N4 = 8. Data (t 1, h 9, d 70): g 1, h-in-group 1:
  //   (1 * 3 + 1) * 4096 + (70 / 32) * 256 + 1 * 32 + 70 % 32 = 16384 + 512 + 32 + 6 = 16934.
  CHECK(mx_data_offset(3, 1, 9, 70) == 16934);
  // Scale (t 3, h 9, block 5): b = 5 * 8 + 1 = 41 -> 4 * (3 + 1 * 32 * 8 + 10 * 8) + 1 = 1357.
  CHECK(mx_scale_offset(5, 3, 9, 5) == 1357);
  CHECK(n4_of(5) == 8);
  CHECK(n4_of(8) == 8);
  CHECK(mx_data_bytes(5, 3) == 5u * 3u * 4096u);
  CHECK(mx_scale_bytes(5, 3) == 4u * 32u * 8u * 3u);
  // Every (t < N_total, head, block) has its own byte, in range; rows N_total..N4-1 are never addressed.
  std::set<int64_t> seen;
  for (int t = 0; t < 5; ++t)
    for (int h = 0; h < 24; ++h)
      for (int kb = 0; kb < 16; ++kb) {
        const int64_t o = mx_scale_offset(5, t, h, kb);
        CHECK((o >= 0 && o < int64_t(mx_scale_bytes(5, 3))));
        CHECK(seen.insert(o).second);
        CHECK((o / 4) % 8 < 5);  // the int's row index t stays below N_total
      }
  CHECK(seen.size() == 5u * 24u * 16u);
}

TEST_CASE("mxfp8 output: one block worked out by hand", "[ref][layouts]") {
  // Head 3, block 2 (dims 64..95) of token 0; T = 1, 8 heads, n_groups_alloc 2, N_total 2 (N4 = 4).
  // amax 1.0: fl32(1/448) = 2^-8.81 -> e = -8, scale byte 119. Elements o * 2^8:
  //   1.0 -> 256 -> E 15, m 0 -> 0x78;  -0.5 -> -128 -> 0xF0;  0.25 -> 64 -> E 13 -> 0x68;
  //   2^-17 -> 2^-9 -> subnormal 1 -> 0x01;  2^-18 -> 2^-10, the tie of 0 and 2^-9 -> 0x00;
  //   -2^-19 -> -2^-11 -> -0 -> 0x80;  0.6 -> 153.6, between 144 (0x71) and 160 (0x72) -> 0x72.
  // Data byte of (h 3, d 64 + i) = 2 * 256 + 3 * 32 + i = 608 + i; scale byte: b = 2 * 8 + 3 = 19 ->
  //   4 * (0 + 0 + 4 * 4) + 3 = 67. All other blocks are zero: scale byte 105, zero elements.
  std::vector<double> o(8 * 512, 0.0);
  double* blk = o.data() + 3 * 512 + 64;
  blk[0] = 1.0, blk[1] = -0.5, blk[2] = 0.25, blk[3] = std::ldexp(1.0, -17), blk[4] = std::ldexp(1.0, -18);
  blk[5] = -std::ldexp(1.0, -19), blk[6] = 0.6;
  const uint8_t poison = 0xAB;
  std::vector<uint8_t> data(mx_data_bytes(2, 2), poison), scale(mx_scale_bytes(2, 2), poison);
  encode_mxfp8_output(1, 8, 2, 2, o.data(), data.data(), scale.data());
  const uint8_t want[7] = {0x78, 0xF0, 0x68, 0x01, 0x00, 0x80, 0x72};
  for (int i = 0; i < 7; ++i) CHECK(int(data[608 + i]) == int(want[i]));
  for (int i = 7; i < 32; ++i) CHECK(int(data[608 + i]) == 0);
  CHECK(int(scale[67]) == 119);
  // Live: token 0, group 0 (bytes 0..4095) and its 128 scale bytes; everything else keeps the poison.
  for (size_t i = 4096; i < data.size(); ++i) REQUIRE(data[i] == poison);
  int live_scales = 0;
  for (size_t i = 0; i < scale.size(); ++i) {
    if (scale[i] == poison) continue;
    ++live_scales;
    CHECK((i / 4) % 4 == 0);  // row t = 0 of the int view
    if (i != 67) CHECK(int(scale[i]) == kEmptyBlockScaleByte);
  }
  CHECK(live_scales == 128);
  // Amax exactly at a power-of-two boundary: 14 / 448 = 2^-5 -> e = -5, byte 122; 14 * 32 = 448 -> 0x7E.
  double b2[32] = {14.0};
  uint8_t d2[32], s2 = 0;
  mx_encode_block(b2, d2, &s2);
  CHECK(int(s2) == 122);
  CHECK(int(d2[0]) == 0x7E);
}

TEST_CASE("output layouts: round trips", "[ref][layouts]") {
  std::mt19937_64 rng(9);
  std::normal_distribution<double> nd(0, 1);
  const int T = 3, H = 16, ng = 3, nt = 7;  // N_total not a multiple of 4
  std::vector<double> o(size_t(T) * H * 512);
  for (auto& v : o) v = nd(rng) * std::exp2(double(int(rng() % 12)) - 6);
  std::vector<uint8_t> data(mx_data_bytes(nt, ng), 0xCD), scale(mx_scale_bytes(nt, ng), 0xCD);
  encode_mxfp8_output(T, H, ng, nt, o.data(), data.data(), scale.data());
  const std::vector<double> back = decode_mxfp8_output(T, H, ng, nt, data.data(), scale.data());
  for (size_t i = 0; i < o.size(); ++i) {
    const double s =
        ue8m0_to_double(scale[mx_scale_offset(nt, int(i / (H * 512)), int(i / 512 % H), int(i % 512 / 32))]);
    REQUIRE(std::fabs(back[i] - o[i]) <= std::fmax(std::fabs(o[i]) / 16, s * std::ldexp(1.0, -10)));
  }
  std::vector<uint16_t> bf(o.size());
  encode_bf16_output(T, H, o.data(), bf.data());
  const std::vector<double> bback = decode_bf16_output(T, H, bf.data());
  for (size_t i = 0; i < o.size(); ++i)
    REQUIRE(std::fabs(bback[i] - o[i]) <= std::fabs(o[i]) * std::ldexp(1.0, -8));  // half an ulp
}

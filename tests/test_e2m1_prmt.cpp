// test_e2m1_prmt.cpp: the sm_90 fp4 decode of the kernels (record_decode.cuh e2m1x8_scaled) replayed on the
// host from its own constants (kernels_src/e2m1_prmt_tables.cuh): the byte permutes must give bf16 of every
// e2m1 code, in every position of the 32-bit word whatever its neighbours, and the bf16x2 multiply by the
// e4m3 scale that follows must be exact for every code and scale byte (so `mul.rn.bf16x2` returns the
// product the reference decodes to); and the fp8 decode's bf16 multiply by a UE8M0 scale is exact as well.
#include <cmath>
#include <cstdint>
#include <random>

#include "kernels_src/e2m1_prmt_tables.cuh"
#include "reference/numerics.hpp"
#include "tests/catch.hpp"
#include "tests/prmt_host.hpp"

namespace t = swapjit::e2m1_prmt;
using namespace swapjit::ref;

namespace {

using swapjit::test::prmt;

// The kernel's permute sequence (without the scale multiply): four bf16x2 words of w's eight codes.
void decode_codes(uint32_t w, uint32_t (&out)[4]) {
  const uint32_t m = w & t::kMagnitudes, mh = m >> 16;
  const uint32_t l_lo = prmt(t::kLowA, t::kLowB, m), h_lo = prmt(t::kHighA, t::kHighB, m);
  const uint32_t l_hi = prmt(t::kLowA, t::kLowB, mh), h_hi = prmt(t::kHighA, t::kHighB, mh);
  out[0] = prmt(l_lo, h_lo, t::kPairLow);
  out[1] = prmt(l_lo, h_lo, t::kPairHigh);
  out[2] = prmt(l_hi, h_hi, t::kPairLow);
  out[3] = prmt(l_hi, h_hi, t::kPairHigh);
  const uint32_t w4 = w << 4;
  for (int k = 0; k < 4; ++k) out[k] |= prmt(w4, w, t::sign_selector(k)) & t::kSignBits;
}

}  // namespace

TEST_CASE("fp4 decode permutes: bf16 of every e2m1 code, in every position, whatever the neighbours", "[numerics][kernels-host]") {
  std::mt19937 rng(7);
  int checked = 0;
  for (int byte = 0; byte < 256; ++byte)      // two codes: low nibble even dim, high nibble odd dim
    for (int pos = 0; pos < 4; ++pos)         // which byte of the word (output word pos)
      for (int trial = 0; trial < 8; ++trial) {  // random neighbours, all-zero and all-one ones
        uint32_t w = trial == 0 ? 0u : trial == 1 ? 0xFFFFFFFFu : uint32_t(rng());
        w = (w & ~(0xFFu << (8 * pos))) | (uint32_t(byte) << (8 * pos));
        uint32_t out[4];
        decode_codes(w, out);
        for (int k = 0; k < 4; ++k)
          for (int half = 0; half < 2; ++half) {
            const uint8_t code = uint8_t((w >> (8 * k + 4 * half)) & 0xF);
            const uint16_t want = bf16_from_float(e2m1_to_float(code));  // code 8: -0 (0x8000)
            const uint16_t got = uint16_t(out[k] >> (16 * half));
            INFO("w " << w << " word " << k << " half " << half << " code " << int(code));
            REQUIRE(got == want);
            ++checked;
          }
      }
  CHECK(checked == 256 * 4 * 8 * 8);
}

TEST_CASE("fp4 decode multiply: e2m1 x e4m3 scale is exact in bf16 for every code and scale byte", "[numerics][kernels-host]") {
  for (int s = 0; s < 256; ++s) {
    const float scale = e4m3_to_float(uint8_t(s));
    if (std::isnan(scale)) continue;  // 0x7F / 0xFF: NaN propagates through the multiply, nothing to check
    // The scale as bf16 is exact (e4m3 has 3 mantissa bits).
    REQUIRE(bf16_to_float(bf16_from_float(scale)) == scale);
    for (int c = 0; c < 16; ++c) {
      const double p = double(e2m1_to_float(uint8_t(c))) * double(scale);
      INFO("code " << c << " scale byte " << s << " product " << p);
      // Exactly representable in bf16, and zero or normal (>= 2^-126: no subnormal flush can touch it).
      CHECK(double(bf16_to_float(bf16_from_double(p))) == p);
      CHECK((p == 0.0 || std::fabs(p) >= std::ldexp(1.0, -126)));
    }
  }
}

// The fp8 decode (record_decode.cuh e4m3x4_scaled) multiplies bf16(e4m3) by the UE8M0 scale in bf16
// (`mul.rn.bf16x2`), not in fp32: the same bits only while the product is representable in bf16 and normal.
// That holds for every code and every scale byte the writer emits (114..254, SPEC §2.3); a finite product past
// bf16's range overflows to infinity in both paths alike.
TEST_CASE("fp8 decode multiply: e4m3 x UE8M0 scale is exact in bf16 for every code and writer scale byte", "[numerics][kernels-host]") {
  int checked = 0;
  for (int s = 114; s <= 254; ++s) {
    const double scale = ue8m0_to_double(uint8_t(s));
    REQUIRE(double(bf16_to_float(bf16_from_double(scale))) == scale);  // a power of two: exact in bf16
    for (int c = 0; c < 256; ++c) {
      const float v = e4m3_to_float(uint8_t(c));
      if (std::isnan(v)) continue;  // 0x7F / 0xFF: NaN through both paths
      REQUIRE(double(bf16_to_float(bf16_from_double(v))) == double(v));  // e4m3 -> bf16 exact (4 significant bits)
      const double p = double(v) * scale;
      if (std::fabs(p) >= std::ldexp(1.0, 128)) continue;  // overflows fp32 and bf16 alike
      INFO("code " << c << " scale byte " << s << " product " << p);
      CHECK(double(bf16_to_float(bf16_from_double(p))) == p);
      CHECK((p == 0.0 || std::fabs(p) >= std::ldexp(1.0, -126)));  // zero or normal: no subnormal rounding
      ++checked;
    }
  }
  CHECK(checked > 141 * 250);
}

// test_mxfp8_exponent.cpp: the kernels' MXFP8 block exponent without a division (kernels_src/mxfp8_exponent.cuh)
// against the division form it replaced, ceil(log2(fl32(amax / 448))) with the ceil_log2_exponent bit rule of
// fp_convert.cuh, for every fp32 amax the epilogue can pass: each pattern from 1e-4f up to FLT_MAX, and +inf.
#include <bit>
#include <cstdint>
#include <cmath>
#include <limits>

#include "kernels_src/mxfp8_exponent.cuh"
#include "tests/catch.hpp"

namespace {

// The division form (decode_common.cuh before session 21): IEEE fp32 division, then ceil(log2) of the positive
// normal quotient from its bits (fp_convert.cuh ceil_log2_exponent).
int exponent_by_division(float amax) {
  const float sf = amax / 448.0f;
  return static_cast<int>((std::bit_cast<uint32_t>(sf) - 1u) >> 23) - 126;
}

}  // namespace

TEST_CASE("MXFP8 block exponent: the bit rule equals the division form for every amax >= 1e-4", "[numerics][kernels-host]") {
  const uint32_t first = std::bit_cast<uint32_t>(1e-4f);
  const uint32_t last = std::bit_cast<uint32_t>(std::numeric_limits<float>::max());
  uint64_t mismatches = 0;
  uint32_t first_bad = 0;
  for (uint32_t b = first; b <= last; ++b) {
    if (swapjit::mxfp8::block_exponent(b) != exponent_by_division(std::bit_cast<float>(b))) {
      if (mismatches++ == 0) first_bad = b;
    }
  }
  INFO("first mismatch at amax bits 0x" << std::hex << first_bad);
  CHECK(mismatches == 0);
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(swapjit::mxfp8::block_exponent(std::bit_cast<uint32_t>(inf)) == exponent_by_division(inf));
  CHECK(exponent_by_division(inf) == 128);  // scale byte 255: NaN
  // Hand-checked points: an all-zero block (amax floored at 1e-4) gives e = -22 (scale byte 105, SPEC §3.2
  // step 8); 448 fits scale 2^0; the next float above it needs 2^1.
  CHECK(swapjit::mxfp8::block_exponent(std::bit_cast<uint32_t>(1e-4f)) == -22);
  CHECK(swapjit::mxfp8::block_exponent(std::bit_cast<uint32_t>(448.0f)) == 0);
  CHECK(swapjit::mxfp8::block_exponent(std::bit_cast<uint32_t>(std::nextafter(448.0f, 1e9f))) == 1);
}

// test_export_pack24.cpp: the swap-AB push merge's packed slices (kernels_src/export_pack24.cuh) replayed on the
// host: four fp32 values in three words, each rounded to its top 24 bits. A hand-worked example pins the byte
// order (so a pack and an unpack that share one mistake cannot pass together), random values bound the error
// at 2^-16 relative, and the special values keep their class.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "kernels_src/export_pack24.cuh"
#include "tests/catch.hpp"

namespace p24 = swapjit::pack24;

namespace {

void round_trip(const float (&in)[4], float (&out)[4]) {
  unsigned w[3], x[4];
  p24::pack(std::bit_cast<unsigned>(in[0]), std::bit_cast<unsigned>(in[1]), std::bit_cast<unsigned>(in[2]),
            std::bit_cast<unsigned>(in[3]), w);
  p24::unpack(w, x);
  for (int i = 0; i < 4; ++i) out[i] = std::bit_cast<float>(x[i]);
}

}  // namespace

TEST_CASE("pack24: the bytes of a hand-worked example") {
  // a = 0x3F80_0000 (1.0), b = 0x4049_0FDB (pi), c = 0xC2F6_E97F (-123.456), d = 0x0000_0080 (a subnormal).
  // Rounded (+ 0x80, top 24 bits): a 3F8000, b 404910 (0xDB + 0x80 carries into 40490F), c C2F6E9 (0x7F + 0x80
  // = 0xFF: no carry), d 000001 (0x80 + 0x80 carries).
  unsigned w[3];
  p24::pack(0x3F800000u, 0x40490FDBu, 0xC2F6E97Fu, 0x00000080u, w);
  // [a1 a2 a3 b1] [b2 b3 c1 c2] [c3 d1 d2 d3], bytes little-endian within a word.
  CHECK(w[0] == 0x103F8000u);  // a = 3F 80 00 (a3 a2 a1), b1 = 0x10
  CHECK(w[1] == 0xF6E94049u);  // b3 b2 = 40 49, c2 c1 = F6 E9
  CHECK(w[2] == 0x000001C2u);  // d3 d2 d1 = 00 00 01, c3 = C2
  unsigned x[4];
  p24::unpack(w, x);
  CHECK(x[0] == 0x3F800000u);
  CHECK(x[1] == 0x40491000u);
  CHECK(x[2] == 0xC2F6E900u);
  CHECK(x[3] == 0x00000100u);
}

TEST_CASE("pack24: random partials come back within 2^-16 relative, in every position") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-60, 60);
  double worst = 0.0;
  for (int n = 0; n < 200000; ++n) {
    float in[4], out[4];
    for (float& v : in) v = std::ldexp(mant(rng), expo(rng));
    round_trip(in, out);
    for (int i = 0; i < 4; ++i) {
      REQUIRE(std::signbit(out[i]) == std::signbit(in[i]));
      if (in[i] == 0.0f) {
        REQUIRE(out[i] == 0.0f);
        continue;
      }
      const double rel = std::fabs(double(out[i]) - double(in[i])) / std::fabs(double(in[i]));
      worst = std::max(worst, rel);
      REQUIRE(rel <= std::ldexp(1.0, -16));
      // What unpack returns is exactly representable in 24 bits (the low byte zero).
      REQUIRE((std::bit_cast<unsigned>(out[i]) & 0xFFu) == 0u);
    }
  }
  CHECK(worst > std::ldexp(1.0, -17));  // the bound is not vacuous: rounding happened
}

TEST_CASE("pack24: zeros, infinities and NaN keep their class") {
  const float inf = std::numeric_limits<float>::infinity();
  const float in[4] = {-0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN()};
  float out[4];
  round_trip(in, out);
  CHECK((out[0] == 0.0f && std::signbit(out[0])));
  CHECK(out[1] == inf);
  CHECK(out[2] == -inf);
  CHECK(std::isnan(out[3]));
}

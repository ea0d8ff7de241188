// test_numerics.cpp: the scalar conversions of reference/numerics.hpp against independent formulas
// (sign * 2^(e - bias) * (1 + m / 2^mbits), subnormals), exhaustively where the code space is small.
#include <cmath>
#include <cstdint>
#include <random>

#include "reference/numerics.hpp"
#include "tests/catch.hpp"

using namespace swapjit::ref;

namespace {

// Independent decode of a minifloat code: 1 sign bit, `eb` exponent bits, `mb` mantissa bits, bias.
double minifloat(uint32_t code, int eb, int mb, int bias) {
  const int s = (code >> (eb + mb)) & 1;
  const int e = (code >> mb) & ((1 << eb) - 1);
  const int m = code & ((1 << mb) - 1);
  const double frac = double(m) / double(1 << mb);
  const double mag = e == 0 ? std::pow(2.0, 1 - bias) * frac : std::pow(2.0, e - bias) * (1.0 + frac);
  return s ? -mag : mag;
}

}  // namespace

TEST_CASE("e4m3: all 256 codes decode to the formula and round-trip", "[ref][numerics]") {
  for (int c = 0; c < 256; ++c) {
    const float v = e4m3_to_float(uint8_t(c));
    if ((c & 0x7F) == 0x7F) {
      CHECK(std::isnan(v));
      continue;
    }
    CHECK(double(v) == minifloat(c, 4, 3, 7));
    CHECK(std::signbit(v) == bool(c & 0x80));
    CHECK(int(e4m3_from_double(v)) == c);
  }
  CHECK(e4m3_to_float(0x7E) == 448.0f);
  CHECK(e4m3_to_float(0x01) == std::ldexp(1.0f, -9));
  CHECK(e4m3_to_float(0x08) == std::ldexp(1.0f, -6));
}

TEST_CASE("e4m3: round to nearest even between every pair of neighbours", "[ref][numerics]") {
  for (int c = 0; c < 0x7E; ++c) {
    const double lo = e4m3_to_float(uint8_t(c)), hi = e4m3_to_float(uint8_t(c + 1));
    const double mid = 0.5 * (lo + hi);
    const int even = (c % 2 == 0) ? c : c + 1;  // the code's LSB is the mantissa's LSB
    INFO("code " << c);
    CHECK(int(e4m3_from_double(mid)) == even);
    CHECK(int(e4m3_from_double(-mid)) == (even | 0x80));
    CHECK(int(e4m3_from_double(mid - (hi - lo) * 1e-3)) == c);
    CHECK(int(e4m3_from_double(mid + (hi - lo) * 1e-3)) == c + 1);
  }
  // Hand-picked: ties at 1 + 1/16 -> 1.0, 1 + 3/16 -> 1.25, subnormal 3 * 2^-10 -> 2 * 2^-9.
  CHECK(e4m3_from_double(1.0625) == 0x38);
  CHECK(e4m3_from_double(1.1875) == 0x3A);
  CHECK(e4m3_from_double(3 * std::ldexp(1.0, -10)) == 0x02);
  CHECK(e4m3_from_double(std::ldexp(1.0, -10)) == 0x00);
}

TEST_CASE("e4m3: satfinite, NaN and negative zero", "[ref][numerics]") {
  CHECK(e4m3_from_double(448.0) == 0x7E);
  CHECK(e4m3_from_double(449.0) == 0x7E);
  CHECK(e4m3_from_double(464.0) == 0x7E);  // the tie with 480 would round to the NaN code's magnitude
  CHECK(e4m3_from_double(1e30) == 0x7E);
  CHECK(e4m3_from_double(-1e30) == 0xFE);
  CHECK(e4m3_from_double(INFINITY) == 0x7E);
  CHECK(e4m3_from_double(-INFINITY) == 0xFE);
  CHECK((e4m3_from_double(NAN) & 0x7F) == 0x7F);
  CHECK(e4m3_from_double(-0.0) == 0x80);
  CHECK(e4m3_from_double(-std::ldexp(1.0, -11)) == 0x80);  // rounds to zero, keeps the sign
  CHECK(e4m3_from_double(0.0) == 0x00);
}

TEST_CASE("e2m1: all 16 codes, ties to even, saturation, negative zero", "[ref][numerics]") {
  for (int c = 0; c < 16; ++c) {
    CHECK(double(e2m1_to_float(uint8_t(c))) == minifloat(c, 2, 1, 1));
    CHECK(int(e2m1_from_float(e2m1_to_float(uint8_t(c)))) == c);
  }
  for (int c = 0; c < 7; ++c) {
    const float lo = e2m1_to_float(uint8_t(c)), hi = e2m1_to_float(uint8_t(c + 1));
    const float mid = 0.5f * (lo + hi);
    const int even = (c % 2 == 0) ? c : c + 1;
    INFO("code " << c);
    CHECK(int(e2m1_from_float(mid)) == even);
    CHECK(int(e2m1_from_float(-mid)) == (even | 8));
    CHECK(int(e2m1_from_float(std::nextafter(mid, 0.0f))) == c);
    CHECK(int(e2m1_from_float(std::nextafter(mid, 10.0f))) == c + 1);
  }
  CHECK(e2m1_from_float(2.5f) == 4);  // 2.0, not 3.0
  CHECK(e2m1_from_float(5.0f) == 6);  // 4.0, not 6.0
  CHECK(e2m1_from_float(0.25f) == 0);
  CHECK(e2m1_from_float(7.0f) == 7);
  CHECK(e2m1_from_float(1e9f) == 7);
  CHECK(e2m1_from_float(-1e9f) == 15);
  CHECK(e2m1_from_float(-INFINITY) == 15);
  CHECK(e2m1_from_float(-0.1f) == 8);
  CHECK(e2m1_from_float(-0.0f) == 8);
}

TEST_CASE("ue8m0: the bit trick equals ceil(log2) at, around and between powers of two", "[ref][numerics]") {
  // Independent reference: frexp gives x = m * 2^e with m in [0.5, 1); ceil(log2 x) = e - 1 iff m == 0.5.
  auto ceil_log2_ref = [](float x) {
    int e = 0;
    const double m = std::frexp(double(x), &e);
    return m == 0.5 ? e - 1 : e;
  };
  for (int k = -125; k <= 127; ++k) {
    const float p = std::ldexp(1.0f, k);
    INFO("k " << k);
    CHECK(ceil_log2_bits(p) == k);
    CHECK(ceil_log2_bits(std::nextafter(p, 0.0f)) == k);
    if (k < 127) CHECK(ceil_log2_bits(std::nextafter(p, INFINITY)) == k + 1);
    CHECK(ceil_log2_ref(p) == k);
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits(0x00800000u, 0x7F7FFFFFu);  // positive normals
  for (int i = 0; i < 200000; ++i) {
    const float x = float_from_bits(bits(rng));
    const int want = ceil_log2_ref(x);
    if (ceil_log2_bits(x) != want) FAIL("x = " << x << " bits " << float_bits(x));
    if (int(std::ceil(std::log2(double(x)))) != want) FAIL("libm disagrees at " << x);
  }
  CHECK(ceil_log2_bits(1e-4f) + 127 == 114);                // the smallest scale byte the writer emits
  CHECK(ceil_log2_bits(float(1e-4 / 448.0)) + 127 == 105);  // the empty output block's scale byte
  CHECK(std::isnan(ue8m0_to_double(255)));
  CHECK(ue8m0_to_double(127) == 1.0);
}

TEST_CASE("bf16: round to nearest even, from fp32 and from fp64", "[ref][numerics]") {
  CHECK(bf16_from_float(1.0f) == 0x3F80);
  CHECK(bf16_from_float(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);      // tie -> even
  CHECK(bf16_from_float(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);  // tie -> even (up)
  CHECK(bf16_from_float(-2.0f) == 0xC000);
  CHECK(std::isnan(bf16_to_float(bf16_from_float(NAN))));
  CHECK(bf16_from_float(3.4e38f) == 0x7F80);  // overflows to +inf under RN
  // fp64 input rounds once: a value just above a bf16 tie must round up, though its fp32 cast is the tie.
  const double x = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  CHECK(bf16_from_double(x) == 0x3F81);
  CHECK(bf16_from_float(float(x)) == 0x3F80);
  CHECK(bf16_from_double(-0.0) == 0x8000);
  CHECK(bf16_from_double(std::ldexp(1.0, -133)) == 0x0001);  // smallest subnormal
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits(0, 0xFFFFFFFFu);
  for (int i = 0; i < 100000; ++i) {
    const float f = float_from_bits(bits(rng));
    if (std::isnan(f)) continue;
    if (bf16_from_double(f) != bf16_from_float(f))
      FAIL("bf16 fp32/fp64 paths disagree at bits " << float_bits(f));
  }
}

// numerics.cpp: see numerics.hpp. Every conversion works on exact values: scaling by a power of two is
// exact in fp32 / fp64, so each rounding below happens exactly once, where SPEC.md puts it.
#include "reference/numerics.hpp"

#include <bit>
#include <cmath>
#include <limits>

namespace swapjit::ref {

uint32_t float_bits(float x) { return std::bit_cast<uint32_t>(x); }
float float_from_bits(uint32_t b) { return std::bit_cast<float>(b); }

uint16_t bf16_from_float(float x) {
  uint32_t u = float_bits(x);
  if (std::isnan(x)) return uint16_t((u >> 16) | 0x0040u);  // quiet NaN, sign kept
  // Round to nearest even on the 16 dropped bits; overflow of the largest finite values to inf is the
  // correct RN result.
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7FFFu + lsb;
  return uint16_t(u >> 16);
}

uint16_t bf16_from_double(double x) {
  if (std::isnan(x)) return bf16_from_float(float(x));
  const double a = std::fabs(x);
  double r;
  if (a == 0.0 || std::isinf(a)) {
    r = a;
  } else if (a >= 0x1p-126) {
    int e2 = 0;
    std::frexp(a, &e2);  // a in [2^(e2-1), 2^e2)
    const int e = e2 - 1;
    r = std::ldexp(std::nearbyint(std::ldexp(a, 7 - e)), e - 7);  // 8 significant bits, RN-even
  } else {
    r = std::ldexp(std::nearbyint(std::ldexp(a, 133)), -133);  // bf16 subnormal step 2^-133
  }
  // r is a bf16 value (or >= 2^128, which is the RN overflow to infinity), so the float cast is exact.
  const float f = r >= 0x1p128 ? std::numeric_limits<float>::infinity() : float(r);
  return bf16_from_float(std::signbit(x) ? -f : f);
}

float bf16_to_float(uint16_t b) { return float_from_bits(uint32_t(b) << 16); }

double exp2_int(int e) { return std::ldexp(1.0, e); }

double ue8m0_to_double(uint8_t b) {
  if (b == 255) return std::numeric_limits<double>::quiet_NaN();
  return exp2_int(int(b) - 127);
}

int ceil_log2_bits(float sf) { return int((float_bits(sf) - 1u) >> 23) - 126; }

uint8_t e4m3_from_double(double x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(x);
  if (a >= 448.0) return sign | 0x7E;  // satfinite, inf included
  if (a < 0.015625) {
    // Subnormal range (below 2^-6): steps of 2^-9. q = 8 is the smallest normal, code 0x08, which the
    // encoding below produces by the same integer, so no special case is needed.
    const double q = std::nearbyint(a * 512.0);  // exact scaling; nearbyint rounds half to even
    return sign | uint8_t(q);
  }
  int e2 = 0;
  const double m = std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1)
  int e = e2 - 1;                       // a = (2m) * 2^e, 2m in [1, 2)
  double q = std::nearbyint((2.0 * m - 1.0) * 8.0);
  if (q == 8.0) {
    q = 0.0;
    ++e;
  }
  const int biased = e + 7;
  // a < 448 here; rounding up to 480 (1.875 * 2^8, the NaN code's magnitude) must saturate to 448.
  if (biased > 15 || (biased == 15 && q == 7.0)) return sign | 0x7E;
  return sign | uint8_t((biased << 3) | int(q));
}

namespace {

float e4m3_decode(uint8_t code) {
  if ((code & 0x7F) == 0x7F) return std::numeric_limits<float>::quiet_NaN();
  const int exp_field = (code >> 3) & 0xF;
  const int man = code & 7;
  const float mag =
      exp_field == 0 ? std::ldexp(float(man), -9) : std::ldexp(1.0f + float(man) / 8.0f, exp_field - 7);
  return (code & 0x80) ? -mag : mag;
}

// 256-entry table: decoding sits in the reference's inner loops.
struct E4m3Table {
  float v[256];
  E4m3Table() {
    for (int c = 0; c < 256; ++c) v[c] = e4m3_decode(uint8_t(c));
  }
};

}  // namespace

float e4m3_to_float(uint8_t code) {
  static const E4m3Table table;
  return table.v[code];
}

uint8_t e2m1_from_float(float x) {
  if (std::isnan(x)) return 0x7;
  const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const float a = std::fabs(x);
  // Midpoints between neighbours; a tie goes to the even index (0, 1.0, 2.0, 4.0 have index 0, 2, 4, 6).
  uint8_t idx;
  if (a <= 0.25f)
    idx = 0;
  else if (a < 0.75f)
    idx = 1;
  else if (a <= 1.25f)
    idx = 2;
  else if (a < 1.75f)
    idx = 3;
  else if (a <= 2.5f)
    idx = 4;
  else if (a < 3.5f)
    idx = 5;
  else if (a <= 5.0f)
    idx = 6;
  else
    idx = 7;  // saturating, inf included
  return sign | idx;
}

float e2m1_to_float(uint8_t code) {
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float mag = kMag[code & 7];
  return (code & 8) ? -mag : mag;
}

}  // namespace swapjit::ref

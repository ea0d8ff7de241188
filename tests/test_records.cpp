// test_records.cpp: the record writer / decoder of reference/paged_cache.hpp. Byte fixtures are worked
// out by hand (NOT produced by the encoder), so an encoder and decoder sharing one mistake cannot pass.
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "jit/error.hpp"
#include "reference/numerics.hpp"
#include "reference/paged_cache.hpp"
#include "tests/catch.hpp"

using namespace swapjit;
using namespace swapjit::ref;

TEST_CASE("v41_fp8 record: hand-derived bytes", "[ref][records]") {
  std::vector<float> row(512, 0.0f);
  // Tile 0: amax 3.5, 3.5/448 = 2^-7 exactly -> e = -7, scale byte 120 = 0x78; data = x * 2^7:
  //   3.5 -> 448 = 1.75 * 2^8 -> E = 15, m = 6 -> 0x7E;  -1 -> -2^7 -> E = 14 -> 0xF0;
  //   2^-4 -> 2^3 -> E = 10 -> 0x50;  1.0625 -> 136, the tie between 128 (0x70) and 144 (0x71) -> even 0x70.
  row[0] = 3.5f, row[1] = -1.0f, row[2] = 0.0625f, row[3] = 1.0625f;
  // Tile 1: amax 1, 1/448 = 2^-8.81 -> e = -8, byte 119 = 0x77; 1 * 2^8 -> E = 15, m = 0 -> 0x78.
  row[32] = 1.0f;
  // Tile 3: amax 2^-20, sf = max(2^-20/448, 1e-4) = 1e-4 -> e = -13, byte 114 = 0x72;
  //   2^-20 * 2^13 = 2^-7 = 4 * 2^-9 -> subnormal m = 4 -> 0x04.
  row[96] = std::ldexp(1.0f, -20);
  // Every other tile is zero: sf = 1e-4 -> byte 0x72, data 0.
  std::vector<uint8_t> want_data(512, 0), want_scale(16, 0x72);
  want_data[0] = 0x7E, want_data[1] = 0xF0, want_data[2] = 0x50, want_data[3] = 0x70;
  want_data[32] = 0x78, want_data[96] = 0x04;
  want_scale[0] = 0x78, want_scale[1] = 0x77;
  std::vector<uint8_t> data(512, 0xEE), scale(16, 0xEE);
  encode_record(kFormatV41Fp8, row.data(), data.data(), scale.data());
  CHECK(data == want_data);
  CHECK(scale == want_scale);
  std::vector<float> back(512);
  decode_record(kFormatV41Fp8, want_data.data(), want_scale.data(), back.data());
  CHECK(back[0] == 3.5f);
  CHECK(back[1] == -1.0f);
  CHECK(back[3] == 1.0f);  // the tie rounded down
  CHECK(back[96] == std::ldexp(1.0f, -20));
}

TEST_CASE("v4_fp8 record: hand-derived bytes", "[ref][records]") {
  std::vector<float> row(512, 0.0f);
  // Tile 0 (dims 0..63): amax 7, 7/448 = 2^-6 -> e = -6, byte 121 = 0x79; 7 * 64 = 448 -> 0x7E;
  //   0.5 * 64 = 2^5 -> E = 12 -> 0x60. Tiles 1..6 zero -> 0x72. Scale byte 7 is padding, 0.
  row[0] = 7.0f, row[1] = 0.5f;
  // RoPE dims copied as little-endian bf16: 1.0 = 0x3F80, -2.0 = 0xC000, 0.15625 = 1.25 * 2^-3 = 0x3E20.
  row[448] = 1.0f, row[449] = -2.0f, row[511] = 0.15625f;
  std::vector<uint8_t> want_data(576, 0), want_scale = {0x79, 0x72, 0x72, 0x72, 0x72, 0x72, 0x72, 0x00};
  want_data[0] = 0x7E, want_data[1] = 0x60;
  want_data[448] = 0x80, want_data[449] = 0x3F, want_data[450] = 0x00, want_data[451] = 0xC0;
  want_data[574] = 0x20, want_data[575] = 0x3E;
  std::vector<uint8_t> data(576, 0xEE), scale(8, 0xEE);
  encode_record(kFormatV4Fp8, row.data(), data.data(), scale.data());
  CHECK(data == want_data);
  CHECK(scale == want_scale);
  std::vector<float> back(512);
  decode_record(kFormatV4Fp8, want_data.data(), want_scale.data(), back.data());
  CHECK(back == row);  // every value of this row is exact in the format
}

TEST_CASE("v41_fp4 record: hand-derived bytes", "[ref][records]") {
  std::vector<float> row(512, 0.0f);
  // Tile 0 (dims 0..15): amax 6 -> 6/6 = 1 -> e4m3 0x38. Codes of x / 1: 6 -> 7; -3 -> 8|5 = 0xD;
  //   1.25 (tie of 1 and 1.5) -> 1.0, index 2; 0.25 (tie of 0 and 0.5) -> 0; -0.125 -> -0, code 8.
  //   Bytes (even dim low nibble): [0] = 0x7 | 0xD << 4 = 0xD7, [1] = 0x2 | 0 = 0x02, [2] = 0x8 = 0x08.
  row[0] = 6.0f, row[1] = -3.0f, row[2] = 1.25f, row[3] = 0.25f, row[4] = -0.125f;
  // Tile 1 (dims 16..31): amax 0.75 -> 0.125 = 2^-3 -> E = 4 -> 0x20. 0.75/0.125 = 6 -> 7;
  //   0.4375/0.125 = 3.5 (tie of 3 and 4) -> 4.0, index 6. Byte 8 = 0x7 | 0x6 << 4 = 0x67.
  row[16] = 0.75f, row[17] = 0.4375f;
  // Tile 3 (dims 48..63): amax 0.0859375 = 11/128; /6 = 0.01432 < 2^-6 -> subnormal, / 2^-9 = 7.33 -> 7,
  //   scale 0x07 = 0.013671875 (rounded down); 0.0859375 / 0.013671875 = 6.29 -> saturates to 6, code 7.
  //   Byte 24 = 0x07.
  row[48] = 0.0859375f;
  // Zero tiles: amax / 6 = 0 clamps to 2^-9 -> 0x01.
  std::vector<uint8_t> want_data(256, 0), want_scale(32, 0x01);
  want_data[0] = 0xD7, want_data[1] = 0x02, want_data[2] = 0x08, want_data[8] = 0x67, want_data[24] = 0x07;
  want_scale[0] = 0x38, want_scale[1] = 0x20, want_scale[3] = 0x07;
  std::vector<uint8_t> data(256, 0xEE), scale(32, 0xEE);
  encode_record(kFormatV41Fp4, row.data(), data.data(), scale.data());
  CHECK(data == want_data);
  CHECK(scale == want_scale);
  std::vector<float> back(512);
  decode_record(kFormatV41Fp4, want_data.data(), want_scale.data(), back.data());
  CHECK(back[1] == -3.0f);
  CHECK(back[2] == 1.0f);
  CHECK(back[17] == 0.5f);         // 4 * 0.125
  CHECK(back[48] == 0.08203125f);  // clipped at 6 * scale
  CHECK(std::signbit(back[4]));
}

namespace {

// Random bf16 rows whose tiles span many magnitudes (subnormal e4m3 scales included).
std::vector<float> random_row(std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0, 1);
  std::uniform_int_distribution<int> mag(-14, 8);
  std::vector<float> row(512);
  for (int t = 0; t < 32; ++t) {
    const float s = std::ldexp(1.0f, mag(rng));
    for (int i = 0; i < 16; ++i) row[16 * t + i] = bf16_round(nd(rng) * s);
  }
  return row;
}

}  // namespace

TEST_CASE("records: encode -> decode within each format's bound, decode exact to bf16", "[ref][records]") {
  std::mt19937_64 rng(11);
  for (int fmt : {kFormatV41Fp8, kFormatV41Fp4, kFormatV4Fp8}) {
    const int tile = record_scale_tile(fmt);
    std::vector<uint8_t> data(record_data_bytes(fmt)), scale(record_scale_bytes(fmt));
    std::vector<float> back(512);
    for (int it = 0; it < 300; ++it) {
      const std::vector<float> row = random_row(rng);
      encode_record(fmt, row.data(), data.data(), scale.data());
      decode_record(fmt, data.data(), scale.data(), back.data());
      for (int d = 0; d < 512; ++d) {
        INFO("format " << fmt << " dim " << d << " x " << row[d] << " got " << back[d]);
        REQUIRE(bf16_round(back[d]) == back[d]);
        const double x = row[d], err = std::fabs(double(back[d]) - x);
        if (fmt == kFormatV4Fp8 && d >= 448) {
          REQUIRE(back[d] == row[d]);
        } else if (fmt == kFormatV41Fp4) {
          const double s = e4m3_to_float(scale[d / 16]);
          double amax = 0;
          for (int i = 16 * (d / 16); i < 16 * (d / 16) + 16; ++i) amax = std::fmax(amax, std::fabs(row[i]));
          // Half a step of e2m1 is at most max(0.25, |v| / 4) in units of the scale; a rounded-down scale
          // can clip the largest values at 6 * scale.
          REQUIRE(err <=
                  std::fmax(std::fmax(0.25 * s, 0.25 * std::fabs(x)), std::fabs(x) - 6 * s) * (1 + 1e-12));
          REQUIRE(s >= std::ldexp(1.0, -9));
          REQUIRE(std::fabs(s - std::fmin(std::fmax(amax / 6, std::ldexp(1.0, -9)), 448.0)) <=
                  std::fmax(s / 16, std::ldexp(1.0, -10)));  // e4m3 RN of the scale
        } else {
          // The scale byte is ceil(log2(max(amax/448, 1e-4))) + 127 (computed independently with libm).
          double amax = 0;
          for (int i = tile * (d / tile); i < tile * (d / tile) + tile; ++i)
            amax = std::fmax(amax, std::fabs(row[i]));
          const int e = int(std::ceil(std::log2(double(std::fmax(float(amax) / 448.0f, 1e-4f)))));
          REQUIRE(int(scale[d / tile]) == e + 127);
          // e4m3: half an ulp is 2^-4 relative for normals, 2^-10 absolute (times the scale) below them.
          REQUIRE(err <= std::fmax(std::fabs(x) / 16, std::ldexp(1.0, e - 10)));
        }
      }
      if (fmt == kFormatV4Fp8) REQUIRE(scale[7] == 0);
    }
  }
}

TEST_CASE("records: a NaN or Inf in a tile gives a NaN scale, other tiles unharmed", "[ref][records]") {
  std::vector<float> row(512, 0.75f);  // exact in every format (fp4: 0.75 / 6 = 0.125, a power of two)
  row[40] = NAN;                       // v41_fp8 tile 1, v41_fp4 tile 2, v4_fp8 tile 0
  row[300] = INFINITY;                 // v41_fp8 tile 9, v41_fp4 tile 18, v4_fp8 tile 4
  for (int fmt : {kFormatV41Fp8, kFormatV41Fp4, kFormatV4Fp8}) {
    const int tile = record_scale_tile(fmt);
    std::vector<uint8_t> data(record_data_bytes(fmt)), scale(record_scale_bytes(fmt));
    encode_record(fmt, row.data(), data.data(), scale.data());
    const uint8_t nan_scale = fmt == kFormatV41Fp4 ? 0x7F : 0xFF;
    CHECK(scale[40 / tile] == nan_scale);
    CHECK(scale[300 / tile] == nan_scale);
    std::vector<float> back(512);
    decode_record(fmt, data.data(), scale.data(), back.data());
    for (int d = 0; d < 512; ++d) {
      const bool bad_tile = d / tile == 40 / tile || d / tile == 300 / tile;
      if (fmt == kFormatV4Fp8 && d >= 448)
        CHECK(back[d] == 0.75f);
      else if (bad_tile)
        CHECK(std::isnan(back[d]));
      else
        CHECK(back[d] == 0.75f);
    }
  }
}

TEST_CASE("paged cache: slot addressing with page_stride > P * (D + S)", "[ref][records]") {
  // v41_fp8, P = 64, 32 extra bytes: page_stride = 64 * 528 + 32 = 33824. Slot 130 = page 2, offset 2:
  //   data at 2 * 33824 + 2 * 512 = 68672; scale at 2 * 33824 + 64 * 512 + 2 * 16 = 100448.
  PagedCache c = PagedCache::make(kFormatV41Fp8, 64, 3, 32);
  CHECK(c.page_stride == 33824);
  CHECK(c.bytes.size() == 3u * 33824u);
  CHECK(c.slots() == 192);
  CHECK(c.data_offset(130) == 68672);
  CHECK(c.scale_offset(130) == 100448);
  // v41_fp4, P = 128, 48 extra: page_stride = 128 * 288 + 48 = 36912. Slot 255 = page 1, offset 127:
  //   data 36912 + 127 * 256 = 69424; scale 36912 + 128 * 256 + 127 * 32 = 73744.
  PagedCache f = PagedCache::make(kFormatV41Fp4, 128, 2, 48);
  CHECK(f.data_offset(255) == 69424);
  CHECK(f.scale_offset(255) == 73744);
  // A written row touches its data and scale rows only; the page padding keeps its bytes.
  std::vector<float> row(512, 1.0f), back(512);
  c.write_row(130, row.data());
  c.read_row(130, back.data());
  CHECK(back == row);
  size_t touched = 0;
  for (size_t i = 0; i < c.bytes.size(); ++i) {
    const bool in_data = i >= 68672 && i < 68672 + 512, in_scale = i >= 100448 && i < 100448 + 16;
    if (c.bytes[i] != 0) {
      ++touched;
      CHECK((in_data || in_scale));
    }
  }
  CHECK(touched > 0);
  CHECK_THROWS_AS(c.data_offset(192), Error);
  CHECK_THROWS_AS(c.scale_offset(-1), Error);
  CHECK_THROWS_AS(c.write_row(192, row.data()), Error);
  CHECK_THROWS_AS(PagedCache::make(kFormatV41Fp8, 64, 1, 8), Error);  // stride not a multiple of 16
  CHECK_THROWS_AS(PagedCache::make(kFormatNone, 64, 1), Error);
  try {
    c.data_offset(1000);
    FAIL("no throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("records_equal skips only the unspecified bytes", "[ref][records]") {
  std::vector<float> row(512, 0.25f);
  row[5] = NAN;
  std::vector<uint8_t> d1(512), s1(16);
  encode_record(kFormatV41Fp8, row.data(), d1.data(), s1.data());
  std::vector<uint8_t> d2 = d1, s2 = s1;
  d2[7] ^= 0x11;  // inside the NaN tile: unspecified
  CHECK(records_equal(kFormatV41Fp8, d1.data(), s1.data(), d2.data(), s2.data()));
  d2[40] ^= 0x01;
  std::string why;
  CHECK_FALSE(records_equal(kFormatV41Fp8, d1.data(), s1.data(), d2.data(), s2.data(), &why));
  CHECK(why.find("data byte 40") != std::string::npos);
  s2 = s1;
  d2 = d1;
  s2[3] = 0x70;
  CHECK_FALSE(records_equal(kFormatV41Fp8, d1.data(), s1.data(), d2.data(), s2.data()));
}

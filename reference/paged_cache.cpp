// paged_cache.cpp: the record writer of SPEC.md §2.3 and the exact decoder of §2.2, plus page addressing
// (§2.1). This is the normative host copy: the kv_insert kernel and every decode kernel are checked against
// it, and tests/test_records.cpp checks it against byte fixtures worked out by hand.
#include "reference/paged_cache.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "jit/error.hpp"
#include "reference/numerics.hpp"

namespace swapjit::ref {
namespace {

void require_format(int format) {
  SWAPJIT_REQUIRE(format == kFormatV41Fp8 || format == kFormatV41Fp4 || format == kFormatV4Fp8,
                  ErrorCode::kInvalidArgument, "unknown record format " + std::to_string(format));
}

// Max |x| of a tile; NaN if the tile holds a NaN or an infinity (the writer then emits a NaN scale).
float tile_amax(const float* x, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return std::numeric_limits<float>::quiet_NaN();
    amax = std::fmax(amax, std::fabs(x[i]));
  }
  return amax;
}

// UE8M0-scaled e4m3 tile (v41_fp8 with 32 dims, v4_fp8 with 64): sf = max(fl32(amax / 448), 1e-4),
// e = ceil(log2(sf)), data = e4m3(x / 2^e), scale byte e + 127.
void encode_ue8m0_tile(const float* x, int n, uint8_t* data, uint8_t* scale_byte) {
  const float amax = tile_amax(x, n);
  if (std::isnan(amax)) {
    // SPEC: scale byte 255 (NaN); the data bytes are unspecified, we write e4m3 NaN.
    *scale_byte = 255;
    std::memset(data, 0x7F, size_t(n));
    return;
  }
  const float sf = std::fmax(amax / 448.0f, 1e-4f);  // fp32 division, as the public writer does
  const int e = ceil_log2_bits(sf);
  const double inv = exp2_int(-e);
  for (int i = 0; i < n; ++i) data[i] = e4m3_from_double(double(x[i]) * inv);  // exact scaling
  *scale_byte = uint8_t(e + 127);
}

}  // namespace

void encode_record(int format, const float* row, uint8_t* data, uint8_t* scale) {
  require_format(format);
  if (format == kFormatV41Fp8) {
    for (int t = 0; t < 16; ++t) encode_ue8m0_tile(row + 32 * t, 32, data + 32 * t, scale + t);
  } else if (format == kFormatV4Fp8) {
    for (int t = 0; t < 7; ++t) encode_ue8m0_tile(row + 64 * t, 64, data + 64 * t, scale + t);
    scale[7] = 0;  // padding byte, written as 0 (SPEC §2.3)
    for (int i = 0; i < kRopeDims; ++i) {
      const uint16_t b = bf16_from_float(row[kNoRopeDims + i]);  // values are bf16 already: exact copy
      data[kNoRopeDims + 2 * i] = uint8_t(b & 0xFF);             // little-endian
      data[kNoRopeDims + 2 * i + 1] = uint8_t(b >> 8);
    }
  } else {  // kFormatV41Fp4
    std::memset(data, 0, 256);
    for (int t = 0; t < 32; ++t) {
      const float* x = row + 16 * t;
      const float amax = tile_amax(x, 16);
      if (std::isnan(amax)) {
        scale[t] = 0x7F;  // NaN scale; the codes are unspecified, we leave them 0
        continue;
      }
      // clamp(amax / 6, 2^-9, 448) then e4m3 RN; no saturation is needed after the clamp.
      const float s = std::fmin(std::fmax(amax / 6.0f, 0.001953125f), 448.0f);
      const uint8_t sc = e4m3_from_double(s);
      const float sv = e4m3_to_float(sc);
      scale[t] = sc;
      for (int i = 0; i < 16; ++i) {
        const uint8_t code = e2m1_from_float(x[i] / sv);  // IEEE fp32 division, not a reciprocal multiply
        const int d = 16 * t + i;
        data[d / 2] |= uint8_t((d % 2 == 0) ? code : (code << 4));  // even dim in the low nibble
      }
    }
  }
}

void decode_record(int format, const uint8_t* data, const uint8_t* scale, float* out) {
  require_format(format);
  if (format == kFormatV41Fp8 || format == kFormatV4Fp8) {
    // e4m3 x 2^k: exact in fp64 and, the product having at most 4 significant bits, in fp32 / bf16.
    const int tile = record_scale_tile(format), dims = format == kFormatV41Fp8 ? kHeadDim : kNoRopeDims;
    for (int t = 0; t < dims / tile; ++t) {
      const double s = ue8m0_to_double(scale[t]);
      for (int d = t * tile; d < (t + 1) * tile; ++d) out[d] = float(double(e4m3_to_float(data[d])) * s);
    }
  }
  if (format == kFormatV4Fp8) {
    for (int i = 0; i < kRopeDims; ++i) {
      const uint16_t b = uint16_t(data[kNoRopeDims + 2 * i] | (data[kNoRopeDims + 2 * i + 1] << 8));
      out[kNoRopeDims + i] = bf16_to_float(b);
    }
  } else if (format == kFormatV41Fp4) {
    for (int d = 0; d < kHeadDim; ++d) {
      const uint8_t code = (d % 2 == 0) ? (data[d / 2] & 0xF) : (data[d / 2] >> 4);
      // The product of a 2-bit-significand e2m1 and a 4-bit e4m3 is exact in fp32 (and in bf16).
      out[d] = e2m1_to_float(code) * e4m3_to_float(scale[d / 16]);
    }
  }
}

PagedCache PagedCache::make(int format, int page, int pages, int64_t extra_page_bytes) {
  require_format(format);
  SWAPJIT_REQUIRE(page > 0 && pages >= 0, ErrorCode::kInvalidArgument, "bad page geometry");
  PagedCache c;
  c.format = format;
  c.page = page;
  c.pages = pages;
  c.page_stride = int64_t(page) * record_bytes(format) + extra_page_bytes;
  SWAPJIT_REQUIRE(
      extra_page_bytes >= 0 && c.page_stride % 16 == 0, ErrorCode::kInvalidArgument,
      "page_stride " + std::to_string(c.page_stride) + " must be >= P*(D+S) and a multiple of 16");
  c.bytes.assign(size_t(c.page_stride) * size_t(pages), 0);
  return c;
}

int64_t PagedCache::data_offset(int64_t slot) const {
  SWAPJIT_REQUIRE(
      slot >= 0 && slot < slots(), ErrorCode::kInvalidArgument,
      "slot " + std::to_string(slot) + " outside the cache's " + std::to_string(slots()) + " slots");
  return (slot / page) * page_stride + (slot % page) * record_data_bytes(format);
}

int64_t PagedCache::scale_offset(int64_t slot) const {
  SWAPJIT_REQUIRE(
      slot >= 0 && slot < slots(), ErrorCode::kInvalidArgument,
      "slot " + std::to_string(slot) + " outside the cache's " + std::to_string(slots()) + " slots");
  return (slot / page) * page_stride + int64_t(page) * record_data_bytes(format) +
         (slot % page) * record_scale_bytes(format);
}

void PagedCache::write_row(int64_t slot, const float* row512) {
  encode_record(format, row512, bytes.data() + data_offset(slot), bytes.data() + scale_offset(slot));
}

void PagedCache::read_row(int64_t slot, float* out512) const {
  decode_record(format, bytes.data() + data_offset(slot), bytes.data() + scale_offset(slot), out512);
}

bool records_equal(int format, const uint8_t* data_a, const uint8_t* scale_a, const uint8_t* data_b,
                   const uint8_t* scale_b, std::string* why) {
  require_format(format);
  const int S = record_scale_bytes(format), tile = record_scale_tile(format);
  const bool fp4 = format == kFormatV41Fp4;
  auto nan_scale = [&](uint8_t s) { return fp4 ? (s & 0x7F) == 0x7F : s == 255; };
  for (int t = 0; t < S; ++t) {
    if (scale_a[t] != scale_b[t]) {
      if (why)
        *why = "scale byte " + std::to_string(t) + ": " + std::to_string(scale_a[t]) + " vs " +
               std::to_string(scale_b[t]);
      return false;
    }
  }
  const int D = record_data_bytes(format);
  for (int i = 0; i < D; ++i) {
    // Data bytes of a tile with a NaN scale are unspecified; v4_fp8's RoPE bytes have no scale.
    const int dim = fp4 ? 2 * i : i;
    const bool scaled = !(format == kFormatV4Fp8 && i >= kNoRopeDims);
    if (scaled && nan_scale(scale_a[dim / tile])) continue;
    if (data_a[i] != data_b[i]) {
      if (why)
        *why = "data byte " + std::to_string(i) + ": " + std::to_string(data_a[i]) + " vs " +
               std::to_string(data_b[i]);
      return false;
    }
  }
  return true;
}

}  // namespace swapjit::ref

// layouts.cpp: see layouts.hpp. Addressing formulas are written once here and used by both directions, so
// a round trip alone cannot validate them; tests/test_layouts.cpp also checks fixed offsets by hand.
#include "reference/layouts.hpp"

#include <cmath>
#include <string>

#include "jit/error.hpp"
#include "kernels_src/key_shape.cuh"
#include "reference/numerics.hpp"

namespace swapjit::ref {

int64_t q_index(int q_layout, int q_h_pad, int64_t token_stride, int t, int h, int d) {
  if (q_layout == kQLayoutPlain) return int64_t(t) * token_stride + int64_t(h) * kHeadDim + d;
  SWAPJIT_REQUIRE(q_layout == kQLayoutChunk16, ErrorCode::kInvalidArgument,
                  "unknown q_layout " + std::to_string(q_layout));
  return int64_t(t) * token_stride + int64_t(d / 16) * (int64_t(q_h_pad) * 16) + int64_t(h) * 16 + d % 16;
}

int64_t q_min_token_stride(int q_layout, int heads, int q_h_pad) {
  return int64_t(q_layout == kQLayoutChunk16 ? q_h_pad : heads) * kHeadDim;
}

size_t q_buffer_elems(int q_layout, int tokens, int heads, int q_h_pad, int64_t token_stride) {
  SWAPJIT_REQUIRE(token_stride >= q_min_token_stride(q_layout, heads, q_h_pad), ErrorCode::kInvalidArgument,
                  "q token stride below the layout's row size");
  SWAPJIT_REQUIRE(q_layout != kQLayoutChunk16 || q_h_pad >= heads, ErrorCode::kInvalidArgument,
                  "chunk16 q_h_pad below live heads");
  if (tokens == 0) return 0;
  return size_t(int64_t(tokens - 1) * token_stride + q_min_token_stride(q_layout, heads, q_h_pad));
}

void pack_q(int q_layout, int tokens, int heads, int q_h_pad, int64_t token_stride, const uint16_t* logical,
            uint16_t* dst) {
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < heads; ++h)
      for (int d = 0; d < kHeadDim; ++d)
        dst[q_index(q_layout, q_h_pad, token_stride, t, h, d)] =
            logical[(size_t(t) * heads + h) * kHeadDim + d];
}

void unpack_q(int q_layout, int tokens, int heads, int q_h_pad, int64_t token_stride, const uint16_t* src,
              uint16_t* logical) {
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < heads; ++h)
      for (int d = 0; d < kHeadDim; ++d)
        logical[(size_t(t) * heads + h) * kHeadDim + d] =
            src[q_index(q_layout, q_h_pad, token_stride, t, h, d)];
}

int64_t mx_data_offset(int n_groups_alloc, int t, int h, int d) {
  const int g = h / kHeadsPerGroup, hg = h % kHeadsPerGroup;
  return (int64_t(t) * n_groups_alloc + g) * kGroupDataBytes + (d / 32) * 256 + hg * 32 + d % 32;
}

int64_t mx_scale_offset(int n_total, int t, int h, int kb) {
  const int64_t n4 = n4_of(n_total);
  const int g = h / kHeadsPerGroup, b = kb * kHeadsPerGroup + h % kHeadsPerGroup;
  return 4 * (int64_t(t) + int64_t(g) * 32 * n4 + int64_t(b / 4) * n4) + b % 4;
}

size_t mx_data_bytes(int n_total, int n_groups_alloc) {
  return size_t(n_total) * size_t(n_groups_alloc) * kGroupDataBytes;
}

size_t mx_scale_bytes(int n_total, int n_groups_alloc) {
  return size_t(4) * 32 * size_t(n4_of(n_total)) * size_t(n_groups_alloc);
}

void mx_encode_block(const double* o32, uint8_t* data32, uint8_t* scale_byte) {
  double amax = 0;
  for (int i = 0; i < kOutBlockDims; ++i) {
    if (!std::isfinite(o32[i])) {
      *scale_byte = 255;
      for (int j = 0; j < kOutBlockDims; ++j) data32[j] = 0x7F;
      return;
    }
    amax = std::fmax(amax, std::fabs(o32[i]));
  }
  amax = std::fmax(amax, 1e-4);
  const int e = ceil_log2_bits(float(amax / 448.0));  // fl32(amax / 448), then the exact ceil(log2)
  const double inv = exp2_int(-e);
  for (int i = 0; i < kOutBlockDims; ++i) data32[i] = e4m3_from_double(o32[i] * inv);
  *scale_byte = uint8_t(e + 127);
}

void encode_mxfp8_output(int tokens, int heads, int n_groups_alloc, int n_total, const double* o,
                         uint8_t* data, uint8_t* scale) {
  SWAPJIT_REQUIRE(
      heads % kHeadsPerGroup == 0 && heads / kHeadsPerGroup <= n_groups_alloc && tokens <= n_total,
      ErrorCode::kInvalidArgument, "mxfp8 output shape");
  uint8_t block[kOutBlockDims];
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < heads; ++h)
      for (int kb = 0; kb < kHeadDim / kOutBlockDims; ++kb) {
        const double* src = o + (size_t(t) * heads + h) * kHeadDim + kb * kOutBlockDims;
        mx_encode_block(src, block, scale + mx_scale_offset(n_total, t, h, kb));
        for (int i = 0; i < kOutBlockDims; ++i)
          data[mx_data_offset(n_groups_alloc, t, h, kb * kOutBlockDims + i)] = block[i];
      }
}

std::vector<double> decode_mxfp8_output(int tokens, int heads, int n_groups_alloc, int n_total,
                                        const uint8_t* data, const uint8_t* scale) {
  std::vector<double> o(size_t(tokens) * heads * kHeadDim);
  for (int t = 0; t < tokens; ++t)
    for (int h = 0; h < heads; ++h)
      for (int d = 0; d < kHeadDim; ++d) {
        const double s = ue8m0_to_double(scale[mx_scale_offset(n_total, t, h, d / kOutBlockDims)]);
        o[(size_t(t) * heads + h) * kHeadDim + d] =
            double(e4m3_to_float(data[mx_data_offset(n_groups_alloc, t, h, d)])) * s;
      }
  return o;
}

void encode_bf16_output(int tokens, int heads, const double* o, uint16_t* out) {
  const size_t n = size_t(tokens) * heads * kHeadDim;
  for (size_t i = 0; i < n; ++i) out[i] = bf16_from_double(o[i]);
}

std::vector<double> decode_bf16_output(int tokens, int heads, const uint16_t* out) {
  std::vector<double> o(size_t(tokens) * heads * kHeadDim);
  for (size_t i = 0; i < o.size(); ++i) o[i] = bf16_to_float(out[i]);
  return o;
}

}  // namespace swapjit::ref

// layouts.hpp: host pack / unpack of the Q layouts of SPEC.md §3.1 and the two output layouts of §3.2
// step 8 (mxfp8_ofused with its int32-packed scale bytes, and plain bf16). "Logical" arrays are dense
// [tokens][heads][512].
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace swapjit::ref {

// --- Q ---
// Element index of (t, h, d) in a Q buffer. plain: t * token_stride + h * 512 + d; chunk16:
// t * token_stride + (d / 16) * (q_h_pad * 16) + h * 16 + d % 16.
int64_t q_index(int q_layout, int q_h_pad, int64_t token_stride, int t, int h, int d);
// The tightest token stride of a layout: heads * 512 (plain) or q_h_pad * 512 (chunk16).
int64_t q_min_token_stride(int q_layout, int heads, int q_h_pad);
// Buffer elements a Q of `tokens` tokens needs.
size_t q_buffer_elems(int q_layout, int tokens, int heads, int q_h_pad, int64_t token_stride);
// Scatters logical bf16 [tokens][heads][512] into `dst` (q_buffer_elems long); other elements untouched.
void pack_q(int q_layout, int tokens, int heads, int q_h_pad, int64_t token_stride, const uint16_t* logical,
            uint16_t* dst);
// Gathers the live heads back into logical [tokens][heads][512].
void unpack_q(int q_layout, int tokens, int heads, int q_h_pad, int64_t token_stride, const uint16_t* src,
              uint16_t* logical);

// --- mxfp8_ofused output ---
inline int n4_of(int n_total) { return (n_total + 3) / 4 * 4; }
// Byte of element (t, head h, dim d) in the data buffer [N_total, n_groups_alloc, 4096].
int64_t mx_data_offset(int n_groups_alloc, int t, int h, int d);
// Byte of the scale of (t, head h, 32-dim block kb) in the scale buffer (int32 view, strides
// (1, 32 * N4, N4)): b = kb * 8 + h % 8, byte 4 * (t + g * 32 * N4 + (b / 4) * N4) + b % 4.
int64_t mx_scale_offset(int n_total, int t, int h, int kb);
size_t mx_data_bytes(int n_total, int n_groups_alloc);   // n_total * n_groups_alloc * 4096
size_t mx_scale_bytes(int n_total, int n_groups_alloc);  // 4 * 32 * N4 * n_groups_alloc
// One 32-dim block from fp64 values: amax = max(max|o|, 1e-4), e = ceil(log2(fl32(amax / 448))),
// scale byte e + 127, element e4m3_rn_satfinite(o * 2^-e). A block with a NaN/Inf gets scale 255 and
// data 0x7F (our choice; SPEC.md leaves it open). An all-zero block gives scale 105 and zero elements.
void mx_encode_block(const double* o32, uint8_t* data32, uint8_t* scale_byte);
// Writes the live region (tokens 0..T-1, groups 0..heads/8-1) from logical fp64 [T][heads][512]; every
// other byte is left untouched. REQUIRES heads % 8 == 0, heads / 8 <= n_groups_alloc, T <= n_total.
void encode_mxfp8_output(int tokens, int heads, int n_groups_alloc, int n_total, const double* o,
                         uint8_t* data, uint8_t* scale);
// Dequantises the live region into logical [T][heads][512] (element * 2^(scale - 127); scale 255 = NaN).
std::vector<double> decode_mxfp8_output(int tokens, int heads, int n_groups_alloc, int n_total,
                                        const uint8_t* data, const uint8_t* scale);

// --- bf16 output [T, heads, 512] (token stride heads * 512) ---
void encode_bf16_output(int tokens, int heads, const double* o, uint16_t* out);  // RN from fp64
std::vector<double> decode_bf16_output(int tokens, int heads, const uint16_t* out);

}  // namespace swapjit::ref

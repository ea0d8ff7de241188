// kernel_params.cuh: the one kernel-parameter struct of each family, passed by value as the only kernel
// argument. Included by the device sources (NVRTC) and by the host launcher (runtime/), so the layout is
// defined once. Shapes follow SPEC.md §3.1; every pointer carries its shape comment.
#pragma once
#ifdef __CUDACC_RTC__
#include <cuda/std/cstdint>
#define SWAPJIT_STD cuda::std
#else
#include <cstdint>
#define SWAPJIT_STD std
#endif

namespace swapjit {

using i32 = SWAPJIT_STD::int32_t;
using i64 = SWAPJIT_STD::int64_t;
using u8 = SWAPJIT_STD::uint8_t;
using u16 = SWAPJIT_STD::uint16_t;

// A paged KV cache (SPEC.md §2.1): page p starts at base + p * page_stride; P (slots per page) and the
// record format are compile-time (the key).
struct CacheView {
  const u8* base;   // [pages, page_stride] bytes, 16-byte aligned
  i64 page_stride;  // bytes, >= P * (D + S), multiple of 16
  i32 pages;        // page count (used only by host validation)
};

struct DecodeParams {
  i32 num_tokens;      // T >= 1; rows 0..T-1 of the output
  const u16* q;        // bf16; plain: [T, token_stride] with (h, d) at h*512+d; chunk16: see SPEC §3.1
  i64 q_token_stride;  // elements between tokens
  i32 q_h_pad;         // chunk16 only: padded head count (64 or 128)
  const i64* positions;  // [T] query positions
  const float* cos_sin;  // [max_pos, 64] fp32: cos of 32 angles, then sin of 32 angles
  i32 max_pos;
  const i32* swa_slots;  // [T, swa_width] slot ids into the SWA cache, -1 = none
  const i32* swa_lens;   // [T]
  i32 swa_width;         // list width (row stride) of swa_slots
  const i32* comp_slots;  // [T, comp_width] or null on SWA-only layers
  const i32* comp_lens;   // [T] or null
  i32 comp_width;
  const float* sink;  // [live heads] fp32, or null (= -inf)
  float sm_scale;
  CacheView swa_cache;
  CacheView comp_cache;
  // out_layout mxfp8_ofused:
  u8* out_data;         // fp8 [N_total, n_groups_alloc, 4096]
  i32* out_scale;       // int32 view, strides (1, 32 * N4, N4), N4 = ceil4(N_total); see SPEC §3.2 step 8
  i32 n_groups_alloc;   // groups allocated per token (>= live heads / 8)
  i32 n_total;          // the whole step's row count (N_total)
  // out_layout bf16:
  u16* out_bf16;            // bf16 [T, out_token_stride], (h, d) at h*512+d
  i64 out_token_stride;     // elements between tokens
  // The clusters over which each token's heads are split (both decode kernels; 1 = none). Cluster c takes
  // token c / head_groups and the key's live heads starting at head (c % head_groups) * (key heads): a layer
  // of 2H heads runs small steps on the H-head key, two clusters a token, so that each cluster loads half of
  // Q and exchanges half the partials (runtime/dispatch.hpp). Q, sink and output index the layer's heads.
  // 1, 2 or 4 (DecodeAttention::forward throws otherwise): swap-AB takes the token as c >> (head_groups / 2).
  i32 head_groups;
};

struct InsertParams {
  i32 num_rows;
  const u16* rows;        // bf16 [num_rows, row_stride]; the 512 dims of a row, RoPE applied unless positions
  i64 row_stride;         // elements between rows
  const i64* slots;       // [num_rows] slot id, -1 = skip the row
  const i64* positions;   // [num_rows] or null; when set, RoPE (SPEC §3.2 step 2) is applied to dims 448..511
  const float* cos_sin;   // [max_pos, 64], used only with positions
  i32 max_pos;
  CacheView cache;        // u8 written through a const-cast in the kernel; the format and P are the key's
};

}  // namespace swapjit

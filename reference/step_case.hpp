// step_case.hpp: one decode step held on the host (inputs, caches, outputs), the fp64 reference of SPEC.md
// §3.2 and the comparator of §4. The one home of this host-side truth, shared by the CPU tests,
// `swapjit check` and `swapjit bench`.
#pragma once
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels_src/key_shape.cuh"
#include "reference/paged_cache.hpp"

namespace swapjit::ref {

// The shape of a case (what a key plus a step size fixes).
struct CaseShape {
  int tokens = 1;
  int heads = 16;    // live heads
  int window = 128;  // SWA list width
  int topk = 512;    // 0 = SWA-only
  int swa_format = kFormatV4Fp8, comp_format = kFormatV4Fp8;
  int swa_page = 64, comp_page = 64;
  int q_layout = kQLayoutPlain;
  int out_layout = kOutBf16;
  int q_h_pad = 64;        // chunk16 padded heads (>= heads)
  int n_groups_alloc = 0;  // 0 = heads / 8 + 1 (one padding group, to check it keeps its poison)
  int n_total = 0;         // 0 = tokens + 3 (rows past T keep their poison)
};

// Knobs of the random generator; each covers an edge case of SPEC.md §4.
struct CaseOptions {
  uint64_t seed = 1;
  int cache_slots = 4096;        // slots per cache (rounded up to whole pages)
  int extra_page_bytes = 0;      // page_stride = P * (D + S) + extra (a multiple of 16)
  bool full_lengths = false;     // lens = width; otherwise random in [0, width]
  double minus_one_rate = 0.05;  // fraction of -1 slots inside [0, len)
  double duplicate_rate = 0.02;  // fraction of entries that repeat an earlier slot of the list
  bool empty_token = false;      // token 0 gets len 0 on both lists
  float sink_value = 0.5f;       // per-head sink = sink_value * (random in [0.5, 1.5]); -inf allowed
  bool no_sink = false;          // pass a null sink
  int position_mode = 0;         // 0 random, 1 all zero, 2 near the end of the table
  bool peaked = false;           // one score per token ~30 above the rest
  float q_scale = 1.0f;          // Q ~ N(0, q_scale)
  int max_pos = 4096;
  int q_stride_extra = 0;        // Q's token stride = the layout's minimum + this (odd: odd tokens' Q unaligned)
};

// A complete host-side step: inputs, caches and the expected outputs.
struct StepCase {
  CaseShape shape;
  CaseOptions options;
  std::vector<uint16_t> q;  // bf16, laid out per shape.q_layout; token stride q_token_stride
  int64_t q_token_stride = 0;
  std::vector<int64_t> positions;
  std::vector<float> cos_sin;  // [max_pos, 64]
  std::vector<int32_t> swa_slots, swa_lens, comp_slots, comp_lens;
  std::vector<float> sink;  // empty = no sink
  float sm_scale = 0;
  PagedCache swa_cache, comp_cache;
  // fp64 reference after inverse RoPE, before the output cast: [tokens][heads][512].
  std::vector<double> ref_out;
  int n_groups_alloc = 0, n_total = 0;
};

// Builds a random case (fresh inputs, never zeros) and fills ref_out.
StepCase make_case(const CaseShape& shape, const CaseOptions& options);

// The fp64 reference of SPEC.md §3.2 steps 1-7 over the case's host data (writes c.ref_out). Exposed for
// hand-made cases. Throws Error(kInvalidArgument) on a used slot at or past the cache's slot count, a
// length outside [0, width], a position outside the cos/sin table, or inputs whose sizes do not match the
// shape. A record with a NaN scale (a NaN / Inf was written) makes every head that uses it NaN.
void run_reference(StepCase& c);

// Q RoPE of SPEC.md §3.2 step 2, bit-exact: pair i = (448+2i, 449+2i), c = cs64[i], s = cs64[32+i],
// y0 = fma(x0, c, -(x1*s)), y1 = fma(x0, s, x1*c) in fp32, each rounded to bf16 (RN). q512 holds bf16
// values as float; dims 0..447 are untouched.
void rope_q_row(const float* cs64, float* q512);
// Inverse RoPE of step 7 in fp64 on dims 448..511: y0 = x0*c + x1*s, y1 = -x0*s + x1*c.
void inverse_rope_row(const float* cs64, double* o512);

// Byte sizes of the two output layouts for a case, and the expected bytes from ref_out (step 8).
size_t out_data_bytes(const StepCase& c);  // mxfp8: n_total * n_groups_alloc * 4096; bf16: tokens*heads*512*2
size_t out_scale_bytes(const StepCase& c);  // mxfp8: 4 * 32 * N4 * n_groups_alloc; bf16: 0
// The expected output buffers (step 8 from ref_out), whole: every byte outside the live region holds
// `poison`. For bf16 `scale` is empty and `data` is tokens*heads*512 bf16 (little-endian).
struct ExpectedOutput {
  std::vector<uint8_t> data, scale;
};
ExpectedOutput expected_output(const StepCase& c, uint8_t poison);

// Comparison of a kernel's output bytes with the reference (SPEC.md §4). Poison: every byte the kernel
// must not write must still equal `poison`.
struct CompareResult {
  bool pass = false;
  double max_abs_err = 0;  // over live heads, dequantised
  double rel_err = 0;      // max over heads of ||out - ref|| / ||ref|| (bf16), or 1 - min cosine (mxfp8)
  double bound = 0;        // the bound rel_err was held to
  long nan_count = 0;
  long poison_violations = 0;  // bytes outside the live region that changed
  long unwritten = 0;          // bytes inside the live region that still hold the poison pattern everywhere
  long scale_mismatches = 0;   // mxfp8 scale bytes off by more than allowed
  long element_violations = 0;
  std::string detail;  // first problems, human readable
};
// Checks, in order: buffer sizes; NaN/Inf positions (bf16: exactly the reference's; mxfp8: a block whose
// reference holds a NaN may be NaN throughout); bounds (bf16: per-head rel L2 <= 5e-3, an all-zero
// reference needs exact zeros; mxfp8: scale bytes equal or one off where the fp64 amax / 448 is within
// 2^-8 of a power of two, elements within max(1.1e-3, |ref| / 8, 2^-10 * block scale), per-head cosine
// >= 1 - 1e-3 over the head's blocks whose fp64 amax is >= 1e-4 (smaller blocks fall under the scale
// rule's 1e-4 floor and are not resolved; the element bound still holds there)); poison (live bytes written:
// a live 32-byte data block or bf16 head row, or a live scale byte, still all `poison` where the expected
// bytes differ counts as unwritten; every byte outside the live region keeps `poison`). Only c.shape,
// c.n_total, c.n_groups_alloc and c.ref_out are read.
CompareResult compare_output(const StepCase& c, const std::vector<uint8_t>& out_data,
                             const std::vector<uint8_t>& out_scale, uint8_t poison);

// The bf16 rule between two kernels on the same case (SPEC.md §4): the swap-AB kernel's max-abs error is
// at most 1.1x the head-padded kernel's. Not for mxfp8 output (a legal scale step doubles the rounding).
inline bool max_abs_ratio_ok(const CompareResult& swapab, const CompareResult& headpad) {
  return swapab.max_abs_err <= 1.1 * headpad.max_abs_err;
}

}  // namespace swapjit::ref

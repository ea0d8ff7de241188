// reference.cpp: the fp64 reference of SPEC.md §3.2, steps 1-7 (step 8 lives in layouts.cpp). Q RoPE is
// bit-exact (fp32 fma, then bf16 RN), records decode exactly, and scores, softmax with sink, P.V and the
// inverse RoPE run in fp64, so the only approximations are fp64 rounding and exp().
#include <cmath>
#include <limits>
#include <string>

#include "jit/error.hpp"
#include "reference/layouts.hpp"
#include "reference/numerics.hpp"
#include "reference/step_case.hpp"

namespace swapjit::ref {

void rope_q_row(const float* cs64, float* q) {
  for (int i = 0; i < kRopePairs; ++i) {
    const float c = cs64[i], s = cs64[kRopePairs + i];
    const float x0 = q[kNoRopeDims + 2 * i], x1 = q[kNoRopeDims + 2 * i + 1];
    // NOTE: the products are formed in fp64 (exact for two floats) and rounded to fp32 once, so that the
    // compiler cannot contract them into an fma; the fma itself is std::fma, exact then rounded once.
    const float x1s = float(double(x1) * double(s));
    const float x1c = float(double(x1) * double(c));
    const float y0 = std::fma(x0, c, -x1s);
    const float y1 = std::fma(x0, s, x1c);
    q[kNoRopeDims + 2 * i] = bf16_round(y0);
    q[kNoRopeDims + 2 * i + 1] = bf16_round(y1);
  }
}

void inverse_rope_row(const float* cs64, double* o) {
  for (int i = 0; i < kRopePairs; ++i) {
    const double c = cs64[i], s = cs64[kRopePairs + i];
    const double x0 = o[kNoRopeDims + 2 * i], x1 = o[kNoRopeDims + 2 * i + 1];
    o[kNoRopeDims + 2 * i] = x0 * c + x1 * s;
    o[kNoRopeDims + 2 * i + 1] = -x0 * s + x1 * c;
  }
}

namespace {

// a += p * v over one 512-dim row; __restrict and the fixed trip count let -O2 vectorise it.
void axpy512(double p, const double* __restrict v, double* __restrict a) {
  for (int d = 0; d < kHeadDim; ++d) a[d] += p * v[d];
}

// Appends the decoded rows of the used entries of one list (entry j used iff j < len and slot >= 0;
// duplicates kept) as fp64 [n][512].
void gather_list(const PagedCache& cache, const int32_t* slots, int len, int width, const char* name, int t,
                 std::vector<double>& rows) {
  SWAPJIT_REQUIRE(len >= 0 && len <= width, ErrorCode::kInvalidArgument,
                  std::string(name) + "_lens[" + std::to_string(t) + "] = " + std::to_string(len) +
                      " outside [0, " + std::to_string(width) + "]");
  float row[kHeadDim];
  for (int j = 0; j < len; ++j) {
    const int32_t slot = slots[j];
    if (slot < 0) continue;
    SWAPJIT_REQUIRE(slot < cache.slots(), ErrorCode::kInvalidArgument,
                    std::string(name) + " slot " + std::to_string(slot) + " (token " + std::to_string(t) +
                        ", entry " + std::to_string(j) + ") at or past the cache's " +
                        std::to_string(cache.slots()) + " slots");
    cache.read_row(slot, row);
    rows.insert(rows.end(), row, row + kHeadDim);
  }
}

}  // namespace

void run_reference(StepCase& c) {
  const CaseShape& sh = c.shape;
  const int T = sh.tokens, H = sh.heads;
  SWAPJIT_REQUIRE(T >= 1 && H >= 1, ErrorCode::kInvalidArgument, "tokens and heads must be >= 1");
  SWAPJIT_REQUIRE(c.positions.size() == size_t(T) && c.swa_lens.size() == size_t(T) &&
                      c.swa_slots.size() == size_t(T) * sh.window,
                  ErrorCode::kInvalidArgument, "SWA inputs do not match the shape");
  SWAPJIT_REQUIRE(
      sh.topk == 0 || (c.comp_lens.size() == size_t(T) && c.comp_slots.size() == size_t(T) * sh.topk),
      ErrorCode::kInvalidArgument, "compressed inputs do not match the shape");
  SWAPJIT_REQUIRE(c.sink.empty() || c.sink.size() == size_t(H), ErrorCode::kInvalidArgument, "sink size");
  const int max_pos = int(c.cos_sin.size() / 64);

  std::vector<uint16_t> q_bf(size_t(T) * H * kHeadDim);
  SWAPJIT_REQUIRE(c.q.size() >= q_buffer_elems(sh.q_layout, T, H, sh.q_h_pad, c.q_token_stride),
                  ErrorCode::kInvalidArgument, "q buffer too small for its layout");
  unpack_q(sh.q_layout, T, H, sh.q_h_pad, c.q_token_stride, c.q.data(), q_bf.data());

  c.ref_out.assign(size_t(T) * H * kHeadDim, 0.0);
  const double sm_scale = c.sm_scale;
  std::vector<double> rows, qd(size_t(kHeadDim) * H), z, acc(size_t(H) * kHeadDim);
  std::vector<float> qrow(kHeadDim);
  for (int t = 0; t < T; ++t) {
    const int64_t pos = c.positions[t];
    SWAPJIT_REQUIRE(pos >= 0 && pos < max_pos, ErrorCode::kInvalidArgument,
                    "position " + std::to_string(pos) + " outside the cos/sin table");
    const float* cs = c.cos_sin.data() + pos * 64;
    // Steps 1-2: Q of the live heads, RoPE'd, as fp64 [H][512].
    for (int h = 0; h < H; ++h) {
      for (int d = 0; d < kHeadDim; ++d) qrow[d] = bf16_to_float(q_bf[(size_t(t) * H + h) * kHeadDim + d]);
      rope_q_row(cs, qrow.data());
      for (int d = 0; d < kHeadDim; ++d) qd[size_t(h) * kHeadDim + d] = qrow[d];
    }
    // Step 3: exact decode of every used entry of both lists (one softmax over their union).
    rows.clear();
    gather_list(c.swa_cache, c.swa_slots.data() + size_t(t) * sh.window, c.swa_lens[t], sh.window, "swa", t,
                rows);
    if (sh.topk > 0)
      gather_list(c.comp_cache, c.comp_slots.data() + size_t(t) * sh.topk, c.comp_lens[t], sh.topk, "comp", t,
                  rows);
    const size_t n = rows.size() / kHeadDim;
    if (n == 0) continue;  // no used entry: all-zero output
    // Step 4: z[j][h] = sm_scale * <q_h, k_j> (bf16 x bf16 products are exact in fp64). Four partial
    // sums per dot product (a fixed order) keep this fast enough for 16 tokens x 640 entries x 32 heads.
    z.assign(n * H, 0.0);
    for (size_t j = 0; j < n; ++j) {
      const double* k = rows.data() + j * kHeadDim;
      for (int h = 0; h < H; ++h) {
        const double* qh = qd.data() + size_t(h) * kHeadDim;
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (int d = 0; d < kHeadDim; d += 4) {
          s0 += qh[d] * k[d];
          s1 += qh[d + 1] * k[d + 1];
          s2 += qh[d + 2] * k[d + 2];
          s3 += qh[d + 3] * k[d + 3];
        }
        z[j * H + h] = sm_scale * ((s0 + s1) + (s2 + s3));
      }
    }
    // Step 5: softmax with the sink over the union; the sink is in the denominator only.
    std::vector<double> m(H, -std::numeric_limits<double>::infinity()), L(H, 0.0);
    for (size_t j = 0; j < n; ++j)
      for (int h = 0; h < H; ++h) m[h] = std::fmax(m[h], z[j * H + h]);
    std::fill(acc.begin(), acc.end(), 0.0);
    for (size_t j = 0; j < n; ++j) {
      const double* v = rows.data() + j * kHeadDim;
      for (int h = 0; h < H; ++h) {
        const double p = std::exp(z[j * H + h] - m[h]);
        L[h] += p;
        axpy512(p, v, acc.data() + size_t(h) * kHeadDim);
      }
    }
    // Steps 6-7: normalise (the sink once), then inverse RoPE at the query position.
    for (int h = 0; h < H; ++h) {
      const double sink = c.sink.empty() ? -std::numeric_limits<double>::infinity() : double(c.sink[h]);
      const double denom = L[h] + std::exp(sink - m[h]);  // sink = +inf gives inf, and a zero output
      double* o = c.ref_out.data() + (size_t(t) * H + h) * kHeadDim;
      const double* a = acc.data() + size_t(h) * kHeadDim;
      for (int d = 0; d < kHeadDim; ++d) o[d] = a[d] / denom;
      inverse_rope_row(cs, o);
    }
  }
}

}  // namespace swapjit::ref

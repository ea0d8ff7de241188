// case_gen.cpp: random decode-step cases (make_case) and the expected output bytes. Inputs are fresh and
// never zero; the CaseOptions knobs produce the edge cases SPEC.md §4 lists.
//
// Bad inputs, as the reference treats them (for hand-made cases):
// - a NaN / Inf in a row given to the writer: that tile's scale is NaN (UE8M0 255, or e4m3 0x7F for
//   v41_fp4), so the row decodes to NaN there and the reference output of every head that uses it is NaN;
// - a used slot at or past the cache's slot count: run_reference (and PagedCache::data_offset) throw
//   Error(kInvalidArgument);
// - a length outside [0, width], or a position outside the cos/sin table: run_reference throws
//   Error(kInvalidArgument).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "jit/error.hpp"
#include "reference/layouts.hpp"
#include "reference/numerics.hpp"
#include "reference/step_case.hpp"

namespace swapjit::ref {
namespace {

// A fast "N(0,1)-ish" source for the bulk data (caches, Q): Irwin-Hall sum of four 16-bit uniforms from
// one splitmix64 draw, scaled to unit variance. NOTE: std::normal_distribution made make_case too slow
// (the caches alone hold millions of values); exact normality is not needed.
struct FastNormal {
  uint64_t state;
  float operator()() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const uint32_t sum = uint32_t(z & 0xFFFF) + uint32_t((z >> 16) & 0xFFFF) + uint32_t((z >> 32) & 0xFFFF) +
                         uint32_t(z >> 48);
    return (float(sum) * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;  // variance 4/12 -> 1
  }
};

// A bf16 value drawn from N(0, sigma), never zero (a zero input would hide an unwritten buffer).
float nonzero_bf16(FastNormal& nd, float sigma) {
  for (;;) {
    const float v = bf16_round(nd() * sigma);
    if (v != 0.0f && std::isfinite(v)) return v;
  }
}

void fill_cache(PagedCache& cache, std::mt19937_64& rng) {
  FastNormal nd{rng()};
  std::uniform_real_distribution<float> row_scale(0.5f, 2.0f);
  float row[kHeadDim];
  for (int64_t s = 0; s < cache.slots(); ++s) {
    const float rs = row_scale(rng);  // varies the scale bytes between rows
    for (int d = 0; d < kHeadDim; ++d) row[d] = nonzero_bf16(nd, rs);
    cache.write_row(s, row);
  }
}

// One list of slot ids [tokens][width] plus lengths. SWA lists are runs of consecutive slots (a real
// window; the runs cross page boundaries); compressed lists are random slots.
void make_list(int tokens, int width, int64_t cache_slots, bool consecutive, const CaseOptions& o,
               std::mt19937_64& rng, std::vector<int32_t>& slots, std::vector<int32_t>& lens) {
  slots.assign(size_t(tokens) * width, 0);
  lens.assign(size_t(tokens), 0);
  std::uniform_int_distribution<int64_t> any_slot(0, cache_slots - 1);
  std::uniform_int_distribution<int> any_len(0, width);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  for (int t = 0; t < tokens; ++t) {
    int32_t* row = slots.data() + size_t(t) * width;
    const int len = (o.empty_token && t == 0) ? 0 : o.full_lengths ? width : any_len(rng);
    lens[t] = len;
    const int64_t start = any_slot(rng);
    for (int j = 0; j < width; ++j) row[j] = int32_t(consecutive ? (start + j) % cache_slots : any_slot(rng));
    // Entries j >= len keep valid random slots: a kernel must ignore them, whatever they hold.
    for (int j = 0; j < len; ++j) {
      if (j > 0 && u01(rng) < o.duplicate_rate) {
        row[j] = row[std::uniform_int_distribution<int>(0, j - 1)(rng)];  // may copy a -1: still unused
      } else if (u01(rng) < o.minus_one_rate) {
        row[j] = -1;
      }
    }
  }
}

// Peaked softmax: the first used entry of token t gets the key k = a * sum_h q_h (q after RoPE), with `a`
// chosen so the mean over heads of sm_scale * <q_h, k> is 30; q_h's own term dominates each head's score.
void make_peak(StepCase& c, int t, const std::vector<uint16_t>& q_logical) {
  const CaseShape& sh = c.shape;
  PagedCache* cache = nullptr;
  int32_t slot = -1;
  for (int j = 0; j < c.swa_lens[t] && slot < 0; ++j)
    if (c.swa_slots[size_t(t) * sh.window + j] >= 0)
      slot = c.swa_slots[size_t(t) * sh.window + j], cache = &c.swa_cache;
  for (int j = 0; sh.topk > 0 && j < c.comp_lens[t] && slot < 0; ++j)
    if (c.comp_slots[size_t(t) * sh.topk + j] >= 0)
      slot = c.comp_slots[size_t(t) * sh.topk + j], cache = &c.comp_cache;
  if (slot < 0) return;
  const float* cs = c.cos_sin.data() + c.positions[t] * 64;
  std::vector<double> sum(kHeadDim, 0.0);
  std::vector<std::vector<float>> qs(sh.heads, std::vector<float>(kHeadDim));
  for (int h = 0; h < sh.heads; ++h) {
    for (int d = 0; d < kHeadDim; ++d)
      qs[h][d] = bf16_to_float(q_logical[(size_t(t) * sh.heads + h) * kHeadDim + d]);
    rope_q_row(cs, qs[h].data());
    for (int d = 0; d < kHeadDim; ++d) sum[d] += qs[h][d];
  }
  double mean_dot = 0;
  for (int h = 0; h < sh.heads; ++h)
    for (int d = 0; d < kHeadDim; ++d) mean_dot += qs[h][d] * sum[d] / sh.heads;
  const double a = 30.0 / (double(c.sm_scale) * mean_dot);
  float row[kHeadDim];
  for (int d = 0; d < kHeadDim; ++d) row[d] = bf16_round(float(a * sum[d]));
  cache->write_row(slot, row);
}

}  // namespace

StepCase make_case(const CaseShape& shape, const CaseOptions& options) {
  StepCase c;
  c.shape = shape;
  c.options = options;
  CaseShape& sh = c.shape;
  SWAPJIT_REQUIRE(sh.tokens >= 1 && sh.heads >= 1 && sh.window >= 1 && sh.topk >= 0,
                  ErrorCode::kInvalidArgument, "case shape");
  SWAPJIT_REQUIRE(sh.q_layout != kQLayoutChunk16 || sh.q_h_pad >= sh.heads, ErrorCode::kInvalidArgument,
                  "q_h_pad below heads");
  c.n_groups_alloc = sh.n_groups_alloc > 0 ? sh.n_groups_alloc : sh.heads / kHeadsPerGroup + 1;
  c.n_total = sh.n_total > 0 ? sh.n_total : sh.tokens + 3;
  sh.n_groups_alloc = c.n_groups_alloc;
  sh.n_total = c.n_total;
  std::mt19937_64 rng(options.seed);
  FastNormal nd{rng()};
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  const int T = sh.tokens, H = sh.heads;

  // Q: logical [T][H][512], then packed; every other element of the buffer (chunk16 padding heads) is
  // random too, so a kernel reading a padding head gets a visible error.
  std::vector<uint16_t> q_logical(size_t(T) * H * kHeadDim);
  for (auto& v : q_logical) v = bf16_from_float(nonzero_bf16(nd, options.q_scale));
  SWAPJIT_REQUIRE(options.q_stride_extra >= 0, ErrorCode::kInvalidArgument, "q_stride_extra below 0");
  c.q_token_stride = q_min_token_stride(sh.q_layout, H, sh.q_h_pad) + options.q_stride_extra;
  c.q.resize(q_buffer_elems(sh.q_layout, T, H, sh.q_h_pad, c.q_token_stride));
  for (auto& v : c.q) v = bf16_from_float(nonzero_bf16(nd, options.q_scale));
  pack_q(sh.q_layout, T, H, sh.q_h_pad, c.q_token_stride, q_logical.data(), c.q.data());

  // RoPE table: the usual inverse frequencies 10000^(-i/32), cos then sin, fp32.
  SWAPJIT_REQUIRE(options.max_pos >= 8, ErrorCode::kInvalidArgument, "max_pos too small");
  c.cos_sin.resize(size_t(options.max_pos) * 64);
  for (int p = 0; p < options.max_pos; ++p)
    for (int i = 0; i < kRopePairs; ++i) {
      const double ang = p * std::pow(10000.0, -double(i) / kRopePairs);
      c.cos_sin[size_t(p) * 64 + i] = float(std::cos(ang));
      c.cos_sin[size_t(p) * 64 + kRopePairs + i] = float(std::sin(ang));
    }
  c.positions.resize(T);
  for (int t = 0; t < T; ++t) {
    if (options.position_mode == 1)
      c.positions[t] = 0;
    else if (options.position_mode == 2)
      c.positions[t] = options.max_pos - 1 - (t % 4);
    else
      c.positions[t] = std::uniform_int_distribution<int64_t>(0, options.max_pos - 1)(rng);
  }

  // Caches, whole pages, every slot a random row through the writer.
  auto make_cache = [&](int format, int page) {
    const int pages = (options.cache_slots + page - 1) / page;
    PagedCache pc = PagedCache::make(format, page, pages, options.extra_page_bytes);
    fill_cache(pc, rng);
    return pc;
  };
  c.swa_cache = make_cache(sh.swa_format, sh.swa_page);
  make_list(T, sh.window, c.swa_cache.slots(), true, options, rng, c.swa_slots, c.swa_lens);
  if (sh.topk > 0) {
    c.comp_cache = make_cache(sh.comp_format, sh.comp_page);
    make_list(T, sh.topk, c.comp_cache.slots(), false, options, rng, c.comp_slots, c.comp_lens);
  }

  if (!options.no_sink) {
    c.sink.resize(H);
    for (int h = 0; h < H; ++h) c.sink[h] = options.sink_value * float(0.5 + u01(rng));  // -inf stays -inf
  }
  c.sm_scale = float(1.0 / std::sqrt(double(kHeadDim)));
  if (options.peaked)
    for (int t = 0; t < T; ++t) make_peak(c, t, q_logical);
  run_reference(c);
  return c;
}

size_t out_data_bytes(const StepCase& c) {
  if (c.shape.out_layout == kOutMxfp8Ofused) return mx_data_bytes(c.n_total, c.n_groups_alloc);
  return size_t(c.shape.tokens) * c.shape.heads * kHeadDim * 2;
}

size_t out_scale_bytes(const StepCase& c) {
  return c.shape.out_layout == kOutMxfp8Ofused ? mx_scale_bytes(c.n_total, c.n_groups_alloc) : 0;
}

ExpectedOutput expected_output(const StepCase& c, uint8_t poison) {
  ExpectedOutput e;
  e.data.assign(out_data_bytes(c), poison);
  e.scale.assign(out_scale_bytes(c), poison);
  if (c.shape.out_layout == kOutMxfp8Ofused) {
    encode_mxfp8_output(c.shape.tokens, c.shape.heads, c.n_groups_alloc, c.n_total, c.ref_out.data(),
                        e.data.data(), e.scale.data());
  } else {
    std::vector<uint16_t> o(c.ref_out.size());
    encode_bf16_output(c.shape.tokens, c.shape.heads, c.ref_out.data(), o.data());
    std::memcpy(e.data.data(), o.data(), o.size() * 2);  // host is little-endian, as the GPU
  }
  return e;
}

}  // namespace swapjit::ref

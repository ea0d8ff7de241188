// gpu_harness_cases.cpp: the case lists of `swapjit check` and the GPU tests (SPEC.md §4 coverage), and the
// kv_insert check against the host encoder (SPEC.md §2.3). Declared in gpu_harness.hpp.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "jit/compile_key.hpp"
#include "reference/numerics.hpp"
#include "runtime/driver.hpp"
#include "tools/gpu_harness.hpp"

namespace swapjit::harness {
namespace {

// The three record pairings that exist in practice (SPEC.md §2.2): SWA format, compressed format.
constexpr int kPairSwa[3] = {kFormatV41Fp8, kFormatV41Fp8, kFormatV4Fp8};
constexpr int kPairComp[3] = {kFormatV41Fp8, kFormatV41Fp4, kFormatV4Fp8};

std::string case_name(const ref::CaseShape& s) {
  std::string n = "h" + std::to_string(s.heads) + " T" + std::to_string(s.tokens) + " w" +
                  std::to_string(s.window) + " k" + std::to_string(s.topk) + " " + format_name(s.swa_format);
  if (s.topk) n += std::string("/") + format_name(s.comp_format);
  n += " p" + std::to_string(s.swa_page);
  if (s.topk) n += "/" + std::to_string(s.comp_page);
  n += std::string(" ") + q_layout_name(s.q_layout) + "->" + out_layout_name(s.out_layout);
  return n;
}

ref::CaseShape shape(int heads, int tokens, int topk, int pair, int swa_page, int comp_page, int q_layout,
                     int out_layout) {
  ref::CaseShape s;
  s.heads = heads;
  s.tokens = tokens;
  s.window = 128;
  s.topk = topk;
  s.swa_format = kPairSwa[pair];
  s.comp_format = topk ? kPairComp[pair] : kFormatNone;
  s.swa_page = swa_page;
  s.comp_page = topk ? comp_page : 0;
  s.q_layout = q_layout;
  s.out_layout = out_layout;
  s.q_h_pad = heads > 64 ? 128 : 64;
  return s;
}

CheckCase make(const std::string& tag, const ref::CaseShape& s, const ref::CaseOptions& o, bool det) {
  CheckCase c;
  c.shape = s;
  c.options = o;
  c.determinism = det;
  c.name = tag + " " + case_name(s);
  return c;
}

}  // namespace

std::vector<CheckCase> check_case_list() {
  std::vector<CheckCase> out;
  constexpr int kTokens[4] = {1, 2, 5, 16};
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // 24 compressed-layer cases (V4.1-Flash shapes: window 128, topk 512). Each knob cycles with its own
  // period so that every value of every knob appears and the knobs are not locked to each other.
  for (int i = 0; i < 24; ++i) {
    int pair = i % 3;
    int heads = (i / 3) % 2 ? 32 : 16;
    int comp_page = (i / 6) % 2 ? 128 : 64;
    int q_layout = (i / 12) % 2 ? kQLayoutPlain : kQLayoutChunk16;
    int out_layout = (i + i / 4) % 2 ? kOutBf16 : kOutMxfp8Ofused;
    ref::CaseOptions o;
    o.full_lengths = i % 5 == 0;
    o.extra_page_bytes = (i / 2) % 3 == 1 ? 80 : 0;  // page_stride > P * (D + S)
    o.empty_token = i % 4 == 3;
    switch ((i / 4) % 4) {
      case 0: o.sink_value = 0.5f; break;   // typical
      case 1: o.sink_value = -kInf; break;  // no effect
      case 2: o.sink_value = 12.0f; break;  // large: dominates the denominator
      default: o.no_sink = true; break;
    }
    o.position_mode = (i / 3) % 3;  // random, zero, near the table end
    o.peaked = i % 5 == 2;
    if (i % 7 == 4) o.q_scale = 0.05f;  // a flat softmax
    out.push_back(make("c" + std::to_string(i),
                       shape(heads, kTokens[i % 4], 512, pair, 64, comp_page, q_layout, out_layout), o,
                       i % 6 == 0));
  }
  // SWA-only layers (compress ratio 0).
  {
    ref::CaseOptions o;
    out.push_back(make("swa0", shape(16, 1, 0, 0, 64, 0, kQLayoutChunk16, kOutMxfp8Ofused), o, true));
    o.empty_token = true;
    o.position_mode = 2;
    out.push_back(make("swa1", shape(32, 5, 0, 2, 64, 0, kQLayoutChunk16, kOutBf16), o, false));
    o = {};
    o.full_lengths = true;
    o.extra_page_bytes = 32;
    out.push_back(make("swa2", shape(16, 16, 0, 2, 128, 0, kQLayoutPlain, kOutMxfp8Ofused), o, false));
    // Past the four-way cap (16): 32 heads on two clusters of the 16-head key (T = 17..33), and 16 heads past
    // the two-way cap (33) on one cluster of its own key: since session 22 the only steps that launch the
    // 16-head SWA-only key.
    o = {};
    out.push_back(make("swa3", shape(32, 20, 0, 0, 64, 0, kQLayoutChunk16, kOutMxfp8Ofused), o, false));
    o.full_lengths = true;
    out.push_back(make("swa4", shape(16, 36, 0, 0, 64, 0, kQLayoutPlain, kOutBf16), o, false));
  }
  // Swap-AB up to the shipped token cap (T = 32, 64: more clusters than are resident at once); the
  // head-padded kernel runs them too.
  {
    ref::CaseOptions o;
    out.push_back(make("sw0", shape(16, 32, 512, 1, 64, 64, kQLayoutChunk16, kOutMxfp8Ofused), o, true));
    o.full_lengths = true;
    out.push_back(make("sw1", shape(32, 64, 512, 2, 64, 128, kQLayoutPlain, kOutBf16), o, false));
  }
  // Swap-AB's mid shape (T past the wide shape's reach, within the mid one's: 8 CTAs of 96-slot tiles).
  {
    ref::CaseOptions o;
    out.push_back(make("sw2", shape(16, 12, 512, 1, 64, 64, kQLayoutChunk16, kOutMxfp8Ofused), o, false));
    o.full_lengths = true;
    out.push_back(make("sw3", shape(32, 8, 512, 2, 64, 128, kQLayoutPlain, kOutBf16), o, false));
  }
  // The measured extra split points (default_swapab_split_also_at, split4_also_at): 16 heads at T = 8 on two
  // clusters a token and 32 heads at T = 4 on four, 16 clusters of the 8-head key in the portable shape; and
  // the 16-head cap's last step (T = 4 on two: 8 clusters of the 8-head key in the balanced mid shape).
  {
    ref::CaseOptions o;
    out.push_back(make("sp0", shape(16, 8, 512, 0, 64, 128, kQLayoutPlain, kOutMxfp8Ofused), o, true));
    out.push_back(make("sp2", shape(16, 4, 512, 2, 64, 64, kQLayoutChunk16, kOutBf16), o, false));
    o.full_lengths = true;
    o.sink_value = 12.0f;
    out.push_back(make("sp1", shape(32, 4, 512, 1, 64, 64, kQLayoutChunk16, kOutBf16), o, false));
  }
  // 8-head layers (V4-Flash at TP8), swap-AB since session 13: one cluster a token (no split below 8 heads),
  // in its wide, mid and portable shapes and past one wave; SWA-only.
  {
    ref::CaseOptions o;
    out.push_back(make("h8a", shape(8, 1, 512, 0, 64, 64, kQLayoutChunk16, kOutMxfp8Ofused), o, true));
    o.sink_value = 12.0f;
    out.push_back(make("h8b", shape(8, 12, 512, 1, 64, 128, kQLayoutPlain, kOutBf16), o, false));
    o = {};
    o.full_lengths = true;
    out.push_back(make("h8c", shape(8, 40, 512, 2, 64, 64, kQLayoutChunk16, kOutBf16), o, false));
    o = {};
    o.empty_token = true;
    out.push_back(make("h8d", shape(8, 5, 0, 0, 64, 0, kQLayoutChunk16, kOutMxfp8Ofused), o, false));
  }
  // Head-padded only: more heads, more tokens, topk 1024 (a 10-CTA token), 32-slot pages.
  {
    ref::CaseOptions o;
    out.push_back(make("hp0", shape(64, 32, 512, 2, 64, 64, kQLayoutChunk16, kOutMxfp8Ofused), o, true));
    o.peaked = true;
    out.push_back(make("hp1", shape(128, 5, 1024, 2, 64, 64, kQLayoutChunk16, kOutMxfp8Ofused), o, false));
    o = {};
    o.empty_token = true;
    o.extra_page_bytes = 48;
    out.push_back(make("hp2", shape(64, 64, 512, 1, 64, 128, kQLayoutPlain, kOutBf16), o, false));
    o = {};
    o.position_mode = 2;
    out.push_back(make("hp3", shape(16, 32, 512, 0, 32, 32, kQLayoutChunk16, kOutBf16), o, false));
    o = {};
    o.sink_value = 12.0f;
    out.push_back(make("hp4", shape(32, 2, 1024, 2, 64, 64, kQLayoutPlain, kOutBf16), o, false));
    o = {};
    o.full_lengths = true;
    out.push_back(make("hp5", shape(128, 16, 1024, 0, 32, 64, kQLayoutChunk16, kOutBf16), o, false));
    // SWA-only at 64 and 128 heads: two one-chunk CTAs per M tile and their push merge (session 10).
    o = {};
    out.push_back(make("hp6", shape(128, 3, 0, 1, 64, 0, kQLayoutPlain, kOutBf16), o, false));
    out.push_back(make("hp7", shape(64, 2, 0, 2, 32, 0, kQLayoutChunk16, kOutMxfp8Ofused), o, false));
    // The head split of 64- and 128-head layers (default_headpad_head_groups, session 22): 64 heads at T = 1 on
    // four clusters of the 16-head key, 128 heads at T = 8 on two of the 64-head key (with sinks: the sink is
    // indexed by the layer's head). hp6, hp7, qs1 and hp1 run split too (four, four, two, two).
    o = {};
    o.sink_value = 12.0f;
    out.push_back(make("hp8", shape(64, 1, 512, 2, 64, 64, kQLayoutChunk16, kOutMxfp8Ofused), o, false));
    o.full_lengths = true;
    out.push_back(make("hp9", shape(128, 8, 512, 0, 64, 64, kQLayoutPlain, kOutBf16), o, false));
  }
  // Q with an odd token stride: every odd token's 8-dim chunks are not 16-byte aligned, so both kernels take
  // their scalar Q path there (the head-padded kernel decides once per CTA: session 11).
  {
    ref::CaseOptions o;
    o.q_stride_extra = 1;
    out.push_back(make("qs0", shape(32, 3, 512, 0, 64, 64, kQLayoutPlain, kOutBf16), o, false));
    o.q_stride_extra = 5;
    out.push_back(make("qs1", shape(64, 2, 512, 1, 64, 64, kQLayoutChunk16, kOutMxfp8Ofused), o, false));
  }
  return out;
}

std::vector<CheckCase> small_case_list() {
  std::vector<CheckCase> out;
  ref::CaseOptions o;
  out.push_back(make("s0", shape(16, 1, 512, 0, 64, 64, kQLayoutPlain, kOutBf16), o, true));
  o.empty_token = true;
  out.push_back(make("s1", shape(32, 5, 512, 1, 64, 128, kQLayoutChunk16, kOutMxfp8Ofused), o, false));
  o = {};
  o.sink_value = -std::numeric_limits<float>::infinity();
  out.push_back(make("s2", shape(16, 2, 0, 2, 64, 0, kQLayoutChunk16, kOutBf16), o, false));
  o = {};
  out.push_back(make("s3", shape(64, 20, 512, 2, 64, 64, kQLayoutChunk16, kOutMxfp8Ofused), o, false));
  return out;
}

// ---------------- kv_insert ----------------

InsertCheck check_insert(LayerPool& pool, int format, int page, bool with_positions, uint64_t seed,
                         CUstream s) {
  InsertCheck r;
  r.name = std::string("insert ") + format_name(format) + " p" + std::to_string(page) +
           (with_positions ? " rope" : " no-rope");
  LayerConfig lc;
  lc.live_heads = 16;
  lc.window = 128;
  lc.topk = 0;
  lc.swa_format = format;
  lc.comp_format = kFormatNone;
  lc.swa_page = page;
  lc.comp_page = 0;
  lc.q_layout = kQLayoutPlain;
  lc.out_layout = kOutBf16;
  DecodeAttention& layer = pool.get(lc);

  std::mt19937_64 rng(seed);
  constexpr int kPages = 6, kRows = 37, kMaxPos = 4096;
  constexpr int64_t kRowStride = kHeadDim + 24;  // elements; not the tight 512, to check the stride
  constexpr uint8_t kPoison = 0xA5;
  ref::PagedCache host = ref::PagedCache::make(format, page, kPages, /*extra_page_bytes=*/32);
  std::fill(host.bytes.begin(), host.bytes.end(), kPoison);

  // Rows: N(0, sigma) with a per-row sigma over six decades, so scales span the formats' range; one row
  // has an all-zero tile (the 1e-4 / 2^-9 scale floors).
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<uint16_t> rows(size_t(kRows) * kRowStride, 0);
  for (int r0 = 0; r0 < kRows; ++r0) {
    float sigma = std::pow(10.f, float(int(rng() % 7)) - 4.f);
    for (int d = 0; d < kHeadDim; ++d) {
      float x = (r0 == 3 && d < 64) ? 0.f : normal(rng) * sigma;
      rows[size_t(r0) * kRowStride + d] = ref::bf16_from_float(x);
    }
  }
  // Distinct slots (a permutation prefix); every 7th row is skipped with -1.
  std::vector<int64_t> perm(size_t(host.slots()));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int64_t> slots(kRows), positions(kRows);
  for (int r0 = 0; r0 < kRows; ++r0) {
    slots[r0] = r0 % 7 == 5 ? -1 : perm[r0];
    positions[r0] = r0 == 0 ? 0 : r0 == 1 ? kMaxPos - 1 : int64_t(rng() % kMaxPos);
  }
  std::vector<float> cos_sin(size_t(kMaxPos) * 64);
  for (int p = 0; p < kMaxPos; ++p)
    for (int i = 0; i < kRopePairs; ++i) {
      double angle = p * std::pow(10000.0, -2.0 * i / kRopeDims);
      cos_sin[size_t(p) * 64 + i] = float(std::cos(angle));
      cos_sin[size_t(p) * 64 + 32 + i] = float(std::sin(angle));
    }

  // Host expectation: SPEC.md §3.2 step 2 (fp32 fma, bf16 RN) when positions are given, then §2.3.
  for (int r0 = 0; r0 < kRows; ++r0) {
    if (slots[r0] < 0) continue;
    float x[kHeadDim];
    for (int d = 0; d < kHeadDim; ++d) x[d] = ref::bf16_to_float(rows[size_t(r0) * kRowStride + d]);
    if (with_positions) ref::rope_q_row(&cos_sin[size_t(positions[r0]) * 64], x);  // same rounding as Q
    host.write_row(slots[r0], x);
  }

  DeviceBuffer d_rows(rows.size() * 2), d_slots(slots.size() * 8), d_pos(positions.size() * 8),
      d_cs(cos_sin.size() * 4), d_cache(host.bytes.size());
  d_rows.upload_vec(rows);
  d_slots.upload_vec(slots);
  d_pos.upload_vec(positions);
  d_cs.upload_vec(cos_sin);
  d_cache.fill(kPoison);

  InsertStep st;
  st.num_rows = kRows;
  st.rows = d_rows.ptr();
  st.row_stride = kRowStride;
  st.slots = static_cast<const int64_t*>(d_slots.ptr());
  st.positions = with_positions ? static_cast<const int64_t*>(d_pos.ptr()) : nullptr;
  st.cos_sin = static_cast<const float*>(d_cs.ptr());
  st.max_pos = kMaxPos;
  st.cache = CacheRef{d_cache.ptr(), host.page_stride, host.pages};
  layer.insert(st, /*swa=*/true, s);
  SWAPJIT_CU(driver().cuStreamSynchronize(s));
  std::vector<uint8_t> got = d_cache.download_all();

  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == host.bytes[i]) continue;
    if (r.mismatched_bytes++ < 4) {
      int64_t pg = int64_t(i) / host.page_stride, off = int64_t(i) % host.page_stride;
      r.detail += "byte " + std::to_string(i) + " (page " + std::to_string(pg) + " +" + std::to_string(off) +
                  "): got " + std::to_string(got[i]) + " want " + std::to_string(host.bytes[i]) + "; ";
    }
  }
  r.pass = r.mismatched_bytes == 0;
  return r;
}

}  // namespace swapjit::harness

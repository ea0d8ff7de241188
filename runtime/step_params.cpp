// step_params.cpp: SPEC.md §3.1's shape rules, checked on the host before every launch.
#include "runtime/step_params.hpp"

#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "jit/error.hpp"

namespace swapjit {
namespace {

// Only the failure path formats (and so allocates).
[[noreturn]] void bad_step(const char* what, const char* field, const std::string& detail, const std::string& key_json) {
  throw Error(ErrorCode::kInvalidArgument, fmt::format("{}.{}: {}", what, field, detail), key_json);
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

void check_cache(const char* what, const char* field, const CacheRef& c, int format, int page,
                 const std::string& key_json) {
  const long long min_stride = static_cast<long long>(page) * record_bytes(format);
  if (!c.base) bad_step(what, field, "base is null", key_json);
  if (!aligned16(c.base)) bad_step(what, field, fmt::format("base {} is not 16-byte aligned", c.base), key_json);
  if (c.page_stride < min_stride)
    bad_step(what, field, fmt::format("page_stride {} < P * (D + S) = {} * {} = {}", c.page_stride, page,
                                      record_bytes(format), min_stride), key_json);
  if (c.page_stride % 16 != 0)
    bad_step(what, field, fmt::format("page_stride {} is not a multiple of 16", c.page_stride), key_json);
  if (c.pages < 1) bad_step(what, field, fmt::format("pages {} < 1", c.pages), key_json);
}

}  // namespace

void check_decode_step(const LayerConfig& L, const DecodeStep& s, const std::string& key_json) {
  const char* w = "DecodeStep";
  const int heads = L.live_heads;
  if (s.num_tokens < 1) bad_step(w, "num_tokens", fmt::format("{} < 1", s.num_tokens), key_json);
  if (!s.q) bad_step(w, "q", "null", key_json);
  if (L.q_layout == kQLayoutChunk16) {
    if (s.q_h_pad < heads) bad_step(w, "q_h_pad", fmt::format("{} < the layer's {} live heads", s.q_h_pad, heads), key_json);
    if (s.q_token_stride < static_cast<int64_t>(s.q_h_pad) * kHeadDim)
      bad_step(w, "q_token_stride", fmt::format("{} < q_h_pad * 512 = {}", s.q_token_stride, s.q_h_pad * kHeadDim), key_json);
  } else if (s.q_token_stride < static_cast<int64_t>(heads) * kHeadDim) {
    bad_step(w, "q_token_stride", fmt::format("{} < heads * 512 = {}", s.q_token_stride, heads * kHeadDim), key_json);
  }
  if (!s.positions) bad_step(w, "positions", "null", key_json);
  if (!s.cos_sin) bad_step(w, "cos_sin", "null", key_json);
  if (s.max_pos < 1) bad_step(w, "max_pos", fmt::format("{} < 1", s.max_pos), key_json);
  if (!s.swa_slots) bad_step(w, "swa_slots", "null", key_json);
  if (!s.swa_lens) bad_step(w, "swa_lens", "null", key_json);
  // NOTE: a list narrower than the window is legal (the head-padded kernel takes it); wider never is: the
  // key's window bounds the SWA tiles of both kernels.
  if (s.swa_width < 1 || s.swa_width > L.window)
    bad_step(w, "swa_width", fmt::format("{} is not in 1..window ({})", s.swa_width, L.window), key_json);
  check_cache(w, "swa_cache", s.swa_cache, L.swa_format, L.swa_page, key_json);
  if (L.topk > 0) {
    if (!s.comp_slots) bad_step(w, "comp_slots", fmt::format("null on a compressed layer (topk {})", L.topk), key_json);
    if (!s.comp_lens) bad_step(w, "comp_lens", fmt::format("null on a compressed layer (topk {})", L.topk), key_json);
    if (s.comp_width < 1 || s.comp_width > L.topk)
      bad_step(w, "comp_width", fmt::format("{} is not in 1..topk ({})", s.comp_width, L.topk), key_json);
    check_cache(w, "comp_cache", s.comp_cache, L.comp_format, L.comp_page, key_json);
  } else {
    if (s.comp_slots || s.comp_lens) bad_step(w, "comp_slots", "set on an SWA-only layer (topk 0)", key_json);
    if (s.comp_width != 0) bad_step(w, "comp_width", fmt::format("{} on an SWA-only layer (topk 0)", s.comp_width), key_json);
  }
  if (!std::isfinite(s.sm_scale)) bad_step(w, "sm_scale", "not finite", key_json);
  if (L.out_layout == kOutMxfp8Ofused) {
    if (!s.out_data) bad_step(w, "out_data", "null (out_layout mxfp8_ofused)", key_json);
    if (!s.out_scale) bad_step(w, "out_scale", "null (out_layout mxfp8_ofused)", key_json);
    if (s.num_tokens > s.n_total)
      bad_step(w, "n_total", fmt::format("{} < num_tokens {} (num_tokens must be in 1..n_total)", s.n_total, s.num_tokens), key_json);
    if (s.n_groups_alloc < heads / kHeadsPerGroup)
      bad_step(w, "n_groups_alloc", fmt::format("{} < live heads / 8 = {}", s.n_groups_alloc, heads / kHeadsPerGroup), key_json);
  } else {
    if (!s.out_bf16) bad_step(w, "out_bf16", "null (out_layout bf16)", key_json);
    if (s.out_token_stride < static_cast<int64_t>(heads) * kHeadDim)
      bad_step(w, "out_token_stride", fmt::format("{} < heads * 512 = {}", s.out_token_stride, heads * kHeadDim), key_json);
  }
}

void check_insert_step(const InsertStep& s, int format, int page, const std::string& key_json) {
  const char* w = "InsertStep";
  if (s.num_rows < 0) bad_step(w, "num_rows", fmt::format("{} < 0", s.num_rows), key_json);
  if (!s.rows) bad_step(w, "rows", "null", key_json);
  if (s.row_stride < kHeadDim) bad_step(w, "row_stride", fmt::format("{} < 512", s.row_stride), key_json);
  if (!s.slots) bad_step(w, "slots", "null", key_json);
  if (s.positions) {
    if (!s.cos_sin) bad_step(w, "cos_sin", "null while positions is set (RoPE at insert)", key_json);
    if (s.max_pos < 1) bad_step(w, "max_pos", fmt::format("{} < 1 while positions is set", s.max_pos), key_json);
  }
  check_cache(w, "cache", s.cache, format, page, key_json);
}

DecodeParams make_decode_params(const DecodeStep& s) {
  DecodeParams p{};
  p.num_tokens = s.num_tokens;
  p.q = static_cast<const u16*>(s.q);
  p.q_token_stride = s.q_token_stride;
  p.q_h_pad = s.q_h_pad;
  p.positions = s.positions;
  p.cos_sin = s.cos_sin;
  p.max_pos = s.max_pos;
  p.swa_slots = s.swa_slots;
  p.swa_lens = s.swa_lens;
  p.swa_width = s.swa_width;
  p.comp_slots = s.comp_slots;
  p.comp_lens = s.comp_lens;
  p.comp_width = s.comp_width;
  p.sink = s.sink;
  p.sm_scale = s.sm_scale;
  p.swa_cache = CacheView{static_cast<const u8*>(s.swa_cache.base), s.swa_cache.page_stride, s.swa_cache.pages};
  p.comp_cache = CacheView{static_cast<const u8*>(s.comp_cache.base), s.comp_cache.page_stride, s.comp_cache.pages};
  p.out_data = static_cast<u8*>(s.out_data);
  p.out_scale = static_cast<i32*>(s.out_scale);
  p.n_groups_alloc = s.n_groups_alloc;
  p.n_total = s.n_total;
  p.out_bf16 = static_cast<u16*>(s.out_bf16);
  p.out_token_stride = s.out_token_stride;
  p.head_groups = 1;  // forward() sets 2 or 4 on a split swap-AB step
  return p;
}

InsertParams make_insert_params(const InsertStep& s) {
  InsertParams p{};
  p.num_rows = s.num_rows;
  p.rows = static_cast<const u16*>(s.rows);
  p.row_stride = s.row_stride;
  p.slots = s.slots;
  p.positions = s.positions;
  p.cos_sin = s.cos_sin;
  p.max_pos = s.max_pos;
  p.cache = CacheView{static_cast<const u8*>(s.cache.base), s.cache.page_stride, s.cache.pages};
  return p;
}

}  // namespace swapjit

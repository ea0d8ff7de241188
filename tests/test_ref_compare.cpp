// test_ref_compare.cpp: make_case (knobs, speed) and the comparator of SPEC.md §4: the reference's own
// expected bytes pass; every kind of corruption is caught and counted where it belongs.
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "reference/layouts.hpp"
#include "reference/numerics.hpp"
#include "reference/step_case.hpp"
#include "tests/catch.hpp"

using namespace swapjit;
using namespace swapjit::ref;

namespace {

CaseShape small_shape(int out_layout, int tokens = 5, int heads = 16) {
  CaseShape s;
  s.tokens = tokens, s.heads = heads, s.window = 128, s.topk = 512;
  s.swa_format = kFormatV41Fp8, s.comp_format = kFormatV41Fp4;
  s.q_layout = kQLayoutChunk16, s.out_layout = out_layout;
  return s;
}

CaseOptions small_options() {
  CaseOptions o;
  o.cache_slots = 1024;
  o.empty_token = true;
  o.extra_page_bytes = 32;
  return o;
}

}  // namespace

TEST_CASE("make_case: shapes, knobs and speed", "[ref][case]") {
  CaseShape s = small_shape(kOutMxfp8Ofused, 16, 32);
  s.swa_format = s.comp_format = kFormatV4Fp8;
  CaseOptions o;
  o.empty_token = true;
  o.minus_one_rate = 0.1;
  o.duplicate_rate = 0.05;
  const auto t0 = std::chrono::steady_clock::now();
  const StepCase c = make_case(s, o);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN("make_case 16 tokens x (128 + 512) x 32 heads: " << sec << " s");
  CHECK(sec < 3.0);  // the target is well under a second; slack for a loaded CI machine
  CHECK(c.n_groups_alloc == 5);
  CHECK(c.n_total == 19);
  CHECK(c.q_token_stride == 64 * 512);
  for (uint16_t v : c.q) REQUIRE((v & 0x7FFF) != 0);  // never zero
  CHECK(c.swa_lens[0] == 0);
  CHECK(c.comp_lens[0] == 0);
  CHECK(c.swa_cache.page_stride == 64 * 584);
  int minus_ones = 0;
  for (int t = 0; t < 16; ++t) {
    REQUIRE((c.swa_lens[t] >= 0 && c.swa_lens[t] <= 128));
    REQUIRE((c.comp_lens[t] >= 0 && c.comp_lens[t] <= 512));
    for (int j = 0; j < c.comp_lens[t]; ++j) minus_ones += c.comp_slots[t * 512 + j] < 0;
  }
  CHECK(minus_ones > 0);
  for (int i = 0; i < 32 * 512; ++i) REQUIRE(c.ref_out[i] == 0.0);  // token 0 is empty
  double norm = 0;
  for (double v : c.ref_out) {
    REQUIRE(std::isfinite(v));
    norm += v * v;
  }
  CHECK(norm > 0);
}

TEST_CASE("make_case: peaked softmax puts nearly all weight on one key", "[ref][case]") {
  CaseShape s = small_shape(kOutBf16, 4, 16);
  CaseOptions o;
  o.cache_slots = 1024;
  o.peaked = true;
  o.full_lengths = true;
  o.minus_one_rate = 0;
  const StepCase c = make_case(s, o);
  int good = 0, total = 0;
  for (int t = 0; t < 4; ++t) {
    // The peak is the first used SWA entry; compare each head's output with its value row.
    const int slot = c.swa_slots[t * 128];
    REQUIRE(slot >= 0);
    std::vector<float> row(512);
    c.swa_cache.read_row(slot, row.data());
    std::vector<double> v(row.begin(), row.end());
    inverse_rope_row(c.cos_sin.data() + c.positions[t] * 64, v.data());
    for (int h = 0; h < 16; ++h) {
      const double* o2 = c.ref_out.data() + (t * 16 + h) * 512;
      double dot = 0, n1 = 0, n2 = 0;
      for (int d = 0; d < 512; ++d) dot += o2[d] * v[d], n1 += o2[d] * o2[d], n2 += v[d] * v[d];
      good += dot / std::sqrt(n1 * n2) > 0.999;
      ++total;
    }
  }
  CHECK(good >= total * 9 / 10);
}

TEST_CASE("comparator: expected bytes pass, for both output layouts", "[ref][compare]") {
  for (int layout : {kOutBf16, kOutMxfp8Ofused}) {
    const StepCase c = make_case(small_shape(layout), small_options());
    const ExpectedOutput e = expected_output(c, 0xAB);
    const CompareResult r = compare_output(c, e.data, e.scale, 0xAB);
    INFO(r.detail);
    CHECK(r.pass);
    CHECK(r.poison_violations == 0);
    CHECK(r.unwritten == 0);
    CHECK(r.rel_err <= r.bound);
  }
}

TEST_CASE("comparator: bf16 errors, NaN and unwritten rows fail", "[ref][compare]") {
  const StepCase c = make_case(small_shape(kOutBf16), small_options());
  const ExpectedOutput e = expected_output(c, 0xAB);
  auto scaled = [&](double f) {
    std::vector<uint8_t> d = e.data;
    std::vector<uint16_t> o(d.size() / 2);
    std::memcpy(o.data(), d.data(), d.size());
    for (int i = 512 * 20; i < 512 * 21; ++i)
      o[i] = bf16_from_float(bf16_to_float(o[i]) * float(f));  // token 1 head 4
    std::memcpy(d.data(), o.data(), d.size());
    return compare_output(c, d, e.scale, 0xAB);
  };
  CHECK(scaled(1.002).pass);
  const CompareResult bad = scaled(1.02);
  CHECK_FALSE(bad.pass);
  CHECK(bad.rel_err > 5e-3);
  CHECK(bad.max_abs_err > 0);
  std::vector<uint8_t> d = e.data;
  d[2 * (512 * 20 + 7) + 1] = 0x7F, d[2 * (512 * 20 + 7)] = 0xC0;  // a NaN
  const CompareResult nan = compare_output(c, d, e.scale, 0xAB);
  CHECK_FALSE(nan.pass);
  CHECK(nan.nan_count == 1);
  d = e.data;
  std::memset(d.data() + 1024 * 21, 0xAB, 1024);  // one head row never written
  const CompareResult unw = compare_output(c, d, e.scale, 0xAB);
  CHECK_FALSE(unw.pass);
  CHECK(unw.unwritten == 1024);
  d.pop_back();
  CHECK_FALSE(compare_output(c, d, e.scale, 0xAB).pass);  // wrong size
}

TEST_CASE("comparator: mxfp8 poison, scale bytes and elements", "[ref][compare]") {
  const StepCase c = make_case(small_shape(kOutMxfp8Ofused), small_options());  // 5 tokens, 16 heads
  const ExpectedOutput e = expected_output(c, 0xAB);
  const int nt = c.n_total, ng = c.n_groups_alloc;
  REQUIRE(nt == 8);
  REQUIRE(ng == 3);
  auto run = [&](auto mutate) {
    std::vector<uint8_t> d = e.data, s = e.scale;
    mutate(d, s);
    return compare_output(c, d, s, 0xAB);
  };
  // Padding group 2 of token 1, and row 6 (>= T) of group 0: must keep the poison.
  auto r1 = run([&](auto& d, auto&) { d[(1 * ng + 2) * 4096 + 17] = 0; });
  CHECK_FALSE(r1.pass);
  CHECK(r1.poison_violations == 1);
  auto r2 = run([&](auto& d, auto&) { d[(6 * ng + 0) * 4096] = 0; });
  CHECK(r2.poison_violations == 1);
  // The unused bytes of the scale ints: row t = 5 (T) of group 0, and group 2 (padding).
  auto r3 = run([&](auto&, auto& s) {
    s[4 * 5] = 105;
    s[4 * (2 * 32 * 8)] = 105;
  });
  CHECK(r3.poison_violations == 2);
  // A live data block left at the poison, and a live scale byte left at the poison.
  auto r4 = run([&](auto& d, auto&) { std::memset(d.data() + (2 * ng + 1) * 4096 + 256, 0xAB, 32); });
  CHECK(r4.unwritten == 32);
  const int64_t so = mx_scale_offset(nt, 3, 9, 4);
  auto r5 = run([&](auto&, auto& s) { s[so] = 0xAB; });
  CHECK_FALSE(r5.pass);
  CHECK(r5.unwritten == 1);
  // A scale byte three too high: a mismatch (whatever the block's amax).
  auto r6 = run([&](auto&, auto& s) { s[so] = uint8_t(s[so] + 3); });
  CHECK(r6.scale_mismatches == 1);
  CHECK_FALSE(r6.pass);
  // The largest element of a block with its sign flipped: off by 2 |ref|.
  int dmax = 96;
  for (int d = 96; d < 128; ++d)
    if (std::fabs(c.ref_out[(2 * 16 + 3) * 512 + d]) > std::fabs(c.ref_out[(2 * 16 + 3) * 512 + dmax]))
      dmax = d;
  auto r7 = run([&](auto& d, auto&) { d[mx_data_offset(ng, 2, 3, dmax)] ^= 0x80; });
  CHECK(r7.element_violations == 1);
  CHECK_FALSE(r7.pass);
  // An element turned NaN.
  auto r8 = run([&](auto& d, auto&) { d[mx_data_offset(ng, 1, 0, 0)] = 0x7F; });
  CHECK(r8.nan_count == 1);
  CHECK_FALSE(r8.pass);
  // Empty token 0: a kernel that writes scale 105 and zeros passes; one that leaves 106 fails.
  auto r9 = run([&](auto&, auto& s) { s[mx_scale_offset(nt, 0, 0, 0)] = 106; });
  CHECK(r9.scale_mismatches == 1);
}

TEST_CASE("comparator: a scale byte one off is legal only near a power of two", "[ref][compare]") {
  // A hand-made case (the comparator reads only shape, n_total, n_groups_alloc and ref_out).
  StepCase c;
  c.shape.tokens = 1, c.shape.heads = 8, c.shape.out_layout = kOutMxfp8Ofused;
  c.n_groups_alloc = c.shape.n_groups_alloc = 1;
  c.n_total = c.shape.n_total = 1;  // N4 = 4
  c.ref_out.assign(8 * 512, 0.01);
  // Head 0, block 0: amax = 14 * (1 + 2^-10), amax / 448 = 2^-5 * (1 + 2^-10): e = -4, byte 123, but
  // within 2^-8 of 2^-5, so 122 is legal. Block 1: amax 14 * 1.1, far from the boundary: 122 is not.
  c.ref_out[0] = 14.0 * (1 + std::ldexp(1.0, -10));
  c.ref_out[32] = 14.0 * 1.1;
  const ExpectedOutput e = expected_output(c, 0xAB);
  const int64_t s0 = mx_scale_offset(1, 0, 0, 0), s1 = mx_scale_offset(1, 0, 0, 1);
  REQUIRE(int(e.scale[s0]) == 123);
  REQUIRE(int(e.scale[s1]) == 123);
  CHECK(compare_output(c, e.data, e.scale, 0xAB).pass);
  // A kernel that chose scale 2^-5 for a block: elements re-encoded at that scale (448 saturates).
  auto with_scale_122 = [&](int kb) {
    std::vector<uint8_t> d = e.data, s = e.scale;
    s[mx_scale_offset(1, 0, 0, kb)] = 122;
    for (int i = 0; i < 32; ++i)
      d[mx_data_offset(1, 0, 0, kb * 32 + i)] = e4m3_from_double(c.ref_out[kb * 32 + i] * 32);
    return compare_output(c, d, s, 0xAB);
  };
  const CompareResult near = with_scale_122(0);
  INFO(near.detail);
  CHECK(near.pass);
  CHECK(near.scale_mismatches == 0);
  const CompareResult far = with_scale_122(1);
  CHECK_FALSE(far.pass);
  CHECK(far.scale_mismatches == 1);
}

TEST_CASE("make_case: every pairing and knob yields a case its own expected bytes pass", "[ref][case]") {
  struct Combo {
    int swa, comp, topk, swa_page, comp_page, q_layout, out_layout, pos_mode;
    float sink;
    bool no_sink;
  };
  const Combo combos[] = {
      {kFormatV41Fp8, kFormatV41Fp8, 512, 64, 64, kQLayoutPlain, kOutBf16, 1, -INFINITY, false},
      {kFormatV41Fp8, kFormatV41Fp4, 512, 64, 128, kQLayoutChunk16, kOutMxfp8Ofused, 2, 30.0f, false},
      {kFormatV4Fp8, kFormatV4Fp8, 1024, 64, 64, kQLayoutChunk16, kOutMxfp8Ofused, 0, 0.5f, true},
      {kFormatV41Fp8, kFormatNone, 0, 32, 0, kQLayoutPlain, kOutMxfp8Ofused, 0, 0.5f, false},  // SWA-only
  };
  uint64_t seed = 100;
  for (const Combo& k : combos) {
    CaseShape s;
    s.tokens = 2, s.heads = 16, s.window = 128, s.topk = k.topk;
    s.swa_format = k.swa, s.comp_format = k.comp, s.swa_page = k.swa_page, s.comp_page = k.comp_page;
    s.q_layout = k.q_layout, s.out_layout = k.out_layout;
    CaseOptions o;
    o.seed = ++seed;
    o.cache_slots = 700;  // not a whole number of pages: rounded up
    o.extra_page_bytes = 16;
    o.position_mode = k.pos_mode;
    o.sink_value = k.sink;
    o.no_sink = k.no_sink;
    o.full_lengths = true;
    const StepCase c = make_case(s, o);
    INFO("swa " << k.swa << " comp " << k.comp << " topk " << k.topk);
    CHECK(c.swa_cache.slots() % k.swa_page == 0);
    CHECK(c.swa_cache.slots() >= 700);
    CHECK(c.sink.empty() == k.no_sink);
    CHECK(c.comp_slots.size() == size_t(2 * k.topk));
    if (k.pos_mode == 1) CHECK(c.positions[1] == 0);
    if (k.pos_mode == 2) CHECK(c.positions[0] == o.max_pos - 1);
    const ExpectedOutput e = expected_output(c, 0x5A);
    const CompareResult r = compare_output(c, e.data, e.scale, 0x5A);
    INFO(r.detail);
    CHECK(r.pass);
    for (double v : c.ref_out) REQUIRE(std::isfinite(v));
  }
}

// test_reference.cpp: the fp64 reference (known answers worked out by hand) and bad inputs.
// The comparator and make_case are in test_ref_compare.cpp.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "jit/error.hpp"
#include "reference/layouts.hpp"
#include "reference/numerics.hpp"
#include "reference/step_case.hpp"
#include "tests/catch.hpp"

using namespace swapjit;
using namespace swapjit::ref;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A hand-made case: 1 token, 8 heads, window 4, v41_fp8 SWA cache of one 64-slot page (and, with topk,
// a v41_fp4 compressed cache), position 1 whose table row is cos 0, sin 1 (a quarter turn, exact).
// Head h's q: q[0] = 2, q[1] = h / 4, q[448] = 1, q[449] = 0.5. RoPE at the quarter turn: y0 = -x1,
//   y1 = x0, so q'[448] = -0.5, q'[449] = 1.
// Key A (slot 0): k[0] = 1.5, k[448] = 0.75, k[449] = -0.375
//   -> z_A = sm * (2 * 1.5 - 0.5 * 0.75 + 1 * -0.375) = 2.25 sm
// Key B (slot 1): k[1] = 1.5                                 -> z_B(h) = sm * (h / 4 * 1.5) = 0.375 h sm
// All values are exact in v41_fp8 and v41_fp4 (tile amax 1.5 or 0.75: amax / 6 is a power of two).
// Values after inverse RoPE (y0 = x1, y1 = -x0 at the quarter turn): A: o[0] = 1.5, o[448] = -0.375,
// o[449] = -0.75; B: o[1] = 1.5.
StepCase hand_case(int topk = 0) {
  StepCase c;
  CaseShape& s = c.shape;
  s.tokens = 1, s.heads = 8, s.window = 4, s.topk = topk;
  s.swa_format = kFormatV41Fp8, s.comp_format = topk ? kFormatV41Fp4 : kFormatNone;
  s.swa_page = 64, s.comp_page = topk ? 64 : 0;
  s.q_layout = kQLayoutPlain, s.out_layout = kOutBf16;
  c.n_groups_alloc = s.n_groups_alloc = 2;
  c.n_total = s.n_total = 3;
  c.q_token_stride = 8 * 512;
  c.q.assign(8 * 512, 0);
  for (int h = 0; h < 8; ++h) {
    c.q[h * 512 + 0] = bf16_from_float(2.0f);
    c.q[h * 512 + 1] = bf16_from_float(h / 4.0f);
    c.q[h * 512 + 448] = bf16_from_float(1.0f);
    c.q[h * 512 + 449] = bf16_from_float(0.5f);
  }
  c.positions = {1};
  c.cos_sin.assign(2 * 64, 0.0f);
  for (int i = 0; i < 32; ++i) c.cos_sin[i] = 1.0f, c.cos_sin[64 + 32 + i] = 1.0f;
  c.swa_slots = {-1, -1, -1, -1};
  c.swa_lens = {0};
  c.sm_scale = float(1.0 / std::sqrt(512.0));
  c.swa_cache = PagedCache::make(kFormatV41Fp8, 64, 1);
  std::vector<float> a(512, 0.0f), b(512, 0.0f);
  a[0] = 1.5f, a[448] = 0.75f, a[449] = -0.375f;
  b[1] = 1.5f;
  c.swa_cache.write_row(0, a.data());
  c.swa_cache.write_row(1, b.data());
  if (topk) {
    c.comp_cache = PagedCache::make(kFormatV41Fp4, 64, 1);
    c.comp_cache.write_row(0, a.data());
    c.comp_cache.write_row(1, b.data());
    c.comp_slots.assign(topk, -1);
    c.comp_lens = {0};
  }
  return c;
}

// o = (nA e^zA vA + nB e^zB vB) / (nA e^zA + nB e^zB + e^sink), written out for dims 0, 1, 448, 449.
void check_two_keys(const StepCase& c, int nA, int nB, double sink) {
  const double sm = c.sm_scale;
  for (int h = 0; h < 8; ++h) {
    const double zA = 2.25 * sm, zB = 0.375 * h * sm;
    const double wA = nA * std::exp(zA), wB = nB * std::exp(zB);
    const double den = wA + wB + std::exp(sink);
    const double* o = c.ref_out.data() + h * 512;
    INFO("head " << h);
    CHECK(o[0] == Approx(1.5 * wA / den).epsilon(1e-12));
    CHECK(o[1] == Approx(1.5 * wB / den).epsilon(1e-12).margin(1e-300));
    CHECK(o[448] == Approx(-0.375 * wA / den).epsilon(1e-12));
    CHECK(o[449] == Approx(-0.75 * wA / den).epsilon(1e-12));
    for (int d = 2; d < 512; ++d)
      if (d != 448 && d != 449) REQUIRE(o[d] == 0.0);
  }
}

}  // namespace

TEST_CASE("reference: one used key, with sink -inf, typical, +inf and none", "[ref][reference]") {
  StepCase c = hand_case();
  c.swa_slots = {0, -1, -1, -1};
  c.swa_lens = {1};
  run_reference(c);  // no sink vector: the sink is -inf, the output is the key's value itself
  for (int h = 0; h < 8; ++h) {
    CHECK(c.ref_out[h * 512 + 0] == 1.5);
    CHECK(c.ref_out[h * 512 + 448] == -0.375);
    CHECK(c.ref_out[h * 512 + 449] == -0.75);
  }
  c.sink.assign(8, -INFINITY);
  run_reference(c);
  check_two_keys(c, 1, 0, -kInf);
  // Typical sink: one key gives o = v / (1 + exp(sink - z)); the sink is not scaled by sm_scale.
  c.sink.assign(8, 0.3f);
  run_reference(c);
  const double w = 1.0 / (1.0 + std::exp(double(0.3f) - 2.25 * double(c.sm_scale)));
  CHECK(c.ref_out[0] == Approx(1.5 * w).epsilon(1e-12));
  check_two_keys(c, 1, 0, double(0.3f));
  c.sink.assign(8, INFINITY);
  run_reference(c);
  for (double v : c.ref_out) REQUIRE(v == 0.0);
}

TEST_CASE("reference: -1 inside [0, len), entries past len, duplicates, both lists", "[ref][reference]") {
  StepCase c = hand_case();
  c.sink.assign(8, 0.5f);
  c.swa_slots = {0, -1, 1, -1};
  c.swa_lens = {4};
  run_reference(c);
  check_two_keys(c, 1, 1, double(0.5f));
  c.swa_slots = {0, 1, 0, 0};  // entries 2, 3 are past len: ignored
  c.swa_lens = {2};
  run_reference(c);
  check_two_keys(c, 1, 1, double(0.5f));
  c.swa_slots = {0, 0, 1, -1};  // the duplicate counts twice
  c.swa_lens = {3};
  run_reference(c);
  check_two_keys(c, 2, 1, double(0.5f));
  // One softmax over the union: key A from the SWA list, key B (and a second A) from the compressed list.
  StepCase u = hand_case(4);
  u.sink.assign(8, 0.5f);
  u.swa_slots = {0, -1, -1, -1};
  u.swa_lens = {1};
  u.comp_slots = {1, 0, -1, 1};
  u.comp_lens = {2};
  run_reference(u);
  check_two_keys(u, 2, 1, double(0.5f));
}

TEST_CASE("reference: a token with no used entry is all zeros (mxfp8: scale 105, zero data)",
          "[ref][reference]") {
  StepCase c = hand_case();
  c.swa_slots = {-1, -1, -1, -1};
  c.swa_lens = {4};
  c.sink.assign(8, 0.5f);
  run_reference(c);
  for (double v : c.ref_out) REQUIRE(v == 0.0);
  c.swa_slots = {0, 1, 0, 1};
  c.swa_lens = {0};
  run_reference(c);
  for (double v : c.ref_out) REQUIRE(v == 0.0);
  c.shape.out_layout = kOutMxfp8Ofused;
  const ExpectedOutput e = expected_output(c, 0xAB);
  // Token 0, group 0 is live: 4096 zero data bytes and 128 scale bytes of 105; the rest keeps the poison.
  REQUIRE(e.data.size() == 3u * 2u * 4096u);
  for (size_t i = 0; i < e.data.size(); ++i) REQUIRE(e.data[i] == (i < 4096 ? 0x00 : 0xAB));
  int n105 = 0;
  for (uint8_t b : e.scale) {
    REQUIRE((b == 0xAB || b == 105));
    n105 += b == 105;
  }
  CHECK(n105 == 128);
}

TEST_CASE("reference: chunk16 Q gives the plain-layout answer", "[ref][reference]") {
  StepCase c = hand_case();
  c.swa_slots = {0, 1, -1, -1};
  c.swa_lens = {2};
  run_reference(c);
  const std::vector<double> plain = c.ref_out;
  std::vector<uint16_t> chunk(64 * 512, bf16_from_float(9.0f));  // padding heads hold garbage
  pack_q(kQLayoutChunk16, 1, 8, 64, 64 * 512, c.q.data(), chunk.data());
  c.q = chunk;
  c.shape.q_layout = kQLayoutChunk16;
  c.shape.q_h_pad = 64;
  c.q_token_stride = 64 * 512;
  run_reference(c);
  CHECK(c.ref_out == plain);
}

TEST_CASE("reference: bad inputs", "[ref][reference]") {
  StepCase c = hand_case();
  c.swa_slots = {0, 64, -1, -1};  // slot 64 is past the one 64-slot page
  c.swa_lens = {2};
  try {
    run_reference(c);
    FAIL("a slot past the cache must throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
  }
  c.swa_lens = {1};  // the same slot past len is ignored
  CHECK_NOTHROW(run_reference(c));
  c.swa_lens = {5};  // len > width
  CHECK_THROWS_AS(run_reference(c), Error);
  c.swa_lens = {-1};
  CHECK_THROWS_AS(run_reference(c), Error);
  c.swa_lens = {1};
  c.positions = {2};  // past the 2-row cos/sin table
  CHECK_THROWS_AS(run_reference(c), Error);
  // A NaN in a written row: that tile's scale is NaN, and every head using the row outputs NaN.
  c.positions = {1};
  std::vector<float> bad(512, 0.25f);
  bad[5] = NAN;
  c.swa_cache.write_row(2, bad.data());
  c.swa_slots = {0, 2, -1, -1};
  c.swa_lens = {2};
  run_reference(c);
  for (int h = 0; h < 8; ++h) CHECK(std::isnan(c.ref_out[h * 512]));
}

TEST_CASE("reference: Q RoPE direction and rounding, inverse RoPE", "[ref][reference]") {
  // Pair 0 with c = 0.75, s = 0.25 (exact): y0 = 1.5 * 0.75 - 0.5 * 0.25 = 1, y1 = 1.5 * 0.25 + 0.5 * 0.75
  // = 0.75. Pair 1 with c = 1, s = 0: unchanged. The inverse rotation brings the pair back.
  std::vector<float> cs(64, 0.0f);
  cs[0] = 0.75f, cs[32] = 0.25f, cs[1] = 1.0f;
  std::vector<float> q(512, 0.0f);
  q[448] = 1.5f, q[449] = 0.5f, q[450] = 3.0f, q[451] = -7.0f, q[0] = 9.0f;
  rope_q_row(cs.data(), q.data());
  CHECK(q[448] == 1.0f);
  CHECK(q[449] == 0.75f);
  CHECK(q[450] == 3.0f);
  CHECK(q[451] == -7.0f);
  CHECK(q[0] == 9.0f);
  std::vector<double> o(512, 0.0);
  o[448] = 1.0, o[449] = 0.75;
  inverse_rope_row(cs.data(), o.data());
  CHECK(o[448] == Approx(1.5 * 0.625));  // (x0 c + x1 s, -x0 s + x1 c) with c^2 + s^2 = 0.625 here
  CHECK(o[449] == Approx(0.5 * 0.625));
  // Rounding: the result is fl32(x0 c - fl32(x1 s)) (one fma) rounded to bf16. Checked against fp64 /
  // long double arithmetic on random inputs wherever that value is not within a hair of a bf16 tie.
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  int checked = 0;
  for (int it = 0; it < 20000; ++it) {
    const float x0 = bf16_round(u(rng) * 4), x1 = bf16_round(u(rng) * 4), c = u(rng), s = u(rng);
    std::vector<float> cs2(64, 1.0f), q2(512, 0.0f);
    cs2[0] = c, cs2[32] = s;
    q2[448] = x0, q2[449] = x1;
    rope_q_row(cs2.data(), q2.data());
    const long double y0 = (long double)x0 * c - (long double)float(double(x1) * s);
    const float y0f = float(y0);
    const float tie_dist = std::fabs(float_from_bits(float_bits(y0f) & 0xFFFF0000u | 0x8000u) - y0f);
    if (tie_dist <= std::fabs(y0f) * 1e-6f) continue;
    ++checked;
    REQUIRE(q2[448] == bf16_round(y0f));
  }
  CHECK(checked > 19000);
}

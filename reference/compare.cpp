// compare.cpp: the comparator of SPEC.md §4. Order: sizes, NaN/Inf positions, then the error bounds, then
// the poison checks (written where it must be, untouched everywhere else).
#include <cmath>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "reference/layouts.hpp"
#include "reference/numerics.hpp"
#include "reference/step_case.hpp"

namespace swapjit::ref {
namespace {

constexpr int kMaxDetailLines = 8;

struct Report {
  CompareResult& r;
  int lines = 0;
  template <typename... A>
  void note(fmt::format_string<A...> f, A&&... a) {
    if (lines++ < kMaxDetailLines) r.detail += fmt::format(f, std::forward<A>(a)...) + "\n";
  }
};

// True where the fp64 amax / 448 is within 2^-8 relative of a power of two: there a bf16-rounded P may
// legally move the scale byte by one.
bool near_power_of_two(double amax) {
  const double r = std::fmax(amax, 1e-4) / 448.0;
  const double p = std::exp2(std::round(std::log2(r)));
  return std::fabs(r - p) <= 0x1p-8 * p;
}

// Shared NaN/Inf and norm bookkeeping of one head: returns false when a non-finite mismatch was found.
bool check_finite(const double* out, const double* ref, int n, bool lenient_blocks, long& nan_count) {
  bool ok = true;
  for (int b = 0; b < n; b += kOutBlockDims) {
    bool ref_bad = false;
    for (int i = b; i < b + kOutBlockDims; ++i) ref_bad |= !std::isfinite(ref[i]);
    for (int i = b; i < b + kOutBlockDims; ++i) {
      const bool rf = std::isfinite(ref[i]), of = std::isfinite(out[i]);
      // mxfp8: in a block whose reference holds a NaN, the kernel may NaN the whole block (a NaN scale).
      if (rf && !of && lenient_blocks && ref_bad) continue;
      if (rf != of) ++nan_count, ok = false;
    }
  }
  return ok;
}

void poison_checks(const StepCase& c, const std::vector<uint8_t>& data, const std::vector<uint8_t>& scale,
                   uint8_t poison, const ExpectedOutput& exp, Report& rep) {
  CompareResult& r = rep.r;
  const int T = c.shape.tokens, H = c.shape.heads;
  if (c.shape.out_layout != kOutMxfp8Ofused) {
    // The whole bf16 buffer is live; an untouched head row (all 1024 bytes poison) is unwritten.
    for (size_t row = 0; row < data.size() / 1024; ++row) {
      bool all_poison = true, exp_poison = true;
      for (size_t i = row * 1024; i < row * 1024 + 1024; ++i)
        all_poison &= data[i] == poison, exp_poison &= exp.data[i] == poison;
      if (all_poison && !exp_poison)
        r.unwritten += 1024, rep.note("bf16 row {} (token, head) never written", row);
    }
    return;
  }
  const int live_groups = H / kHeadsPerGroup;
  for (int t = 0; t < c.n_total; ++t)
    for (int g = 0; g < c.n_groups_alloc; ++g) {
      const size_t base = (size_t(t) * c.n_groups_alloc + g) * kGroupDataBytes;
      if (t < T && g < live_groups) {
        for (size_t blk = 0; blk < kGroupDataBytes; blk += kOutBlockDims) {
          bool all_poison = true, exp_poison = true;
          for (size_t i = base + blk; i < base + blk + kOutBlockDims; ++i)
            all_poison &= data[i] == poison, exp_poison &= exp.data[i] == poison;
          if (all_poison && !exp_poison)
            r.unwritten += kOutBlockDims,
                rep.note("data block token {} group {} byte {} never written", t, g, blk);
        }
      } else {
        for (size_t i = base; i < base + kGroupDataBytes; ++i)
          if (data[i] != poison) {
            if (r.poison_violations++ == 0)
              rep.note("data byte {} (token {}, group {}) outside the live region written", i, t, g);
          }
      }
    }
  std::vector<char> live(scale.size(), 0);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h)
      for (int kb = 0; kb < kHeadDim / kOutBlockDims; ++kb) live[mx_scale_offset(c.n_total, t, h, kb)] = 1;
  for (size_t i = 0; i < scale.size(); ++i) {
    if (live[i]) {
      if (scale[i] == poison && exp.scale[i] != poison)
        ++r.unwritten, rep.note("scale byte {} never written", i);
    } else if (scale[i] != poison) {
      if (r.poison_violations++ < 4)
        rep.note("scale byte {} outside the live region written ({})", i, scale[i]);
    }
  }
}

}  // namespace

CompareResult compare_output(const StepCase& c, const std::vector<uint8_t>& out_data,
                             const std::vector<uint8_t>& out_scale, uint8_t poison) {
  CompareResult r;
  Report rep{r};
  const int T = c.shape.tokens, H = c.shape.heads;
  const bool mx = c.shape.out_layout == kOutMxfp8Ofused;
  if (out_data.size() != out_data_bytes(c) || out_scale.size() != out_scale_bytes(c)) {
    rep.note("buffer sizes {} / {}, expected {} / {}", out_data.size(), out_scale.size(), out_data_bytes(c),
             out_scale_bytes(c));
    return r;
  }
  const ExpectedOutput exp = expected_output(c, poison);
  std::vector<double> out;
  if (mx) {
    out = decode_mxfp8_output(T, H, c.n_groups_alloc, c.n_total, out_data.data(), out_scale.data());
  } else {
    std::vector<uint16_t> o(size_t(T) * H * kHeadDim);
    std::memcpy(o.data(), out_data.data(), o.size() * 2);
    out = decode_bf16_output(T, H, o.data());
  }
  r.bound = mx ? 1e-3 : 5e-3;
  double min_cos = 1.0;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const double* o = out.data() + (size_t(t) * H + h) * kHeadDim;
      const double* ref = c.ref_out.data() + (size_t(t) * H + h) * kHeadDim;
      const long nan_before = r.nan_count;
      if (!check_finite(o, ref, kHeadDim, mx, r.nan_count)) {
        rep.note("token {} head {}: {} NaN/Inf position mismatches", t, h, r.nan_count - nan_before);
        continue;
      }
      double err2 = 0, ref2 = 0;
      bool ref_finite = true;
      for (int d = 0; d < kHeadDim; ++d) {
        if (!std::isfinite(ref[d])) {
          ref_finite = false;
          continue;
        }  // matched NaNs: nothing to bound
        const double e = o[d] - ref[d];
        r.max_abs_err = std::fmax(r.max_abs_err, std::fabs(e));
        err2 += e * e, ref2 += ref[d] * ref[d];
      }
      if (!ref_finite) continue;
      if (!mx) {
        // An all-zero reference (no used entry, or sink +inf) must give exact zeros.
        const double rel = ref2 > 0 ? std::sqrt(err2 / ref2) : (err2 > 0 ? INFINITY : 0.0);
        if (rel > r.bound) rep.note("token {} head {}: rel L2 {:.3e} > {:.1e}", t, h, rel, r.bound);
        r.rel_err = std::fmax(r.rel_err, rel);
        continue;
      }
      // The cosine runs over the blocks the format resolves: a block whose fp64 amax is below the 1e-4
      // floor of the scale rule has elements of at most ~1e-4 * 2^22 / 448 units, down to zero, so only
      // the absolute element bound applies there (e.g. a large sink makes every block that small).
      double bd = 0, bo2 = 0, br2 = 0;
      for (int b = 0; b < kHeadDim; b += kOutBlockDims) {
        double amax = 0;
        for (int i = b; i < b + kOutBlockDims; ++i) amax = std::fmax(amax, std::fabs(ref[i]));
        if (amax < 1e-4) continue;
        for (int i = b; i < b + kOutBlockDims; ++i)
          bd += o[i] * ref[i], bo2 += o[i] * o[i], br2 += ref[i] * ref[i];
      }
      const double cosine = br2 == 0 ? 1.0 : bo2 > 0 ? bd / std::sqrt(br2 * bo2) : 0.0;
      if (cosine < 1.0 - r.bound) rep.note("token {} head {}: cosine {:.6f}", t, h, cosine);
      min_cos = std::fmin(min_cos, cosine);
      for (int kb = 0; kb < kHeadDim / kOutBlockDims; ++kb) {
        const int64_t so = mx_scale_offset(c.n_total, t, h, kb);
        const int got = out_scale[so], want = exp.scale[so];
        double amax = 0;
        for (int i = 0; i < kOutBlockDims; ++i)
          amax = std::fmax(amax, std::fabs(ref[kb * kOutBlockDims + i]));
        if (got != want && !(std::abs(got - want) == 1 && near_power_of_two(amax))) {
          ++r.scale_mismatches;
          rep.note("token {} head {} block {}: scale byte {} expected {} (amax {:.6g})", t, h, kb, got, want,
                   amax);
        }
        const double block_scale = ue8m0_to_double(uint8_t(got));
        for (int i = kb * kOutBlockDims; i < (kb + 1) * kOutBlockDims; ++i) {
          const double tol = std::fmax(std::fmax(1.1e-3, std::fabs(ref[i]) / 8), 0x1p-10 * block_scale);
          if (std::fabs(o[i] - ref[i]) > tol) {
            if (r.element_violations++ < 2)
              rep.note("token {} head {} dim {}: {:.6g} vs ref {:.6g} (tol {:.3g})", t, h, i, o[i], ref[i],
                       tol);
          }
        }
      }
    }
  if (mx) r.rel_err = 1.0 - min_cos;
  poison_checks(c, out_data, out_scale, poison, exp, rep);
  r.pass = r.nan_count == 0 && r.poison_violations == 0 && r.unwritten == 0 && r.scale_mismatches == 0 &&
           r.element_violations == 0 && r.rel_err <= r.bound;
  return r;
}

}  // namespace swapjit::ref

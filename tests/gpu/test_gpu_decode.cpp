// test_gpu_decode.cpp: both decode kernels against the fp64 reference on a few small cases, and kv_insert
// against the host encoder byte for byte, through the harness of `swapjit check` (tools/gpu_harness.hpp).
// Without a driver every test prints "SKIPPED: no GPU driver" and returns (Catch2 2.13 has no SKIP).
#include <cstdio>
#include <string>

#include "tests/catch.hpp"
#include "tests/gpu/skip_without_gpu.hpp"
#include "tools/gpu_harness.hpp"

using namespace swapjit;

namespace {

using testing::no_gpu;

const char* label(KernelChoice k) { return k == KernelChoice::kSwapab ? "swapab" : "headpad"; }

}  // namespace

TEST_CASE("decode kernels match the fp64 reference on small cases", "[gpu][decode]") {
  if (no_gpu("decode small cases")) return;
  Service service;
  harness::make_context_current(service.options().device);
  harness::LayerPool pool(service);
  harness::Stream stream;
  auto cases = harness::small_case_list();
  int seed = 11;
  int launched = 0;
  for (auto& cc : cases) {
    cc.options.seed = uint64_t(seed++);
    ref::StepCase c = ref::make_case(cc.shape, cc.options);
    harness::DeviceStep dev(c);
    DecodeAttention& layer = pool.get(harness::layer_config_for(cc.shape));
    for (KernelChoice k : {KernelChoice::kSwapab, KernelChoice::kHeadpad}) {
      if (k == KernelChoice::kSwapab &&
          !harness::swapab_eligible(cc.shape, swapab_max_tokens_for(service.options(), cc.shape.heads)))
        continue;
      INFO(cc.name << " kernel " << label(k));
      harness::KernelRun run = harness::run_kernel(layer, dev, c, k, stream.get(), 0xFF);
      INFO("max_abs " << run.cmp.max_abs_err << " rel " << run.cmp.rel_err << " bound " << run.cmp.bound << ": "
                      << run.cmp.detail);
      CHECK(run.out.guard_violations == 0);
      CHECK(run.cmp.poison_violations == 0);
      CHECK(run.cmp.nan_count == 0);
      CHECK(run.pass);
      ++launched;
    }
  }
  REQUIRE(launched >= int(cases.size()));
}

TEST_CASE("the two kernels agree on bf16 output (SPEC.md §4 1.1x rule)", "[gpu][decode]") {
  if (no_gpu("swapab vs headpad")) return;
  Service service;
  harness::make_context_current(service.options().device);
  harness::LayerPool pool(service);
  harness::Stream stream;
  harness::CheckCase cc = harness::small_case_list().front();  // 16 heads, bf16 output
  REQUIRE(cc.shape.out_layout == kOutBf16);
  REQUIRE(harness::swapab_eligible(cc.shape));
  for (uint64_t seed : {101u, 102u, 103u}) {
    cc.options.seed = seed;
    ref::StepCase c = ref::make_case(cc.shape, cc.options);
    harness::DeviceStep dev(c);
    DecodeAttention& layer = pool.get(harness::layer_config_for(cc.shape));
    auto sw = harness::run_kernel(layer, dev, c, KernelChoice::kSwapab, stream.get(), 0xFF);
    auto hp = harness::run_kernel(layer, dev, c, KernelChoice::kHeadpad, stream.get(), 0xFF);
    REQUIRE(sw.pass);
    REQUIRE(hp.pass);
    INFO("seed " << seed << " swapab max-abs " << sw.cmp.max_abs_err << " headpad " << hp.cmp.max_abs_err);
    CHECK(sw.cmp.max_abs_err <= 1.1 * hp.cmp.max_abs_err + 1e-12);
    CHECK(harness::bf16_relative_difference(c, sw.out, hp.out) <= 0.02);
  }
}

TEST_CASE("kv_insert writes the bytes of the host encoder", "[gpu][insert]") {
  if (no_gpu("kv_insert")) return;
  Service service;
  harness::make_context_current(service.options().device);
  harness::LayerPool pool(service);
  harness::Stream stream;
  uint64_t seed = 7;
  for (int format : {kFormatV41Fp8, kFormatV41Fp4, kFormatV4Fp8})
    for (bool rope : {false, true}) {
      harness::InsertCheck r = harness::check_insert(pool, format, 64, rope, seed++, stream.get());
      INFO(r.name << ": " << r.mismatched_bytes << " bytes differ: " << r.detail);
      CHECK(r.pass);
    }
}

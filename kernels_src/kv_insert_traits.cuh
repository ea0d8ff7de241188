// kv_insert_traits.cuh: compile-time constants and the launch plan of the kv_insert family (the cache
// writer of SPEC.md §2.3). Included by the kernel (NVRTC) and by the host (jit/kernel_family.cpp), so it is
// plain C++20: no device code, no CUDA headers.
#pragma once
#include "key_shape.cuh"

namespace swapjit {

// One CTA writes one row. Each thread owns 8 consecutive dims (one 16-B chunk of the bf16 input row), so
// 64 threads cover the 512 dims and every scale tile (16, 32 or 64 dims) is 2, 4 or 8 adjacent lanes of
// one warp: the tile amax is a shuffle reduction, no shared memory.
struct KvInsertTraits {
  static constexpr int kThreads = 64;
  static constexpr int kDimsPerThread = 8;
  static constexpr int kRopeFirstThread = kNoRopeDims / kDimsPerThread;  // 56: threads 56..63 own RoPE dims
};
static_assert(KvInsertTraits::kThreads * KvInsertTraits::kDimsPerThread == kHeadDim, "64 x 8 dims = one row");
static_assert(record_scale_tile(kFormatV41Fp8) % KvInsertTraits::kDimsPerThread == 0, "tile = whole lanes");
static_assert(record_scale_tile(kFormatV41Fp4) % KvInsertTraits::kDimsPerThread == 0, "tile = whole lanes");
static_assert(record_scale_tile(kFormatV4Fp8) % KvInsertTraits::kDimsPerThread == 0, "tile = whole lanes");
static_assert(record_scale_tile(kFormatV4Fp8) / KvInsertTraits::kDimsPerThread <= 32, "tile inside a warp");
static_assert(kNoRopeDims % KvInsertTraits::kDimsPerThread == 0, "RoPE dims start at a thread boundary");

// Launch plan: grid.x = rows, one 64-thread CTA each, no cluster, no dynamic shared memory.
constexpr LaunchPlan kv_insert_plan(const KeyShape& k, int variant) {
  (void)k;
  (void)variant;
  return LaunchPlan{KvInsertTraits::kThreads, 1, 1, 0};
}

static_assert(kv_insert_plan(KeyShape{0, 0, 0, kFormatV41Fp8, kFormatNone, 64, 0, 0, 0}, kVariantSimt)
                  .threads == 64,
              "kv_insert plan");

}  // namespace swapjit

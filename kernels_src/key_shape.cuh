// key_shape.cuh: the compile-key values a kernel is specialised for, and the byte constants of the
// record formats (SPEC.md §2.2). Included by the device sources (through NVRTC) AND by host C++ (jit/,
// runtime/, reference/), so that the host and the kernels share one copy of every number.
// NOTE: keep this file free of <cstdint> / CUDA headers: NVRTC has no <cstdint>, the host has no
// <cuda/std/...> in its default include path. Only plain `int` appears here.
#pragma once

namespace swapjit {

// Record formats of a KV cache (SPEC.md §2.2). The numeric values appear in generated preludes; the
// canonical JSON uses the names (jit/compile_key.cpp), so renumbering changes digests, not key files.
enum RecordFormatId : int { kFormatNone = 0, kFormatV41Fp8 = 1, kFormatV41Fp4 = 2, kFormatV4Fp8 = 3 };
enum QLayoutId : int { kQLayoutNone = 0, kQLayoutPlain = 1, kQLayoutChunk16 = 2 };
enum OutLayoutId : int { kOutNone = 0, kOutMxfp8Ofused = 1, kOutBf16 = 2 };

// Kernel variants (the key's "variant" field): wgmma needs sm_90a; mma (mma.sync) runs on any sm_90+;
// simt is for families without MMA (kv_insert). The prelude renders `constexpr int kVariant = ...;`.
enum VariantId : int { kVariantWgmma = 1, kVariantMma = 2, kVariantSimt = 3 };

constexpr int kHeadDim = 512;      // K = V row, dims
constexpr int kNoRopeDims = 448;   // dims 0..447 carry no RoPE
constexpr int kRopeDims = 64;      // dims 448..511, GPT-J interleaved pairs
constexpr int kRopePairs = 32;

// Data-row bytes D and scale-row bytes S of each format; a page holds P data rows then P scale rows.
constexpr int record_data_bytes(int fmt) {
  return fmt == kFormatV41Fp8 ? 512 : fmt == kFormatV41Fp4 ? 256 : fmt == kFormatV4Fp8 ? 576 : 0;
}
constexpr int record_scale_bytes(int fmt) {
  return fmt == kFormatV41Fp8 ? 16 : fmt == kFormatV41Fp4 ? 32 : fmt == kFormatV4Fp8 ? 8 : 0;
}
constexpr int record_bytes(int fmt) { return record_data_bytes(fmt) + record_scale_bytes(fmt); }
// Dims covered by one scale byte.
constexpr int record_scale_tile(int fmt) {
  return fmt == kFormatV41Fp8 ? 32 : fmt == kFormatV41Fp4 ? 16 : fmt == kFormatV4Fp8 ? 64 : 0;
}
static_assert(record_bytes(kFormatV41Fp8) == 528, "v41_fp8 is 528 B/slot");
static_assert(record_bytes(kFormatV41Fp4) == 288, "v41_fp4 is 288 B/slot");
static_assert(record_bytes(kFormatV4Fp8) == 584, "v4_fp8 is 584 B/slot");

// MXFP8 "o-fused" output (SPEC.md §3.2 step 8): 8 heads per group, 4096 data bytes per group and token,
// 32-dim blocks; an empty block's scale byte.
constexpr int kHeadsPerGroup = 8;
constexpr int kGroupDataBytes = kHeadsPerGroup * kHeadDim;  // 4096
constexpr int kOutBlockDims = 32;
constexpr int kEmptyBlockScaleByte = 105;
static_assert(kGroupDataBytes == 4096, "o-fused group is 4096 bytes");

// The values of one compile key that device code sees. The specializer renders
//   constexpr swapjit::KeyShape kKey{...};
// in the prelude; traits headers compute launch plans from it with constexpr functions that the host
// calls too (jit/kernel_family.cpp).
struct KeyShape {
  int live_heads;   // heads this rank computes (0 for kv_insert)
  int window;       // SWA list width
  int topk;         // compressed list width, 0 = SWA-only layer
  int swa_format;   // RecordFormatId
  int comp_format;  // RecordFormatId, kFormatNone on SWA-only layers
  int swa_page;     // slots per SWA page
  int comp_page;    // slots per compressed page, 0 on SWA-only layers
  int q_layout;     // QLayoutId
  int out_layout;   // OutLayoutId
};

// How a family launches for one key: grid.x = items * ctas_per_item (items = tokens, or rows for
// kv_insert), cluster.x = cluster (1 = no cluster), block.x = threads, dynamic shared memory bytes.
// Wide tiling (swap-AB only): with wide_cluster > 0 the same function also runs with clusters of
// wide_cluster CTAs (smaller tiles, more CTAs per item; larger than the portable 8, so the function needs
// the non-portable attribute), and a launch of at most wide_max_items items takes that shape: the traits
// set wide_cluster, the module loader sets wide_max_items from cuOccupancyMaxActiveClusters (every item's
// cluster resident at once); 0 = never wide.
// Mid tiling (swap-AB only): with mid_cluster > 0 (between cluster and the portable 8) a launch of more
// than wide_max_items but at most mid_max_items items takes clusters of mid_cluster CTAs, set the same way.
struct LaunchPlan {
  int threads;
  int ctas_per_item;
  int cluster;
  int smem_bytes;
  int wide_cluster = 0;
  int wide_max_items = 0;
  int mid_cluster = 0;
  int mid_max_items = 0;
};

constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace swapjit

// decode_attention.hpp: the public C++ API of swapjit (DESIGN.md "Warm before capture, sealed after",
// "Launch is cheap and graph-safe"). A serving process builds one Service per process and one
// DecodeAttention per attention layer kind, calls Service::warmup() before CUDA graph capture, then
// forward() per decode step (inside captured graphs too).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda.h>  // types only (CUstream); the driver itself is loaded with dlopen at run time

#include "jit/compile_key.hpp"
#include "jit/error.hpp"  // swapjit::Error, what every call here throws
#include "runtime/cubin_store.hpp"

namespace swapjit {

struct LayerConfig {
  int live_heads = 16;  // heads this rank computes: 8, 16, 32, 64 or 128
  int window = 128;     // SWA list width
  int topk = 512;       // compressed list width, 0 = SWA-only layer
  int swa_format = kFormatV4Fp8;
  int comp_format = kFormatV4Fp8;  // ignored (kFormatNone) when topk == 0
  int swa_page = 64;
  int comp_page = 64;  // ignored when topk == 0
  int q_layout = kQLayoutChunk16;
  int out_layout = kOutMxfp8Ofused;
  bool batch_invariant = false;  // true: always the head-padded kernel (the two sum in different orders)
};

struct CacheRef {
  const void* base = nullptr;  // device pointer, 16-byte aligned
  int64_t page_stride = 0;     // bytes, >= P * (D + S), multiple of 16
  int32_t pages = 0;
};

// One decode step. All pointers are device pointers. Shapes as SPEC.md §3.1.
struct DecodeStep {
  int32_t num_tokens = 0;
  const void* q = nullptr;  // bf16, per the layer's q_layout
  int64_t q_token_stride = 0;
  int32_t q_h_pad = 64;  // chunk16 only
  const int64_t* positions = nullptr;  // [T]
  const float* cos_sin = nullptr;      // [max_pos, 64]
  int32_t max_pos = 0;
  const int32_t* swa_slots = nullptr;  // [T, swa_width]
  const int32_t* swa_lens = nullptr;   // [T]
  int32_t swa_width = 0;
  const int32_t* comp_slots = nullptr;  // [T, comp_width], null on SWA-only layers
  const int32_t* comp_lens = nullptr;
  int32_t comp_width = 0;
  const float* sink = nullptr;  // [live heads] or null
  float sm_scale = 0.0441941738241592f;  // 512^-0.5
  CacheRef swa_cache, comp_cache;
  // mxfp8_ofused output
  void* out_data = nullptr;   // fp8 [n_total, n_groups_alloc, 4096]
  void* out_scale = nullptr;  // int32 view, see SPEC §3.2
  int32_t n_groups_alloc = 0;
  int32_t n_total = 0;
  // bf16 output
  void* out_bf16 = nullptr;  // [T, out_token_stride]
  int64_t out_token_stride = 0;
};

// One KV insert: rows written into one cache in the given format (SPEC.md §2.3).
struct InsertStep {
  int32_t num_rows = 0;
  const void* rows = nullptr;  // bf16 [num_rows, row_stride]
  int64_t row_stride = 512;
  const int64_t* slots = nullptr;      // [num_rows], -1 = skip
  const int64_t* positions = nullptr;  // null = rows already carry RoPE
  const float* cos_sin = nullptr;
  int32_t max_pos = 0;
  CacheRef cache;
};

enum class KernelChoice { kAuto, kSwapab, kHeadpad };

// SPEC.md §5's SWAPAB_MAX_TOKENS, per live-head count, set from the measured crossover (docs/perf-notes.md;
// both kernels timed at T = 1 .. 64 on the H200):
// - 16 heads: swap-AB is faster at every measured T (session 10 run 6, 2026-11-30: swap-AB / head-padded
//   0.55-0.58 at T = 24, 0.77-0.81 at T = 40, 0.70-0.74 at T = 64), so 64; past 64 it is unmeasured.
// - 32 heads: 32 until session 10 (T = 40, swap-AB's third wave of 17 six-CTA clusters, tied or lost: 0.97-1.11
//   in sessions 5 and 7); since the 24-bit merge slices it is faster at every measured T (run 6: 0.64-0.70 at
//   T = 24, 0.90-0.99 at T = 40, cold included, 0.82-0.90 at T = 64), so 64 as well.
inline constexpr int kDefaultSwapabMaxTokens = 64;  // 16 heads, and 8 (session 13 run 7: 0.52-0.75 to T = 64)
inline constexpr int kDefaultSwapabMaxTokens32Heads = 64;    // 32 heads
inline constexpr int default_swapab_max_tokens(int live_heads) {
  return live_heads >= 32 ? kDefaultSwapabMaxTokens32Heads : kDefaultSwapabMaxTokens;
}

// The steps on which a swap-AB layer of 16 or 32 heads splits each token's heads over two clusters (the key
// of half the heads, DecodeParams.head_groups = 2): every cluster then does half the softmax, exports and
// pushes half the partials and merges half the tasks, at the cost of a second gather of the same records
// (from L2). It pays while the doubled clusters are resident in one wave. Measured on the H200 (session 13
// run 1, docs/perf-notes.md; swap-AB split / unsplit, warm, three pairings):
// - 32 heads, compressed layers (6-CTA clusters, 17 resident): 0.76-0.78 at T = 1-3, 0.87-0.91 at T = 4-8,
//   1.39-1.55 at T = 12-16 (two waves): 8. SWA-only layers (2-CTA clusters): 0.75-0.85 at every T to 16: 16.
// - 16 heads, compressed: 0.87-0.89 at T = 1-3, 1.00-1.05 at T = 4-6 (8-12 clusters leave the 10-CTA wide
//   shape for the 8-CTA mid one), 0.98 at T = 8, 1.5-1.6 at T = 12-16: 3. SWA-only: 0.90-0.93 to T = 16: 16.
//   Since the mid shape's tiles are balanced (80 rows a CTA, session 18 run 2): T = 4 0.97-0.98 (8.23-8.50 ->
//   8.09-8.23 us), T = 5-6 1.00-1.02: 4.
// - SWA-only past 16 (session 22 run 7, two pairings, caps "34" beside the defaults): two clusters 0.93-0.95
//   (16 heads) and 0.82-0.89 (32 heads) of one at T = 17-33; at T = 34 the 68 clusters of 2 CTAs need two waves
//   (66 resident): 1.28-1.41. So 33, the largest T whose split fits one wave.
inline constexpr int kDefaultSwapabSplitMaxTokens = 4;          // 16 heads, compressed layers
inline constexpr int kDefaultSwapabSplitMaxTokens32Heads = 8;   // 32 heads, compressed layers
inline constexpr int kDefaultSwapabSplitMaxTokensSwaOnly = 33;  // 16 and 32 heads, SWA-only layers
inline constexpr int default_swapab_split_max_tokens(int live_heads, int topk) {
  if (live_heads != 16 && live_heads != 32) return 0;
  if (topk == 0) return kDefaultSwapabSplitMaxTokensSwaOnly;
  return live_heads == 32 ? kDefaultSwapabSplitMaxTokens32Heads : kDefaultSwapabSplitMaxTokens;
}
// Four clusters a token, for 32 heads (the 8-head key; checked before the two-cluster cap). Measured against
// two clusters (session 13 run 3): compressed T = 1 (4 clusters, the wide shape) 0.865-0.891 (8.30-8.38 ->
// 7.24-7.40 us); T = 2 (8 clusters, the mid shape) no gain (0.99-1.00 in run 1's 8-head times); SWA-only
// 0.90-0.92 at T = 1-4, 1.00 at T = 8. Since the mid shape's tiles are balanced (session 18 run 3, caps "8 3"
// beside the defaults): compressed T = 2 on four 0.967-0.992 (8.23-8.56 -> 8.11-8.28 us), T = 3 1.005-1.021.
// SWA-only again (session 22 runs 5-6, caps "16" beside the defaults): four 0.92-0.97 of two at every T = 5-16
// (session 13's T = 8 tie no longer holds); T = 17 would need 68 clusters of 2 CTAs (66 resident): 16.
// Compressed T = 4-16 on four (the same runs): 1.00-1.01 at T = 4 (the measured extra point stays), 1.6-2.5 above.
inline constexpr int kDefaultSwapabSplit4MaxTokens32Heads = 2;   // compressed layers
inline constexpr int kDefaultSwapabSplit4MaxTokensSwaOnly = 16;  // SWA-only layers
inline constexpr int default_swapab_split4_max_tokens(int live_heads, int topk) {
  if (live_heads != 32) return 0;
  return topk == 0 ? kDefaultSwapabSplit4MaxTokensSwaOnly : kDefaultSwapabSplit4MaxTokens32Heads;
}

// One more token count where the split pays past the caps above (session 17, docs/perf-notes.md; the
// default caps only: a cap set in ServiceOptions means exactly that cap). The step whose split gives 16
// clusters: they take the portable 6-CTA shape (17 resident) in one wave, and that beats the unsplit step's 8
// clusters in the 8-CTA mid shape (96-slot tiles then). Measured (H200, caps "8 4" beside the defaults, warm,
// three pairings): 16 heads T = 8 on two clusters 9.08-9.22 us against 9.65-9.76 (T = 5-6 on two: 10-12
// clusters in the mid shape, 1.00-1.04 slower: not split; T = 4 is within the cap since session 18); 32 heads
// T = 4 on four 9.01-9.16 against 9.45-9.63 on two (T = 2-3 on four then 1.01-1.05 slower; T = 2 is within the
// four-way cap since session 18).
inline constexpr int kDefaultSwapabSplitAlsoAt16Heads = 8;   // 16 heads, compressed layers: two clusters
inline constexpr int kDefaultSwapabSplit4AlsoAt32Heads = 4;  // 32 heads, compressed layers: four clusters
inline constexpr int default_swapab_split_also_at(int live_heads, int topk) {
  return live_heads == 16 && topk > 0 ? kDefaultSwapabSplitAlsoAt16Heads : 0;
}
inline constexpr int default_swapab_split4_also_at(int live_heads, int topk) {
  return live_heads == 32 && topk > 0 ? kDefaultSwapabSplit4AlsoAt32Heads : 0;
}

// The head-padded kernel's head split (layers of 64 or more heads; jit/kernel_family.hpp
// headpad_split_heads): the clusters (1, 2 or 4) each token's heads run on, by step size, on the keys of a
// half or a quarter of the heads. Each cluster pads its heads to 64 rows again, so the split pays only while
// its clusters are resident in one wave of the shape they take; the choice follows the cluster shapes'
// occupancy, so it is a measured table, not a cap. Measured on the H200 (session 22 runs 2-3,
// docs/perf-notes.md): the fastest of 1, 2 and 4 clusters a token at every T = 1..33, warm, V4.1-Flash
// compressed layers (window 128, topk 512) and SWA-only ones; the v41_fp8 and v4_fp8 pairings chose the same
// at every point. E.g. 64 heads T = 1 on four clusters 0.76-0.78 of one (v4_fp8 15.66 -> 12.15 us), SWA-only
// 0.70-0.74 up to T = 16; 128 heads T = 1 0.49-0.50. V4-Pro's compressed layers (topk 1024) likewise (session
// 22 run 10): 64 heads T = 1 0.80, T = 2-3 0.87-0.88; 128 heads T = 1 0.53-0.54, T = 2-7 0.61-0.74. Past 33
// tokens, and for other topk (not measured), one. Character T - 1 of a row is the clusters at T tokens.
inline constexpr char kHeadpadGroups64Compressed[] = "422111122221111111111111111111111";
inline constexpr char kHeadpadGroups64SwaOnly[] = "444444444444444422222222222222222";
inline constexpr char kHeadpadGroups128Compressed[] = "422442222221111222222211111111222";
inline constexpr char kHeadpadGroups128SwaOnly[] = "444444444444444422222222222222222";
inline constexpr char kHeadpadGroups64Topk1024[] = "422111111111111111111111111111111";
inline constexpr char kHeadpadGroups128Topk1024[] = "422222211111111111111111111111111";
inline constexpr int kHeadpadGroupsTableTokens = sizeof(kHeadpadGroups64Compressed) - 1;
inline constexpr int default_headpad_head_groups(int live_heads, int topk, int num_tokens) {
  if ((live_heads != 64 && live_heads != 128) || (topk != 0 && topk != 512 && topk != 1024)) return 1;
  if (num_tokens < 1 || num_tokens > kHeadpadGroupsTableTokens) return 1;
  const bool h64 = live_heads == 64;
  const char* row = topk == 0     ? (h64 ? kHeadpadGroups64SwaOnly : kHeadpadGroups128SwaOnly)
                    : topk == 512 ? (h64 ? kHeadpadGroups64Compressed : kHeadpadGroups128Compressed)
                                  : (h64 ? kHeadpadGroups64Topk1024 : kHeadpadGroups128Topk1024);
  return row[num_tokens - 1] - '0';
}
static_assert(sizeof(kHeadpadGroups64SwaOnly) == sizeof(kHeadpadGroups64Compressed) &&
              sizeof(kHeadpadGroups128Compressed) == sizeof(kHeadpadGroups64Compressed) &&
              sizeof(kHeadpadGroups128SwaOnly) == sizeof(kHeadpadGroups64Compressed) &&
              sizeof(kHeadpadGroups64Topk1024) == sizeof(kHeadpadGroups64Compressed) &&
              sizeof(kHeadpadGroups128Topk1024) == sizeof(kHeadpadGroups64Compressed));

struct ServiceOptions {
  StoreOptions store = StoreOptions::from_env();
  int jobs = 0;        // parallel compiles in warmup(); 0 = SWAPJIT_JOBS or hardware threads
  int device = 0;      // CUDA device ordinal
  std::string arch;    // empty: from the device ("sm_90a" on sm_90), or "sm_90a" without a driver
  // SPEC.md §5's SWAPAB_MAX_TOKENS: > 0 sets it for every layer; 0 takes default_swapab_max_tokens(heads).
  int swapab_max_tokens = 0;
  // Steps of at most this many tokens split their heads over two clusters (above): > 0 sets it for every
  // layer that has a split key, 0 never splits, -1 takes default_swapab_split_max_tokens(heads, topk).
  int swapab_split_max_tokens = -1;
  // Steps of at most this many tokens split their heads over four clusters (32 heads), the same way.
  int swapab_split4_max_tokens = -1;
  // The head-padded kernel's steps of at most this many tokens split their heads over four (two) clusters on
  // layers of 64 or more heads (four checked first). Both -1: the measured table,
  // default_headpad_head_groups; either >= 0 replaces it with these caps (-1 then reads as 0, never).
  int headpad_split4_max_tokens = -1;
  int headpad_split_max_tokens = -1;
};

// The SWAPAB_MAX_TOKENS a layer of `live_heads` heads dispatches with under `o`.
inline int swapab_max_tokens_for(const ServiceOptions& o, int live_heads) {
  return o.swapab_max_tokens > 0 ? o.swapab_max_tokens : default_swapab_max_tokens(live_heads);
}

// The split cap a layer of `live_heads` heads and `topk` compressed slots dispatches with under `o` (0: never
// split; a layer without a split key never splits either).
inline int swapab_split_max_tokens_for(const ServiceOptions& o, int live_heads, int topk) {
  return o.swapab_split_max_tokens >= 0 ? o.swapab_split_max_tokens
                                        : default_swapab_split_max_tokens(live_heads, topk);
}
inline int swapab_split4_max_tokens_for(const ServiceOptions& o, int live_heads, int topk) {
  return o.swapab_split4_max_tokens >= 0 ? o.swapab_split4_max_tokens
                                         : default_swapab_split4_max_tokens(live_heads, topk);
}
// The extra split point under `o` (0: none): the default one while that cap is the default, else none.
inline int swapab_split_also_at_for(const ServiceOptions& o, int live_heads, int topk) {
  return o.swapab_split_max_tokens >= 0 ? 0 : default_swapab_split_also_at(live_heads, topk);
}
// The clusters a head-padded step of `num_tokens` tokens splits each token's heads over, on a layer of
// `live_heads` heads, under the caps ServiceOptions::headpad_split4_max_tokens and headpad_split_max_tokens
// (1 below 64 heads: the layer has no split keys).
inline int headpad_head_groups_for(int split4_max_tokens, int split_max_tokens, int live_heads, int topk,
                                   int num_tokens) {
  if (live_heads < 64) return 1;
  if (split4_max_tokens < 0 && split_max_tokens < 0) return default_headpad_head_groups(live_heads, topk, num_tokens);
  return num_tokens <= split4_max_tokens ? 4 : num_tokens <= split_max_tokens ? 2 : 1;
}
inline int headpad_head_groups_for(const ServiceOptions& o, int live_heads, int topk, int num_tokens) {
  return headpad_head_groups_for(o.headpad_split4_max_tokens, o.headpad_split_max_tokens, live_heads, topk, num_tokens);
}
inline int swapab_split4_also_at_for(const ServiceOptions& o, int live_heads, int topk) {
  return o.swapab_split4_max_tokens >= 0 ? 0 : default_swapab_split4_also_at(live_heads, topk);
}

class Service;

class DecodeAttention {
 public:
  // Registers the layer's keys with `service` (compiled at the next warmup()). Throws kInvalidArgument on
  // a bad config, naming the field.
  DecodeAttention(Service& service, const LayerConfig& config);
  ~DecodeAttention();
  DecodeAttention(const DecodeAttention&) = delete;
  DecodeAttention& operator=(const DecodeAttention&) = delete;

  // Dispatches (SPEC.md §5) and launches one decode step on `stream`. Checks shapes on the host (no
  // device reads). REQUIRES: warmup() ran for this layer, or the stream is not capturing and the service
  // is not sealed (then the key is compiled and loaded now).
  void forward(const DecodeStep& step, CUstream stream, KernelChoice choice = KernelChoice::kAuto);
  // The same with the head split forced: each token's heads on `head_groups` clusters (1, 2 or 4) of the
  // chosen kernel, where the layer has that key (kInvalidArgument otherwise); for measurements and checks.
  void forward(const DecodeStep& step, CUstream stream, KernelChoice choice, int head_groups);
  // Writes rows into a cache of this layer: swa = true for the SWA cache, false for the compressed one.
  void insert(const InsertStep& step, bool swa, CUstream stream);
  // The kernel the dispatch rule picks for a step of `num_tokens` tokens with these list widths.
  KernelChoice choose(int num_tokens, int swa_width) const;
  // Every key this layer may launch (registered at construction).
  const std::vector<CompileKey>& keys() const;
  const LayerConfig& config() const;
  // The layer's own key for this choice (kSwapab / kHeadpad). Throws kUnsupported for kSwapab on a layer
  // that can never use it (the reason in the message), kInvalidArgument for kAuto. Swap-AB steps of at most
  // the split caps launch the key of half or a quarter of the heads instead (launch_key).
  const CompileKey& key_for(KernelChoice choice) const;
  // The key forward(kAuto) launches for a step of this shape: key_for(choose()), or on a split step the key
  // of half or a quarter of the heads (ServiceOptions::swapab_split_max_tokens, split4; the head-padded
  // kernel's headpad_split_max_tokens, split4 on layers of 64 or more heads).
  const CompileKey& launch_key(int num_tokens, int swa_width) const;
  // The kv_insert key insert() launches for the SWA (swa = true) or the compressed cache.
  const CompileKey& insert_key(bool swa) const;
  // Why choose() picks what it picks for this step shape (SPEC.md §5), e.g. for `swapjit explain`.
  const char* explain_choice(int num_tokens, int swa_width) const;

  struct Impl;  // runtime/service_impl.hpp

 private:
  std::unique_ptr<Impl> impl_;
};

// REQUIRES: every DecodeAttention registered with a Service is destroyed before the Service.
class Service {
 public:
  explicit Service(ServiceOptions options = {});
  ~Service();
  // Compiles the missing registered keys in parallel, loads every module and forces every function to load
  // (cuFuncLoad). Throws on the first failure, naming the key. Without a driver: compiles only, then throws
  // kNoDriver.
  void warmup();
  // After seal(), any key not warmed is an error (kNotWarmed) rather than a compile.
  void seal();
  bool has_driver() const;
  std::string arch() const;
  const ServiceOptions& options() const;
  CubinStore& store();
  struct Impl;
  Impl& impl();

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace swapjit

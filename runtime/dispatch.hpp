// dispatch.hpp: which kernel runs a decode step (SPEC.md §5). The swap-AB kernel takes a step only when
// all its conditions hold; otherwise the head-padded kernel does. The conditions fixed by the layer are
// decided once, at construction (static_swapab_reason); the per-step ones from shapes alone, with no
// allocation (reasons are string literals).
#pragma once
#include "jit/kernel_family.hpp"  // swapab_tiles, kPortableClusterMax
#include "swapjit/decode_attention.hpp"

namespace swapjit {

struct LayerDispatch {
  bool arch_has_swapab = false;  // variants_for(kSwapabDecode, arch) is not empty
  int live_heads = 0;
  int window = 0;
  int topk = 0;
  bool batch_invariant = false;
  int swapab_max_tokens = kDefaultSwapabMaxTokens;  // SPEC.md §5 SWAPAB_MAX_TOKENS
  bool has_split = false;                           // the layer registered the key of half its heads
  int split_max_tokens = 0;                         // swapab_split_max_tokens_for(); 0 = never split
  bool has_quarter = false;                         // ... and the key of a quarter of its heads
  int split4_max_tokens = 0;                        // swapab_split4_max_tokens_for(); 0 = never four
  int split_also_at = 0;   // swapab_split_also_at_for(): one more token count split over two (0 = none)
  int split4_also_at = 0;  // swapab_split4_also_at_for(): ... over four
  // The head-padded kernel's split (layers of 64 or more heads: jit/kernel_family.hpp headpad_split_heads).
  bool has_headpad_split = false;    // the layer registered the head-padded key of half its heads
  bool has_headpad_quarter = false;  // ... of a quarter of its heads
  int headpad_split4_max_tokens = -1;  // ServiceOptions' caps (-1 both: the measured table)
  int headpad_split_max_tokens = -1;
};

struct DispatchDecision {
  KernelChoice choice;
  const char* reason;   // a string literal: why this kernel (never null)
  int head_groups = 1;  // the clusters each token's heads are split over (DecodeParams.head_groups)
};

// The clusters a swap-AB step of `num_tokens` tokens splits each token's heads over: 4 up to the layer's
// four-way cap (when it has the key of a quarter of its heads), else 2 up to its split cap (the key of half
// its heads), else 1.
int swapab_head_groups(const LayerDispatch& layer, int num_tokens);
// The same for a head-padded step: headpad_head_groups_for() under the layer's options, where the layer has
// that key, else 1.
int headpad_head_groups(const LayerDispatch& layer, int num_tokens);

// The reason the layer can never use swap-AB, or nullptr when the static conditions hold.
const char* static_swapab_reason(const LayerDispatch& layer);

// SPEC.md §5 for one step of `num_tokens` tokens whose SWA list width is `swa_width`.
DispatchDecision dispatch_step(const LayerDispatch& layer, int num_tokens, int swa_width);

}  // namespace swapjit

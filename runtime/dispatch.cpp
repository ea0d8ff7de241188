// dispatch.cpp: SPEC.md §5, in the order the spec lists the conditions.
#include "runtime/dispatch.hpp"

namespace swapjit {

const char* static_swapab_reason(const LayerDispatch& l) {
  if (!l.arch_has_swapab) return "headpad: the GPU's architecture has no swap-AB variant";
  if (!swapab_heads_supported(l.live_heads)) return "headpad: live heads are not 8, 16 or 32";
  if (swapab_tiles(l.window, l.topk) > kPortableClusterMax)
    return "headpad: ceil(window/64) + ceil(topk/128) > 8, a token's tiles do not fit one portable cluster";
  if (l.batch_invariant) return "headpad: batch-invariant mode is on (the two kernels sum in different orders)";
  return nullptr;
}

DispatchDecision dispatch_step(const LayerDispatch& l, int num_tokens, int swa_width) {
  // A head-padded step's head split (1 on layers of fewer than 64 heads), worked out only for those steps.
  const auto headpad = [&](const char* why) {
    return DispatchDecision{KernelChoice::kHeadpad, why, headpad_head_groups(l, num_tokens)};
  };
  if (const char* why = static_swapab_reason(l)) return headpad(why);
  if (num_tokens > l.swapab_max_tokens) return headpad("headpad: more tokens than swapab_max_tokens");
  if (swa_width != l.window) return headpad("headpad: the step's SWA list width is not the window");
  if (const int groups = swapab_head_groups(l, num_tokens); groups > 1)
    return {KernelChoice::kSwapab,
            groups == 4
                ? "swapab: every condition of SPEC.md §5 holds; at most swapab_split4_max_tokens tokens (or the "
                  "measured extra point), so each token's heads are split over four clusters"
                : "swapab: every condition of SPEC.md §5 holds; at most swapab_split_max_tokens tokens (or the "
                  "measured extra point), so each token's heads are split over two clusters",
            groups};
  return {KernelChoice::kSwapab, "swapab: every condition of SPEC.md §5 holds"};
}

int swapab_head_groups(const LayerDispatch& l, int num_tokens) {
  if (l.has_quarter && (num_tokens <= l.split4_max_tokens || num_tokens == l.split4_also_at)) return 4;
  return l.has_split && (num_tokens <= l.split_max_tokens || num_tokens == l.split_also_at) ? 2 : 1;
}

int headpad_head_groups(const LayerDispatch& l, int num_tokens) {
  const int g = headpad_head_groups_for(l.headpad_split4_max_tokens, l.headpad_split_max_tokens, l.live_heads,
                                       l.topk, num_tokens);
  return (g == 4 && l.has_headpad_quarter) || (g == 2 && l.has_headpad_split) ? g : 1;
}

}  // namespace swapjit

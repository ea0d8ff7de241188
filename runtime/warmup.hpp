// warmup.hpp: the keys a layer registers, and the parallel compile that Service::warmup() runs over them
// (DESIGN.md "Warm before capture, sealed after").
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "jit/compile_key.hpp"
#include "runtime/cubin_store.hpp"
#include "swapjit/decode_attention.hpp"

namespace swapjit {

// The hot path's fixed array of a layer is indexed by these.
// kSlotSwapabSplit / kSlotSwapabQuarter: the swap-AB keys of half and a quarter of the layer's heads, which
// small steps launch with each token's heads split over two or four clusters (dispatch.hpp
// swapab_head_groups); kSlotHeadpadSplit / kSlotHeadpadQuarter: the same for the head-padded kernel (layers
// of 64 or more heads: headpad_head_groups).
enum KernelSlot : int {
  kSlotSwapab = 0,
  kSlotHeadpad = 1,
  kSlotInsertSwa = 2,
  kSlotInsertComp = 3,
  kSlotSwapabSplit = 4,
  kSlotSwapabQuarter = 5,
  kSlotHeadpadSplit = 6,
  kSlotHeadpadQuarter = 7,
  kSlotCount = 8
};
// The slot of the swap-AB key a step split over `groups` clusters a token launches (1, 2 or 4).
constexpr int swapab_slot(int groups) {
  return groups == 4 ? kSlotSwapabQuarter : groups == 2 ? kSlotSwapabSplit : kSlotSwapab;
}
// ... and of the head-padded key.
constexpr int headpad_slot(int groups) {
  return groups == 4 ? kSlotHeadpadQuarter : groups == 2 ? kSlotHeadpadSplit : kSlotHeadpad;
}

struct LayerKeys {
  CompileKey keys[kSlotCount];
  // swapab: the static conditions hold (split keys: and the heads divide); insert comp: topk > 0.
  bool present[kSlotCount] = {};
  const char* no_swapab_reason = nullptr;  // why the layer can never use swap-AB (nullptr: it can)
};

// Validates `config` (throws kInvalidArgument naming the field) and builds its keys for `arch`:
// the swap-AB key and its split keys (half, a quarter of the heads) when SPEC §5's static conditions hold,
// always the head-padded key (and its split keys at 64 or more heads), and the kv_insert keys of the SWA cache
// and (topk > 0) the compressed cache.
LayerKeys build_layer_keys(const LayerConfig& config, const std::string& arch);

// Which compiled-cubin source warmup uses: the CubinStore in production, a fake in tests.
using CubinSource = std::function<CubinResult(const CompileKey&)>;

// Gets every key's cubin with up to `jobs` threads. Every key is attempted; then the first failure in key
// order is rethrown (an Error names its key; anything else is wrapped as kInternal with the key).
std::vector<CubinResult> fetch_cubins(const std::vector<CompileKey>& keys, int jobs, const CubinSource& source);

// `requested` if > 0, else SWAPJIT_JOBS if set, else the hardware threads (at least 1). Read once, by
// the Service's constructor.
int resolve_jobs(int requested);

}  // namespace swapjit

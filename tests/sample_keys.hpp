// sample_keys.hpp: the V4.1-Flash-style compile keys that many tests start from, written once.
#pragma once
#include <utility>
#include <vector>

#include "jit/compile_key.hpp"
#include "jit/kernel_family.hpp"
#include "jit/presets.hpp"

namespace swapjit::testing {

// A swap-AB decode key (window 128, topk 512, chunk16 Q, MXFP8 output, SWA pages of 64) with the fields
// tests vary most as arguments.
inline CompileKey sample_swapab_key(int heads = 16, int swa_format = kFormatV41Fp8,
                                    int comp_format = kFormatV41Fp4, int comp_page = 64) {
  return make_decode_key(Family::kSwapabDecode, "sm_90a", heads, 128, 512, swa_format, comp_format, 64, comp_page,
                         kQLayoutChunk16, kOutMxfp8Ofused);
}

// A record pairing of SPEC.md §2.2: SWA format, compressed format (kFormatNone: an SWA-only layer).
struct RecordPairing {
  int swa, comp;
};

// The sm_90a decode key of `family` for a pairing (SWA-only: topk 0 whatever is passed), as a layer
// registers it (make_decode_key). The compile tests build their key matrices from it.
inline CompileKey decode_key(Family family, int heads, RecordPairing pr, int swa_page, int comp_page, int topk,
                             int q, int out, int window = 128) {
  return make_decode_key(family, "sm_90a", heads, window, pr.comp == kFormatNone ? 0 : topk, pr.swa, pr.comp,
                         swa_page, comp_page, q, out);
}

// PresetOptions with every field spelled out (designated initializers that skip fields warn under -Wextra).
inline PresetOptions preset_options(const char* preset, std::vector<int> tp, const char* kv = "",
                                    const char* arch = "sm_90a") {
  PresetOptions o;
  o.preset = preset;
  o.tp = std::move(tp);
  o.kv = kv;
  o.arch = arch;
  return o;
}

}  // namespace swapjit::testing

// sample_keys.hpp: the V4.1-Flash-style compile keys that many tests start from, written once.
#pragma once
#include <utility>
#include <vector>

#include "jit/compile_key.hpp"
#include "jit/presets.hpp"

namespace swapjit::testing {

// A swap-AB decode key (window 128, topk 512, chunk16 Q, MXFP8 output, SWA pages of 64) with the fields
// tests vary most as arguments.
inline CompileKey sample_swapab_key(int heads = 16, int swa_format = kFormatV41Fp8,
                                    int comp_format = kFormatV41Fp4, int comp_page = 64) {
  CompileKey k;
  k.family = Family::kSwapabDecode;
  k.variant = "mma";
  k.arch = "sm_90a";
  k.live_heads = heads;
  k.window = 128;
  k.topk = 512;
  k.swa_format = swa_format;
  k.comp_format = comp_format;
  k.swa_page = 64;
  k.comp_page = comp_page;
  k.q_layout = kQLayoutChunk16;
  k.out_layout = kOutMxfp8Ofused;
  return k;
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

// presets.hpp: the compile keys a model needs (SPEC.md §1 and §6), so that `swapjit precompile --preset`
// and tests warm exactly what a serving process registers. A preset is a model plus TP sizes; options may
// narrow it (one record pairing).
#pragma once
#include <string>
#include <vector>

#include "jit/compile_key.hpp"

namespace swapjit {

// One model's attention shape, per SPEC.md §1.
struct ModelPreset {
  const char* name;                           // "v4.1-flash", "v4-flash", "v4-pro"
  int heads;                                  // query heads of the whole model
  int window;                                 // SWA list width
  int topk;                                   // compressed list width (index_topk)
  std::vector<int> compress_ratios;           // ratios of the compressed layers (pages of 128 / ratio slots)
  std::vector<std::pair<int, int>> pairings;  // default (SWA, compressed) record formats
};

struct PresetOptions {
  std::string preset;         // a ModelPreset name
  std::vector<int> tp = {1};  // TP sizes; live heads = heads / tp (must divide, and give 8..128)
  std::string arch = "sm_90a";
  // "" = the model's default pairings; else one of "v41_fp8+v41_fp8", "v41_fp8+v41_fp4", "v4_fp8+v4_fp8"
  // (any of SPEC §2.2's pairings may be asked for any model).
  std::string kv;
  int swa_page = 64;  // SPEC §1: presets use SWA pages of 64 slots unless told otherwise
};

const std::vector<ModelPreset>& model_presets();
const ModelPreset& find_preset(const std::string& name);  // throws kInvalidArgument listing the names

// Compressed page size of a ratio: 128 / ratio slots, at least 1 (ratio 128 gives 1-slot pages).
int compressed_page_for_ratio(int ratio);

// Parses "v41_fp8+v41_fp4" into (swa, comp) format ids; throws kInvalidArgument naming `--kv` otherwise.
std::pair<int, int> parse_kv_pairing(const std::string& text);

// The de-duplicated, ordered keys of a preset: for each TP size and pairing, the head-padded keys (one per
// compressed page size, one SWA-only), the swap-AB keys where SPEC §5 allows them (8, 16 or 32 live heads, a
// variant for the arch, the token's tiles within one portable cluster), and the kv_insert keys of every
// (format, page) a cache uses. Every key returned passes validate().
std::vector<CompileKey> preset_keys(const PresetOptions& options);

}  // namespace swapjit

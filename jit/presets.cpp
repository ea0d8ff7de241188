// presets.cpp: model presets (SPEC.md §1, §6). The numbers here are the model's, not a kernel's: the keys
// they produce go through CompileKey::validate() like any user key.
#include "jit/presets.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "jit/error.hpp"
#include "jit/kernel_family.hpp"

namespace swapjit {
namespace {

// Preset keys use the defaults of SPEC.md §6: chunk16 Q, MXFP8 o-fused output.
CompileKey decode_key(Family f, const std::string& arch, int heads, int window, int topk, int swa_fmt,
                      int comp_fmt, int swa_page, int comp_page) {
  return make_decode_key(f, arch, heads, window, topk, swa_fmt, comp_fmt, swa_page, comp_page, kQLayoutChunk16,
                         kOutMxfp8Ofused);
}

void add_unique(std::vector<CompileKey>& keys, const CompileKey& k) {
  if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  // NOTE: V4-Flash / V4-Pro ratio-128 layers have no indexer; we give them the model's index_topk as their
  // compressed list width like the ratio-4 layers (SPEC §1 fixes no other width). V4.1 formats are new
  // with V4.1, so the V4 models default to the v4_fp8 pairing only; --kv may still ask for any pairing.
  static const std::vector<ModelPreset> presets = {
      {"v4.1-flash",
       64,
       128,
       512,
       {2, 1},
       {{kFormatV41Fp8, kFormatV41Fp8}, {kFormatV41Fp8, kFormatV41Fp4}, {kFormatV4Fp8, kFormatV4Fp8}}},
      {"v4-flash", 64, 128, 512, {4, 128}, {{kFormatV4Fp8, kFormatV4Fp8}}},
      {"v4-pro", 128, 128, 1024, {4, 128}, {{kFormatV4Fp8, kFormatV4Fp8}}},
  };
  return presets;
}

const ModelPreset& find_preset(const std::string& name) {
  std::string names;
  for (const auto& p : model_presets()) {
    if (name == p.name) return p;
    names += names.empty() ? p.name : fmt::format(", {}", p.name);
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("--preset: unknown preset \"{}\" (known: {})", name, names));
}

int compressed_page_for_ratio(int ratio) {
  SWAPJIT_REQUIRE(ratio >= 1, ErrorCode::kInvalidArgument, "compress ratio must be >= 1");
  return std::max(1, 128 / ratio);
}

std::pair<int, int> parse_kv_pairing(const std::string& text) {
  const std::pair<int, int> allowed[] = {
      {kFormatV41Fp8, kFormatV41Fp8}, {kFormatV41Fp8, kFormatV41Fp4}, {kFormatV4Fp8, kFormatV4Fp8}};
  for (const auto& p : allowed)
    if (text == fmt::format("{}+{}", format_name(p.first), format_name(p.second))) return p;
  throw Error(
      ErrorCode::kInvalidArgument,
      fmt::format("--kv: \"{}\" is not a record pairing (v41_fp8+v41_fp8, v41_fp8+v41_fp4, v4_fp8+v4_fp8)",
                  text));
}

std::vector<CompileKey> preset_keys(const PresetOptions& o) {
  const ModelPreset& m = find_preset(o.preset);
  if (o.tp.empty()) throw Error(ErrorCode::kInvalidArgument, "--tp: no TP size given");
  std::vector<std::pair<int, int>> pairings = m.pairings;
  if (!o.kv.empty()) pairings = {parse_kv_pairing(o.kv)};
  std::vector<int> comp_pages;
  for (int r : m.compress_ratios) comp_pages.push_back(compressed_page_for_ratio(r));

  std::vector<CompileKey> keys;
  for (int tp : o.tp) {
    if (tp < 1 || m.heads % tp != 0)
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("--tp: {} does not divide the {} heads of {}", tp, m.heads, m.name));
    const int heads = m.heads / tp;
    for (const auto& [swa_fmt, comp_fmt] : pairings) {
      // topk 0 = the SWA-only layer; then one compressed key per page size the model's ratios need.
      std::vector<std::pair<int, int>> layers = {{0, 0}};
      for (int page : comp_pages) layers.push_back({m.topk, page});
      for (const auto& [topk, comp_page] : layers) {
        // Head-padded first: every step can fall back to it. Then swap-AB where SPEC §5 allows it.
        add_unique(keys, decode_key(Family::kHeadpadDecode, o.arch, heads, m.window, topk, swa_fmt, comp_fmt,
                                    o.swa_page, comp_page));
        // Layers of 64 or more heads: the head-padded keys of a half and a quarter of them (small steps).
        for (int g : {2, 4})
          if (const int h = headpad_split_heads(heads, g))
            add_unique(keys, decode_key(Family::kHeadpadDecode, o.arch, h, m.window, topk, swa_fmt, comp_fmt,
                                        o.swa_page, comp_page));
        // Small steps split each token's heads over two or four clusters, on the keys of fewer heads.
        if (swapab_eligible(heads, m.window, topk, o.arch))
          for (int h : {heads, swapab_split_heads(heads, 2), swapab_split_heads(heads, 4)})
            if (h > 0)
              add_unique(keys, decode_key(Family::kSwapabDecode, o.arch, h, m.window, topk, swa_fmt, comp_fmt,
                                          o.swa_page, comp_page));
      }
    }
  }
  // kv_insert does not depend on heads or TP: one key per (format, page) a cache of the model uses.
  for (const auto& [swa_fmt, comp_fmt] : pairings) {
    add_unique(keys, make_kv_insert_key(o.arch, swa_fmt, o.swa_page));
    for (int page : comp_pages) add_unique(keys, make_kv_insert_key(o.arch, comp_fmt, page));
  }
  for (const auto& k : keys) k.validate();
  return keys;
}

}  // namespace swapjit

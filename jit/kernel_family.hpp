// kernel_family.hpp: what each kernel family is (source file, entry point, which keys exist) and what a
// launch of one key needs. The launch numbers come from the family's traits header in kernels_src/,
// compiled into the host too, so they are never written twice.
#pragma once
#include <string>
#include <vector>

#include "jit/compile_key.hpp"

namespace swapjit {

struct FamilyInfo {
  Family family;
  const char* name;              // "swapab_decode"
  const char* source_file;       // the embedded source the prelude includes, e.g. "swapab_decode.cuh"
  const char* entry_expression;  // NVRTC name expression of the __global__ entry point (the portable tiling)
  // The entry points of the wide and mid tilings (LaunchPlan::wide_cluster, mid_cluster), extern "C" names in
  // the same module, resolved only for keys whose plan has that shape; nullptr for families without them.
  const char* wide_entry = nullptr;
  const char* mid_entry = nullptr;
};

const FamilyInfo& family_info(Family f);

// The launch plan of a key (block threads, CTAs per token or row, cluster size, dynamic shared memory).
LaunchPlan launch_plan(const CompileKey& key);

// SPEC.md §5: the swap-AB kernel runs one CTA per 64 SWA slots and per 128 compressed slots, and a
// token's CTAs must fit one portable cluster.
constexpr int kPortableClusterMax = 8;
constexpr int swapab_tiles(int window, int topk) { return ceil_div(window, 64) + ceil_div(topk, 128); }
// The live-head counts a swap-AB key exists for (N = 8, 16, 32 on the MMA's N side); the one rule the key
// validation, the layer's eligibility, the dispatch and the head splits share.
constexpr bool swapab_heads_supported(int live_heads) {
  return live_heads == 8 || live_heads == 16 || live_heads == 32;
}

// SPEC.md §5's build-time conditions for a layer to get swap-AB keys: the arch has a swap-AB variant, live
// heads are 8, 16 or 32 (8 since session 13, when its key first ran on the H200: as the split key of 16-head
// steps, 114/114 checks, and then as an 8-head layer's own), and the tiles fit one portable
// cluster. The per-step conditions (token count, list width, batch-invariant mode) are the runtime's.
bool swapab_eligible(int live_heads, int window, int topk, const std::string& arch);

// The heads of the swap-AB key a layer of `live_heads` heads runs its steps split over `groups` clusters a
// token on (DecodeParams.head_groups: every cluster softmaxes, exports and merges its share of the heads), or
// 0 when it has none: groups 2: 16 -> 8, 32 -> 16; groups 4: 32 -> 8 (the smallest key has 8 heads, one
// MXFP8 output group). Only for swapab_eligible layers.
int swapab_split_heads(int live_heads, int groups);

// The heads of the head-padded key a layer of `live_heads` heads runs its small steps on, split over `groups`
// clusters a token (DecodeParams.head_groups), or 0 when it has none: only layers of 64 or more heads, whose
// M tiles are full (groups 2: 64 -> 32, 128 -> 64; groups 4: 64 -> 16, 128 -> 32). Each cluster pads its
// share to 64 rows again: more MMA work, but a quarter (or half) of Q to load and of the partials to exchange
// and merge, which is what a small step waits for. At 16 and 32 heads the head-padded kernel keeps one cluster
// a token: the mapping swap-AB is compared against (issue 6).
int headpad_split_heads(int live_heads, int groups);

// Variant names that exist for a family on an arch ("wgmma" needs sm_90a; "mma" runs on any sm_90+).
std::vector<std::string> variants_for(Family f, const std::string& arch);

// The variant keys use for a family on an arch: "wgmma" on sm_90a when variants_for lists it, else "mma"
// (decode families); "simt" for kv_insert. Used by presets and the runtime, so both build the same keys.
// Throws Error(kUnsupported) when no variant exists for the arch.
std::string preferred_variant(Family f, const std::string& arch);

// The key a layer of this shape uses for decode family `f` on `arch`, with the arch's preferred variant;
// the compressed fields are none/0 on SWA-only layers (topk 0). Not validated (callers validate).
CompileKey make_decode_key(Family f, const std::string& arch, int heads, int window, int topk, int swa_format,
                           int comp_format, int swa_page, int comp_page, int q_layout, int out_layout);
// The kv_insert key that writes records of `format` into pages of `page` slots. Not validated.
CompileKey make_kv_insert_key(const std::string& arch, int format, int page);

}  // namespace swapjit

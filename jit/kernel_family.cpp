// kernel_family.cpp: the family table, launch plans from the kernels' own traits headers, and which
// variants exist. The traits headers are plain host C++20 too (constexpr functions over KeyShape), so the
// numbers a launch uses are the numbers the kernel was compiled with.
#include "jit/kernel_family.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "jit/error.hpp"

// NOTE: the traits headers are written by the kernel engineers and may be absent from a tree in progress.
// Without one, its family's launch_plan() throws kUnsupported instead of breaking the whole library build.
#if __has_include("kernels_src/swapab_traits.cuh")
#include "kernels_src/swapab_traits.cuh"
#define SWAPJIT_HAVE_SWAPAB_TRAITS 1
#endif
#if __has_include("kernels_src/headpad_traits.cuh")
#include "kernels_src/headpad_traits.cuh"
#define SWAPJIT_HAVE_HEADPAD_TRAITS 1
#endif
#if __has_include("kernels_src/kv_insert_traits.cuh")
#include "kernels_src/kv_insert_traits.cuh"
#define SWAPJIT_HAVE_KV_INSERT_TRAITS 1
#endif

namespace swapjit {
namespace {

constexpr FamilyInfo kFamilies[] = {
    {Family::kSwapabDecode, "swapab_decode", "swapab_decode.cuh", "&swapjit::swapab_decode_kernel",
     "swapjit_swapab_decode_kernel_wide", "swapjit_swapab_decode_kernel_mid"},
    {Family::kHeadpadDecode, "headpad_decode", "headpad_decode.cuh", "&swapjit::headpad_decode_kernel",
     "swapjit_headpad_decode_kernel_wide", nullptr},
    {Family::kKvInsert, "kv_insert", "kv_insert.cuh", "&swapjit::kv_insert_kernel"},
};

[[noreturn, maybe_unused]] void no_traits(const CompileKey& key, const char* header) {
  throw Error(ErrorCode::kUnsupported,
              fmt::format("launch_plan: kernels_src/{} is not part of this build, so family {} cannot launch",
                          header, family_name(key.family)),
              key.canonical_json());
}

void check_plan(const CompileKey& key, const LaunchPlan& p) {
  // A plan that the driver would reject is a traits bug; say so with the key instead of a launch error.
  if (p.threads < 1 || p.threads > 1024 || p.ctas_per_item < 1 || p.cluster < 1 || p.cluster > 16 ||
      p.smem_bytes < 0 || p.smem_bytes > 227 * 1024)
    throw Error(
        ErrorCode::kInternal,
        fmt::format("launch_plan: traits gave an impossible plan (threads {}, ctas/item {}, cluster {}, "
                    "smem {})",
                    p.threads, p.ctas_per_item, p.cluster, p.smem_bytes),
        key.canonical_json());
}

}  // namespace

const FamilyInfo& family_info(Family f) {
  for (const auto& info : kFamilies)
    if (info.family == f) return info;
  throw Error(ErrorCode::kInternal, fmt::format("family_info: unknown family {}", static_cast<int>(f)));
}

LaunchPlan launch_plan(const CompileKey& key) {
  const KeyShape k = key.shape();
  const int variant = parse_variant(key.variant);
  LaunchPlan plan{};
  switch (key.family) {
    case Family::kSwapabDecode:
#ifdef SWAPJIT_HAVE_SWAPAB_TRAITS
      plan = swapab_plan(k, variant);
      break;
#else
      no_traits(key, "swapab_traits.cuh");
#endif
    case Family::kHeadpadDecode:
#ifdef SWAPJIT_HAVE_HEADPAD_TRAITS
      plan = headpad_plan(k, variant);
      break;
#else
      no_traits(key, "headpad_traits.cuh");
#endif
    case Family::kKvInsert:
#ifdef SWAPJIT_HAVE_KV_INSERT_TRAITS
      plan = kv_insert_plan(k, variant);
      break;
#else
      no_traits(key, "kv_insert_traits.cuh");
#endif
  }
  check_plan(key, plan);
  return plan;
}

std::vector<std::string> variants_for(Family f, const std::string& arch) {
  const int sm = arch_sm(arch);
  switch (f) {
    case Family::kSwapabDecode:
      // "wgmma" (warpgroup MMA, sm_90a only) first where it exists; "mma" (mma.sync + clusters + DSMEM +
      // PDL) on any sm_90+.
      if (arch == "sm_90a") return {"wgmma", "mma"};
      if (sm >= 90) return {"mma"};
      return {};
    case Family::kHeadpadDecode:
      // "wgmma" on sm_90a (heads on M: m64n32 S, m64n256 P V), "mma" on any sm_90+ (the sm_100a build).
      if (arch == "sm_90a") return {"wgmma", "mma"};
      if (sm >= 90) return {"mma"};
      return {};
    case Family::kKvInsert:
      if (sm >= 0) return {"simt"};
      return {};
  }
  return {};
}

bool swapab_eligible(int live_heads, int window, int topk, const std::string& arch) {
  if (variants_for(Family::kSwapabDecode, arch).empty()) return false;
  if (!swapab_heads_supported(live_heads)) return false;
  return swapab_tiles(window, topk) <= kPortableClusterMax;
}

int swapab_split_heads(int live_heads, int groups) {
  if (!swapab_heads_supported(live_heads) || (groups != 2 && groups != 4) || live_heads % groups != 0)
    return 0;
  return swapab_heads_supported(live_heads / groups) ? live_heads / groups : 0;
}

int headpad_split_heads(int live_heads, int groups) {
  if (live_heads < 64 || (groups != 2 && groups != 4) || live_heads % groups != 0) return 0;
  const int h = live_heads / groups;
  return h == 16 || h == 32 || h == 64 ? h : 0;
}

std::string preferred_variant(Family f, const std::string& arch) {
  const auto vs = variants_for(f, arch);
  auto has = [&](const char* v) { return std::find(vs.begin(), vs.end(), v) != vs.end(); };
  if (f == Family::kKvInsert) {
    if (has("simt")) return "simt";
  } else {
    if (arch == "sm_90a" && has("wgmma")) return "wgmma";
    if (has("mma")) return "mma";
  }
  throw Error(ErrorCode::kUnsupported,
              fmt::format("no {} kernel variant exists for arch \"{}\"", family_name(f), arch));
}

CompileKey make_decode_key(Family f, const std::string& arch, int heads, int window, int topk, int swa_format,
                           int comp_format, int swa_page, int comp_page, int q_layout, int out_layout) {
  CompileKey k;
  k.family = f;
  k.variant = preferred_variant(f, arch);
  k.arch = arch;
  k.live_heads = heads;
  k.window = window;
  k.topk = topk;
  k.swa_format = swa_format;
  k.comp_format = topk > 0 ? comp_format : kFormatNone;
  k.swa_page = swa_page;
  k.comp_page = topk > 0 ? comp_page : 0;
  k.q_layout = q_layout;
  k.out_layout = out_layout;
  return k;
}

CompileKey make_kv_insert_key(const std::string& arch, int format, int page) {
  CompileKey k;
  k.family = Family::kKvInsert;
  k.variant = preferred_variant(Family::kKvInsert, arch);
  k.arch = arch;
  k.swa_format = format;
  k.swa_page = page;
  return k;
}

}  // namespace swapjit

// test_dispatch.cpp: SPEC.md §5's dispatch rule case by case, and the keys a layer registers: equal to what
// forward() would launch (key_for) and to what `swapjit precompile --preset` warms (jit/presets.hpp).
#include <algorithm>
#include <filesystem>
#include <string>

#include "jit/error.hpp"
#include "jit/presets.hpp"
#include "runtime/dispatch.hpp"
#include "runtime/service_impl.hpp"
#include "swapjit/decode_attention.hpp"
#include "tests/catch.hpp"

using namespace swapjit;

namespace {

struct Case {
  const char* what;
  LayerDispatch layer;
  int tokens, swa_width;
  KernelChoice expect;
  const char* reason_has;  // a word the reason must contain
};

// max_tokens: the shipped default unless a case sets it.
LayerDispatch layer(int heads, int window, int topk, bool arch = true, bool bi = false,
                    int max_tokens = LayerDispatch{}.swapab_max_tokens) {
  LayerDispatch l;
  l.arch_has_swapab = arch;
  l.live_heads = heads;
  l.window = window;
  l.topk = topk;
  l.batch_invariant = bi;
  l.swapab_max_tokens = max_tokens;
  return l;
}

ServiceOptions temp_options(const char* name) {
  ServiceOptions o;
  const auto dir = std::filesystem::temp_directory_path() / (std::string("swapjit_test_") + name);
  o.store.roots = {dir.string()};
  o.jobs = 1;
  return o;
}

}  // namespace

TEST_CASE("dispatch table: each case selects the kernel SPEC 5 names, for the stated reason", "[runtime]") {
  const KernelChoice S = KernelChoice::kSwapab, H = KernelChoice::kHeadpad;
  const Case cases[] = {
      {"TP4 V4.1 compressed layer, 1 token", layer(16, 128, 512), 1, 128, S, "every condition"},
      {"TP2, 16 tokens", layer(32, 128, 512), 16, 128, S, "every condition"},
      {"TP4, 64 tokens (the 16-head default cap)", layer(16, 128, 512), 64, 128, S, "every condition"},
      {"TP2, 64 tokens (the 32-head default cap)",
       layer(32, 128, 512, true, false, default_swapab_max_tokens(32)), 64, 128, S, "every condition"},
      {"TP2, 65 tokens: over the 32-head cap",
       layer(32, 128, 512, true, false, default_swapab_max_tokens(32)), 65, 128, H, "swapab_max_tokens"},
      {"SWA-only layer", layer(16, 128, 0), 3, 128, S, "every condition"},
      {"65 tokens: over swapab_max_tokens", layer(16, 128, 512), 65, 128, H, "swapab_max_tokens"},
      {"17 tokens under a lowered cap of 16", layer(16, 128, 512, true, false, 16), 17, 128, H,
       "swapab_max_tokens"},
      {"TP1: 64 heads", layer(64, 128, 512), 1, 128, H, "8, 16 or 32"},
      {"TP8: 8 heads", layer(8, 128, 512), 1, 128, S, "every condition"},
      {"TP8: 8 heads, 64 tokens", layer(8, 128, 512), 64, 128, S, "every condition"},
      {"V4-Pro topk 1024: 10 tiles > 8", layer(16, 128, 1024), 1, 128, H, "portable cluster"},
      {"topk 768: exactly 8 tiles", layer(16, 128, 768), 1, 128, S, "every condition"},
      {"SWA list narrower than the window", layer(16, 128, 512), 1, 64, H, "window"},
      {"batch-invariant mode", layer(16, 128, 512, true, true), 1, 128, H, "batch-invariant"},
      {"arch without a swap-AB variant", layer(16, 128, 512, false), 1, 128, H, "architecture"},
      {"raised swapab_max_tokens (128)", layer(32, 128, 512, true, false, 128), 100, 128, S,
       "every condition"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const DispatchDecision d = dispatch_step(c.layer, c.tokens, c.swa_width);
    CHECK(d.choice == c.expect);
    REQUIRE(d.reason != nullptr);
    CHECK(std::string(d.reason).find(c.reason_has) != std::string::npos);
  }
}

TEST_CASE("a layer registers swap-AB only when the static conditions hold; key_for matches", "[runtime]") {
  Service service(temp_options("dispatch"));
  REQUIRE(service.arch() == "sm_90a");  // no driver here (or the test would run on the device's arch)

  LayerConfig c;
  c.live_heads = 16;
  DecodeAttention tp4(service, c);
  CHECK(tp4.choose(1, 128) == KernelChoice::kSwapab);
  CHECK(tp4.choose(kDefaultSwapabMaxTokens, 128) == KernelChoice::kSwapab);
  CHECK(tp4.choose(kDefaultSwapabMaxTokens + 1, 128) == KernelChoice::kHeadpad);
  CHECK(tp4.key_for(KernelChoice::kSwapab).family == Family::kSwapabDecode);
  CHECK(tp4.key_for(KernelChoice::kHeadpad).family == Family::kHeadpadDecode);
  // swapab, its split key (8 heads), headpad, one kv_insert (SWA and compressed caches share a key)
  CHECK(tp4.keys().size() == 4);

  c.live_heads = 32;  // the measured cap is per head count (decode_attention.hpp)
  DecodeAttention tp2(service, c);
  CHECK(tp2.choose(kDefaultSwapabMaxTokens32Heads, 128) == KernelChoice::kSwapab);
  CHECK(tp2.choose(kDefaultSwapabMaxTokens32Heads + 1, 128) == KernelChoice::kHeadpad);

  c.live_heads = 64;
  DecodeAttention tp1(service, c);
  CHECK(tp1.choose(1, 128) == KernelChoice::kHeadpad);
  CHECK_THROWS_AS(tp1.key_for(KernelChoice::kSwapab), Error);
  CHECK_THROWS_AS(tp1.key_for(KernelChoice::kAuto), Error);

  c.live_heads = 12;
  CHECK_THROWS_AS(DecodeAttention(service, c), Error);
  try {
    DecodeAttention bad(service, c);
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInvalidArgument);
    CHECK(std::string(e.what()).find("live_heads") != std::string::npos);
  }
}

TEST_CASE("for every preset's layers: registered keys = key_for(choose()) and are preset keys", "[runtime]") {
  Service service(temp_options("presets"));
  int layers_checked = 0;
  for (const ModelPreset& m : model_presets()) {
    for (int tp : {1, 2, 4, 8, 16}) {
      if (m.heads % tp != 0 || m.heads / tp < 8 || m.heads / tp > 128) continue;
      PresetOptions po;
      po.preset = m.name;
      po.tp = {tp};
      po.arch = service.arch();
      const std::vector<CompileKey> preset = preset_keys(po);
      std::vector<std::pair<int, int>> comp = {{0, 0}};
      for (int r : m.compress_ratios) comp.push_back({m.topk, compressed_page_for_ratio(r)});
      for (const auto& [swa_fmt, comp_fmt] : m.pairings)
        for (const auto& [topk, page] : comp) {
          LayerConfig c;
          c.live_heads = m.heads / tp;
          c.window = m.window;
          c.topk = topk;
          c.swa_format = swa_fmt;
          c.comp_format = topk > 0 ? comp_fmt : kFormatNone;
          c.swa_page = 64;
          c.comp_page = page;
          DecodeAttention layer(service, c);
          INFO(m.name << " tp" << tp << " topk " << topk << " page " << page);
          for (const CompileKey& k : layer.keys()) {
            INFO(k.canonical_json());
            CHECK(std::find(preset.begin(), preset.end(), k) != preset.end());
          }
          for (int tokens : {1, 5, 16, 17, 64}) {
            const KernelChoice ch = layer.choose(tokens, m.window);
            const CompileKey& launched = layer.key_for(ch);
            CHECK(std::find(layer.keys().begin(), layer.keys().end(), launched) != layer.keys().end());
            CHECK(launched.live_heads == c.live_heads);
            CHECK(launched.topk == topk);
            CHECK(launched.comp_page == page);
          }
          CHECK(std::find(layer.keys().begin(), layer.keys().end(), layer.insert_key(true)) != layer.keys().end());
          ++layers_checked;
        }
    }
  }
  CHECK(layers_checked >= 10);
  // The service holds the union, without duplicates.
  auto& reg = service.impl().registered;
  for (size_t i = 0; i < reg.size(); ++i)
    for (size_t j = i + 1; j < reg.size(); ++j) CHECK_FALSE(reg[i] == reg[j]);
}

TEST_CASE("SWAPAB_MAX_TOKENS: measured per head count unless the service options set one", "[runtime]") {
  CHECK(default_swapab_max_tokens(16) == 64);
  CHECK(default_swapab_max_tokens(8) == 64);
  CHECK(default_swapab_max_tokens(32) == 64);
  ServiceOptions o;
  CHECK(o.swapab_max_tokens == 0);
  CHECK(swapab_max_tokens_for(o, 32) == 64);
  CHECK(swapab_max_tokens_for(o, 16) == 64);
  o.swapab_max_tokens = 48;  // an explicit cap applies to every layer
  CHECK(swapab_max_tokens_for(o, 32) == 48);
  CHECK(swapab_max_tokens_for(o, 16) == 48);

  ServiceOptions so = temp_options("dispatch_cap");
  so.swapab_max_tokens = 64;
  Service service(so);
  LayerConfig c;
  c.live_heads = 32;
  DecodeAttention tp2(service, c);
  CHECK(tp2.choose(64, 128) == KernelChoice::kSwapab);
  CHECK(tp2.choose(65, 128) == KernelChoice::kHeadpad);
}

TEST_CASE("split steps: swap-AB layers of 16 and 32 heads split small steps' heads over two or four clusters",
          "[runtime]") {
  LayerDispatch l;
  l.arch_has_swapab = true, l.live_heads = 32, l.window = 128, l.topk = 512;
  l.has_split = true, l.split_max_tokens = 8;
  for (int t : {1, 8}) {
    const DispatchDecision d = dispatch_step(l, t, 128);
    CHECK(d.choice == KernelChoice::kSwapab);
    CHECK(d.head_groups == 2);
    CHECK(std::string(d.reason).find("two clusters") != std::string::npos);
  }
  CHECK(dispatch_step(l, 9, 128).head_groups == 1);
  CHECK(dispatch_step(l, 200, 128).choice == KernelChoice::kHeadpad);
  CHECK(dispatch_step(l, 1, 100).head_groups == 1);  // headpad (list width): no split
  l.split_max_tokens = 0;
  CHECK(swapab_head_groups(l, 1) == 1);
  l.split_max_tokens = 8, l.has_split = false;
  CHECK(swapab_head_groups(l, 1) == 1);
  l.has_split = true, l.has_quarter = true, l.split4_max_tokens = 2;  // four clusters first, then two
  CHECK(swapab_head_groups(l, 1) == 4);
  CHECK(swapab_head_groups(l, 2) == 4);
  CHECK(swapab_head_groups(l, 3) == 2);
  CHECK(std::string(dispatch_step(l, 1, 128).reason).find("four clusters") != std::string::npos);
  CHECK(dispatch_step(l, 2, 128).head_groups == 4);
  l.has_quarter = false;
  CHECK(swapab_head_groups(l, 1) == 2);
  // The measured extra split points: that one token count past the caps, not the counts between.
  l.has_quarter = true, l.split4_max_tokens = 1, l.split4_also_at = 4, l.split_max_tokens = 3, l.split_also_at = 8;
  CHECK(swapab_head_groups(l, 1) == 4);
  CHECK(swapab_head_groups(l, 2) == 2);
  CHECK(swapab_head_groups(l, 4) == 4);
  CHECK(swapab_head_groups(l, 5) == 1);
  CHECK(swapab_head_groups(l, 8) == 2);
  CHECK(swapab_head_groups(l, 9) == 1);
  CHECK(std::string(dispatch_step(l, 4, 128).reason).find("four clusters") != std::string::npos);
  l.has_quarter = false;
  CHECK(swapab_head_groups(l, 4) == 1);  // no quarter key: the extra four-way point does not apply
  l.has_split = false;
  CHECK(swapab_head_groups(l, 8) == 1);
  l.has_split = true, l.split4_also_at = 0, l.split_also_at = 0, l.split_max_tokens = 8;

  CHECK(swapab_split_heads(16, 2) == 8);
  CHECK(swapab_split_heads(16, 4) == 0);  // no 4-head key: 8 heads is the smallest (one MXFP8 group)
  CHECK(swapab_split_heads(32, 2) == 16);
  CHECK(swapab_split_heads(32, 4) == 8);
  CHECK(swapab_split_heads(32, 3) == 0);
  CHECK(swapab_split_heads(64, 2) == 0);
  // The head-padded split: layers of 64 or more heads only (full M tiles).
  CHECK(headpad_split_heads(64, 2) == 32);
  CHECK(headpad_split_heads(64, 4) == 16);
  CHECK(headpad_split_heads(128, 2) == 64);
  CHECK(headpad_split_heads(128, 4) == 32);
  CHECK(headpad_split_heads(32, 2) == 0);
  CHECK(headpad_split_heads(16, 2) == 0);
  CHECK(headpad_split_heads(64, 3) == 0);
  // The measured table: only 64 and 128 heads, topk 512 or 0, T = 1 .. kHeadpadGroupsTableTokens.
  CHECK(default_headpad_head_groups(64, 512, 1) == 4);
  CHECK(default_headpad_head_groups(64, 512, 4) == 1);
  CHECK(default_headpad_head_groups(64, 0, 16) == 4);
  CHECK(default_headpad_head_groups(64, 0, 17) == 2);
  CHECK(default_headpad_head_groups(128, 512, 1) == 4);
  CHECK(default_headpad_head_groups(128, 1024, 1) == 4);  // V4-Pro's compressed layers
  CHECK(default_headpad_head_groups(128, 1024, 7) == 2);
  CHECK(default_headpad_head_groups(128, 1024, 8) == 1);
  CHECK(default_headpad_head_groups(64, 2048, 1) == 1);  // not measured
  CHECK(default_headpad_head_groups(32, 0, 1) == 1);
  CHECK(default_headpad_head_groups(64, 512, kHeadpadGroupsTableTokens + 1) == 1);
  for (const char* row : {kHeadpadGroups64Compressed, kHeadpadGroups64SwaOnly, kHeadpadGroups128Compressed,
                          kHeadpadGroups128SwaOnly, kHeadpadGroups64Topk1024, kHeadpadGroups128Topk1024})
    for (int i = 0; i < kHeadpadGroupsTableTokens; ++i) CHECK((row[i] == '1' || row[i] == '2' || row[i] == '4'));
  CHECK(headpad_head_groups_for(ServiceOptions{}, 64, 512, 1) == 4);  // both caps -1: the table
  LayerDispatch hp;
  hp.live_heads = 64;
  hp.headpad_split4_max_tokens = 0;
  CHECK(headpad_head_groups(hp, 1) == 1);  // no split keys
  hp.has_headpad_split = hp.has_headpad_quarter = true;
  CHECK(headpad_head_groups(hp, 1) == 1);  // caps 0 and -1: never
  hp.headpad_split4_max_tokens = 2, hp.headpad_split_max_tokens = 4;
  CHECK(headpad_head_groups(hp, 1) == 4);
  CHECK(headpad_head_groups(hp, 2) == 4);
  CHECK(headpad_head_groups(hp, 3) == 2);
  CHECK(headpad_head_groups(hp, 4) == 2);
  CHECK(headpad_head_groups(hp, 5) == 1);
  hp.has_headpad_quarter = false;
  CHECK(headpad_head_groups(hp, 1) == 1);  // four asked, no quarter key: unsplit
  CHECK(headpad_head_groups(hp, 3) == 2);
  const DispatchDecision dh = dispatch_step(hp, 3, 128);
  CHECK(dh.choice == KernelChoice::kHeadpad);
  CHECK(dh.head_groups == 2);
  CHECK(default_swapab_split4_max_tokens(32, 512) == kDefaultSwapabSplit4MaxTokens32Heads);
  CHECK(default_swapab_split4_max_tokens(32, 0) == kDefaultSwapabSplit4MaxTokensSwaOnly);
  CHECK(default_swapab_split4_max_tokens(16, 512) == 0);
  CHECK(default_swapab_split_max_tokens(16, 512) == kDefaultSwapabSplitMaxTokens);
  CHECK(default_swapab_split_max_tokens(32, 512) == kDefaultSwapabSplitMaxTokens32Heads);
  CHECK(default_swapab_split_max_tokens(32, 0) == kDefaultSwapabSplitMaxTokensSwaOnly);
  CHECK(default_swapab_split_max_tokens(16, 0) == kDefaultSwapabSplitMaxTokensSwaOnly);
  CHECK(default_swapab_split_max_tokens(64, 512) == 0);
  ServiceOptions o;
  CHECK(o.swapab_split_max_tokens == -1);
  CHECK(swapab_split_max_tokens_for(o, 32, 512) == kDefaultSwapabSplitMaxTokens32Heads);
  o.swapab_split_max_tokens = 0;  // never
  CHECK(swapab_split_max_tokens_for(o, 32, 512) == 0);
  o.swapab_split_max_tokens = 3;
  CHECK(swapab_split_max_tokens_for(o, 16, 512) == 3);
  CHECK(o.swapab_split4_max_tokens == -1);
  CHECK(swapab_split4_max_tokens_for(o, 32, 512) == kDefaultSwapabSplit4MaxTokens32Heads);
  o.swapab_split4_max_tokens = 0;
  CHECK(swapab_split4_max_tokens_for(o, 32, 512) == 0);
  // The extra points come with the default caps only; a cap set by the user means exactly that cap.
  CHECK(default_swapab_split_also_at(16, 512) == kDefaultSwapabSplitAlsoAt16Heads);
  CHECK(default_swapab_split_also_at(16, 0) == 0);
  CHECK(default_swapab_split_also_at(32, 512) == 0);
  CHECK(default_swapab_split4_also_at(32, 512) == kDefaultSwapabSplit4AlsoAt32Heads);
  CHECK(default_swapab_split4_also_at(32, 0) == 0);
  CHECK(swapab_split4_also_at_for(o, 32, 512) == 0);  // split4 cap set above
  CHECK(swapab_split_also_at_for(o, 16, 512) == 0);   // split cap set above
  CHECK(swapab_split_also_at_for(ServiceOptions{}, 16, 512) == kDefaultSwapabSplitAlsoAt16Heads);
  CHECK(swapab_split4_also_at_for(ServiceOptions{}, 32, 512) == kDefaultSwapabSplit4AlsoAt32Heads);

  // The layer registers the keys of half and a quarter of its heads beside its own; they differ in
  // live_heads only.
  Service service(temp_options("split"));
  LayerConfig c;
  c.live_heads = 32;
  DecodeAttention tp2(service, c);
  for (int h : {16, 8}) {
    CompileKey part = tp2.key_for(KernelChoice::kSwapab);
    part.live_heads = h;
    CHECK(std::find(tp2.keys().begin(), tp2.keys().end(), part) != tp2.keys().end());
  }
  CHECK(tp2.launch_key(kDefaultSwapabSplit4MaxTokens32Heads, 128).live_heads == 8);
  CHECK(tp2.launch_key(kDefaultSwapabSplit4MaxTokens32Heads + 1, 128).live_heads == 16);
  CHECK(tp2.launch_key(kDefaultSwapabSplit4AlsoAt32Heads, 128).live_heads == 8);  // 16 clusters, portable shape
  CHECK(tp2.launch_key(kDefaultSwapabSplit4AlsoAt32Heads + 1, 128).live_heads == 16);
  {
    LayerConfig c16 = c;
    c16.live_heads = 16;
    DecodeAttention tp4(service, c16);
    CHECK(tp4.launch_key(kDefaultSwapabSplitMaxTokens, 128).live_heads == 8);
    CHECK(tp4.launch_key(kDefaultSwapabSplitMaxTokens + 1, 128).live_heads == 16);
    CHECK(tp4.launch_key(kDefaultSwapabSplitAlsoAt16Heads, 128).live_heads == 8);
    CHECK(tp4.launch_key(kDefaultSwapabSplitAlsoAt16Heads + 1, 128).live_heads == 16);
  }
  CHECK(std::string(tp2.explain_choice(kDefaultSwapabSplit4MaxTokens32Heads + 1, 128)).find("two clusters") !=
        std::string::npos);
  CHECK(std::string(tp2.explain_choice(kDefaultSwapabSplitMaxTokens32Heads + 1, 128)).find("two clusters") ==
        std::string::npos);
  c.topk = 0;  // SWA-only: its own cap
  DecodeAttention swa(service, c);
  CHECK(std::string(swa.explain_choice(kDefaultSwapabSplitMaxTokensSwaOnly, 128)).find("two clusters") !=
        std::string::npos);
  CHECK(swa.launch_key(kDefaultSwapabSplit4MaxTokensSwaOnly, 128).live_heads == 8);
  CHECK(swa.launch_key(kDefaultSwapabSplit4MaxTokensSwaOnly + 1, 128).live_heads == 16);
  CHECK(swa.launch_key(kDefaultSwapabSplitMaxTokensSwaOnly + 1, 128).live_heads == 32);
  c.topk = 512;
  c.live_heads = 16;  // 16 -> two clusters of 8 heads, up to its own cap
  ServiceOptions so = temp_options("split16");
  so.swapab_split_max_tokens = 0;  // never
  Service service16(so);
  DecodeAttention tp4(service16, c);
  DecodeAttention tp4_default(service, c);
  CHECK(tp4.launch_key(1, 128) == tp4.key_for(KernelChoice::kSwapab));
  CHECK(std::string(tp4.explain_choice(1, 128)).find("two clusters") == std::string::npos);
  CHECK(tp4_default.launch_key(kDefaultSwapabSplitMaxTokens, 128).live_heads == 8);
  CHECK(tp4_default.launch_key(kDefaultSwapabSplitMaxTokens + 1, 128).live_heads == 16);
  c.live_heads = 64;  // no swap-AB; the head-padded keys of 64, 32 and 16 heads
  DecodeAttention tp1(service, c);
  for (const CompileKey& k : tp1.keys()) CHECK(k.family != Family::kSwapabDecode);
  CHECK(tp1.keys().size() == 4);  // headpad 64, 32, 16, kv_insert (one key: both caches' format and page)
  // The measured table (default_headpad_head_groups): T = 1 on four clusters, 2 on two, 4 on one.
  CHECK(tp1.launch_key(1, 128).live_heads == 16);
  CHECK(tp1.launch_key(2, 128).live_heads == 32);
  CHECK(tp1.launch_key(4, 128) == tp1.key_for(KernelChoice::kHeadpad));
  CHECK(tp1.launch_key(8, 128).live_heads == 32);
  CHECK(tp1.launch_key(kHeadpadGroupsTableTokens + 1, 128) == tp1.key_for(KernelChoice::kHeadpad));
  ServiceOptions sh = temp_options("headpad-split");
  sh.headpad_split4_max_tokens = 1, sh.headpad_split_max_tokens = 2;
  Service service_hp(sh);
  DecodeAttention tp1_split(service_hp, c);
  CHECK(tp1_split.launch_key(1, 128).live_heads == 16);
  CHECK(tp1_split.launch_key(2, 128).live_heads == 32);
  CHECK(tp1_split.launch_key(3, 128).live_heads == 64);
  CHECK(tp1_split.launch_key(1, 128).family == Family::kHeadpadDecode);
}

// test_c_api.cpp: the C API (include/swapjit/swapjit_c.h): statuses mirror ErrorCode, errors leave their
// text in swapjit_last_error(), and without a driver every GPU-needing call returns SWAPJIT_NO_DRIVER.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "jit/compile_key.hpp"
#include "swapjit/decode_attention.hpp"
#include "swapjit/swapjit_c.h"
#include "tests/catch.hpp"

TEST_CASE("C API: handles, layer keys, errors; no driver -> SWAPJIT_NO_DRIVER", "[runtime]") {
  CHECK(std::string(swapjit_version()).size() >= 5);
  CHECK(std::string(swapjit_status_name(SWAPJIT_NO_DRIVER)) == "no_driver");
  CHECK(std::string(swapjit_status_name(SWAPJIT_OK)) == "ok");

  swapjit_service_options o;
  swapjit_service_options_init(&o);
  const std::string dir = (std::filesystem::temp_directory_path() / "swapjit_test_capi").string();
  o.cache_dirs = dir.c_str();
  o.arch = "sm_90a";
  swapjit_service_t svc = nullptr;
  REQUIRE(swapjit_service_create(&o, &svc) == SWAPJIT_OK);
  REQUIRE(svc != nullptr);
  char arch[16];
  REQUIRE(swapjit_service_arch(svc, arch, sizeof(arch)) == SWAPJIT_OK);
  CHECK(std::string(arch) == "sm_90a");

  swapjit_layer_config c;
  swapjit_layer_config_init(&c);
  c.live_heads = 12;
  swapjit_layer_t layer = nullptr;
  CHECK(swapjit_layer_create(svc, &c, &layer) == SWAPJIT_INVALID_ARGUMENT);
  CHECK(layer == nullptr);
  CHECK(std::string(swapjit_last_error()).find("live_heads") != std::string::npos);
  CHECK(swapjit_layer_create(svc, nullptr, &layer) == SWAPJIT_INVALID_ARGUMENT);

  c.live_heads = 16;
  REQUIRE(swapjit_layer_create(svc, &c, &layer) == SWAPJIT_OK);
  int needed = 0;
  CHECK(swapjit_layer_keys_json(layer, nullptr, 0, &needed) == SWAPJIT_OK);
  REQUIRE(needed > 2);
  std::string buf(needed, '\0');
  CHECK(swapjit_layer_keys_json(layer, buf.data(), needed, nullptr) == SWAPJIT_OK);
  const auto keys = nlohmann::json::parse(buf.c_str());
  REQUIRE(keys.is_array());
  CHECK(keys.size() == 4);  // swapab, its 8-head split key, headpad, kv_insert
  CHECK(swapjit::CompileKey::from_json(keys[0]).arch == "sm_90a");
  CHECK(swapjit_layer_choose(layer, 1, 128) == SWAPJIT_CHOICE_SWAPAB);
  // options_init leaves every cap at its measured default: swap-AB to 64 tokens at 16 heads.
  CHECK(swapjit_layer_choose(layer, 64, 128) == SWAPJIT_CHOICE_SWAPAB);
  CHECK(swapjit_layer_choose(layer, 65, 128) == SWAPJIT_CHOICE_HEADPAD);
  // The key a step launches: the 8-head split key up to the default split cap, the layer's own past it.
  auto launch_heads = [&](swapjit_layer_t l, int tokens) {
    int n = 0;
    REQUIRE(swapjit_layer_launch_key_json(l, tokens, 128, nullptr, 0, &n) == SWAPJIT_OK);
    std::string b(n, '\0');
    REQUIRE(swapjit_layer_launch_key_json(l, tokens, 128, b.data(), n, nullptr) == SWAPJIT_OK);
    return swapjit::CompileKey::from_json(nlohmann::json::parse(b.c_str())).live_heads;
  };
  CHECK(launch_heads(layer, 1) == 8);
  CHECK(launch_heads(layer, swapjit::kDefaultSwapabSplitMaxTokens + 1) == 16);
  CHECK(swapjit_layer_launch_key_json(nullptr, 1, 128, nullptr, 0, &needed) == SWAPJIT_INVALID_ARGUMENT);
  {
    // -1: never split (the C struct's 0 is the default); a cap: that cap.
    swapjit_service_options o2;
    swapjit_service_options_init(&o2);
    CHECK(o2.swapab_max_tokens == 0);
    CHECK(o2.swapab_split_max_tokens == 0);
    CHECK(o2.swapab_split4_max_tokens == 0);
    o2.cache_dirs = dir.c_str();
    o2.arch = "sm_90a";
    o2.swapab_split_max_tokens = 2;
    o2.swapab_split4_max_tokens = -1;
    swapjit_service_t svc2 = nullptr;
    REQUIRE(swapjit_service_create(&o2, &svc2) == SWAPJIT_OK);
    swapjit_layer_config c32 = c;
    c32.live_heads = 32;
    swapjit_layer_t l32 = nullptr;
    REQUIRE(swapjit_layer_create(svc2, &c32, &l32) == SWAPJIT_OK);
    CHECK(launch_heads(l32, 1) == 16);  // four clusters never: two
    CHECK(launch_heads(l32, 2) == 16);
    CHECK(launch_heads(l32, 3) == 32);
    swapjit_layer_destroy(l32);
    swapjit_service_destroy(svc2);
  }
  {
    // The head-padded split of a 64-head layer: both 0, the measured table (four clusters of the 16-head key
    // at T = 1, two of 32 at T = 2, one at T = 4); set, caps (four never, two up to T = 3).
    swapjit_service_options o3;
    swapjit_service_options_init(&o3);
    CHECK(o3.headpad_split_max_tokens == 0);
    CHECK(o3.headpad_split4_max_tokens == 0);
    o3.cache_dirs = dir.c_str();
    o3.arch = "sm_90a";
    swapjit_layer_config c64 = c;
    c64.live_heads = 64;
    const auto heads_at = [&](const swapjit_service_options& opts, std::initializer_list<int> tokens) {
      swapjit_service_t svc = nullptr;
      REQUIRE(swapjit_service_create(&opts, &svc) == SWAPJIT_OK);
      swapjit_layer_t l64 = nullptr;
      REQUIRE(swapjit_layer_create(svc, &c64, &l64) == SWAPJIT_OK);
      std::vector<int> heads;
      for (int t : tokens) heads.push_back(launch_heads(l64, t));
      swapjit_layer_destroy(l64);
      swapjit_service_destroy(svc);
      return heads;
    };
    CHECK(heads_at(o3, {1, 2, 4}) == std::vector<int>{16, 32, 64});
    o3.headpad_split4_max_tokens = -1;
    o3.headpad_split_max_tokens = 3;
    CHECK(heads_at(o3, {1, 3, 4}) == std::vector<int>{32, 32, 64});
  }

  swapjit_decode_step st;
  swapjit_decode_step_init(&st);
  CHECK(swapjit_forward(layer, &st, nullptr, SWAPJIT_CHOICE_AUTO) == SWAPJIT_INVALID_ARGUMENT);
  CHECK(std::string(swapjit_last_error()).find("num_tokens") != std::string::npos);
  CHECK(swapjit_forward(layer, &st, nullptr, 7) == SWAPJIT_INVALID_ARGUMENT);
  CHECK(swapjit_forward(nullptr, &st, nullptr, 0) == SWAPJIT_INVALID_ARGUMENT);

  if (swapjit_has_driver()) {
    WARN("a CUDA driver is present: the no-driver statuses are not checked here");
  } else {
    CHECK(std::string(swapjit_last_error()).find("libcuda.so.1") != std::string::npos);
    // A shape-valid step: it fails on the driver, not on the shapes, and compiles nothing.
    auto p = [](uintptr_t v) { return reinterpret_cast<void*>(v); };
    st.num_tokens = 2;
    st.q = p(0x1000);
    st.q_token_stride = 64 * 512;
    st.positions = static_cast<const int64_t*>(p(0x2000));
    st.cos_sin = static_cast<const float*>(p(0x3000));
    st.max_pos = 100;
    st.swa_slots = static_cast<const int32_t*>(p(0x4000));
    st.swa_lens = static_cast<const int32_t*>(p(0x5000));
    st.swa_width = 128;
    st.comp_slots = static_cast<const int32_t*>(p(0x6000));
    st.comp_lens = static_cast<const int32_t*>(p(0x7000));
    st.comp_width = 512;
    st.swa_cache = swapjit_cache_ref{p(0x8000), 64 * 584, 2};
    st.comp_cache = swapjit_cache_ref{p(0x9000), 64 * 584, 2};
    st.out_data = p(0xa000);
    st.out_scale = p(0xb000);
    st.n_groups_alloc = 2;
    st.n_total = 2;
    CHECK(swapjit_forward(layer, &st, nullptr, SWAPJIT_CHOICE_AUTO) == SWAPJIT_NO_DRIVER);
    CHECK(std::string(swapjit_last_error()).find("no GPU driver") != std::string::npos);
    swapjit_insert_step ins;
    swapjit_insert_step_init(&ins);
    ins.num_rows = 1;
    ins.rows = p(0x1000);
    ins.slots = static_cast<const int64_t*>(p(0x2000));
    ins.cache = st.swa_cache;
    CHECK(swapjit_insert(layer, &ins, 1, nullptr) == SWAPJIT_NO_DRIVER);
    swapjit_service_t empty = nullptr;
    REQUIRE(swapjit_service_create(&o, &empty) == SWAPJIT_OK);
    CHECK(swapjit_service_warmup(empty) == SWAPJIT_NO_DRIVER);  // nothing to compile, then no driver
    CHECK(std::string(swapjit_last_error()).find("libcuda.so.1") != std::string::npos);
    swapjit_service_destroy(empty);
  }
  CHECK(swapjit_service_seal(svc) == SWAPJIT_OK);
  swapjit_layer_destroy(layer);
  swapjit_service_destroy(svc);
}

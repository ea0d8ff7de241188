// test_runtime_nodriver.cpp: on a machine without libcuda.so.1 (CI, this build box) every GPU-needing call
// throws kNoDriver with its reason, while keys are still built and compiled; plus the driver-free pieces of
// the runtime (arch names, launch shapes, the load-time fit checks).
#include <filesystem>
#include <string>

#include "runtime/device_info.hpp"
#include "runtime/driver.hpp"
#include "runtime/launcher.hpp"
#include "runtime/module_cache.hpp"
#include "runtime/service_impl.hpp"
#include "tests/catch.hpp"

using namespace swapjit;

namespace {
bool real_driver_present() {
  if (!has_driver()) return false;
  WARN("a CUDA driver is present: the no-driver checks are skipped on this machine");
  return true;
}
}  // namespace

TEST_CASE("without a driver: driver() and device calls throw kNoDriver with the reason", "[runtime]") {
  if (real_driver_present()) return;
  CHECK(no_driver_reason().find("libcuda.so.1") != std::string::npos);
  try {
    driver();
    FAIL("driver() must throw without libcuda.so.1");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kNoDriver);
    CHECK(std::string(e.what()).find("no GPU driver") != std::string::npos);
  }
  CHECK_THROWS_AS(query_device(0), Error);
  CHECK_THROWS_AS(ensure_context(0), Error);
}

TEST_CASE("without a driver: the service builds keys, warmup compiles then reports kNoDriver", "[runtime]") {
  if (real_driver_present()) return;
  ServiceOptions o;
  o.store.roots = {(std::filesystem::temp_directory_path() / "swapjit_test_nodriver").string()};
  o.jobs = 2;
  Service service(o);
  CHECK_FALSE(service.has_driver());
  CHECK(service.arch() == "sm_90a");
  int fetched = 0;
  service.impl().cubin_source = [&](const CompileKey& k) {
    ++fetched;
    CubinResult r;
    r.digest = k.canonical_json();
    r.cubin = {'x'};
    r.lowered_name = "f";
    return r;
  };
  LayerConfig c;
  c.live_heads = 32;
  DecodeAttention layer(service, c);
  try {
    service.warmup();
    FAIL("warmup() must throw kNoDriver");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kNoDriver);
    CHECK(std::string(e.what()).find("libcuda.so.1") != std::string::npos);
  }
  CHECK(fetched == int(layer.keys().size()));  // every key was compiled (into the cache) first

  DecodeStep s;  // a shape-valid step with fake pointers: the failure must be the driver, not the shape
  auto p = [](uintptr_t v) { return reinterpret_cast<void*>(v); };
  s.num_tokens = 1;
  s.q = p(0x1000);
  s.q_token_stride = 64 * 512;
  s.positions = static_cast<const int64_t*>(p(0x2000));
  s.cos_sin = static_cast<const float*>(p(0x3000));
  s.max_pos = 10;
  s.swa_slots = static_cast<const int32_t*>(p(0x4000));
  s.swa_lens = static_cast<const int32_t*>(p(0x5000));
  s.swa_width = c.window;
  s.comp_slots = static_cast<const int32_t*>(p(0x6000));
  s.comp_lens = static_cast<const int32_t*>(p(0x7000));
  s.comp_width = c.topk;
  s.swa_cache = CacheRef{p(0x8000), 64 * 584, 4};
  s.comp_cache = CacheRef{p(0x9000), 64 * 584, 4};
  s.out_data = p(0xa000);
  s.out_scale = p(0xb000);
  s.n_groups_alloc = 4;
  s.n_total = 1;
  try {
    layer.forward(s, nullptr);
    FAIL("forward() must throw kNoDriver");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kNoDriver);
  }
  InsertStep ins;
  ins.num_rows = 1;
  ins.rows = p(0x1000);
  ins.slots = static_cast<const int64_t*>(p(0x2000));
  ins.cache = s.swa_cache;
  try {
    layer.insert(ins, true, nullptr);
    FAIL("insert() must throw kNoDriver");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kNoDriver);
  }
}

TEST_CASE("arch names, launch shapes and load-time fit checks", "[runtime]") {
  CHECK(arch_for_compute_capability(9, 0) == "sm_90a");
  CHECK(arch_for_compute_capability(10, 0) == "sm_100a");
  CHECK(arch_for_compute_capability(12, 0) == "sm_120");
  CHECK(arch_for_compute_capability(8, 9) == "sm_89");

  const LaunchShape a = launch_shape(LaunchPlan{256, 6, 6, 100000}, 5);
  CHECK(a.grid_x == 30);
  CHECK(a.block_x == 256);
  CHECK(a.cluster_x == 6);
  CHECK(a.smem_bytes == 100000);
  CHECK(a.pdl);
  CHECK(launch_shape(LaunchPlan{128, 1, 1, 0}, 7).cluster_x == 1);
  // Wide shape: taken up to wide_max_items items (set by the loader), the portable one past it or when 0.
  const LaunchPlan wide{512, 6, 6, 100000, 10, 7};
  CHECK(launch_shape(wide, 1).cluster_x == 10);
  CHECK(launch_shape(wide, 7).grid_x == 70);
  CHECK(launch_shape(wide, 8).cluster_x == 6);
  CHECK(launch_shape(wide, 8).grid_x == 48);
  CHECK(launch_shape(LaunchPlan{512, 6, 6, 100000, 10, 0}, 1).cluster_x == 6);
  // Mid shape: past the wide one's reach, up to mid_max_items items.
  const LaunchPlan mid{512, 6, 6, 100000, 10, 7, 8, 16};
  CHECK(launch_shape(mid, 7).cluster_x == 10);
  CHECK(launch_shape(mid, 8).cluster_x == 8);
  CHECK(launch_shape(mid, 16).grid_x == 128);
  CHECK(launch_shape(mid, 17).cluster_x == 6);
  CHECK(launch_shape(mid, 17).grid_x == 102);
  CHECK(launch_shape(LaunchPlan{512, 6, 6, 100000, 10, 0, 8, 0}, 9).cluster_x == 6);
  // Each shape names the entry point that runs it (one function per tiling).
  CHECK(launch_shape(mid, 7).tiling == LaunchTiling::kWide);
  CHECK(launch_shape(mid, 8).tiling == LaunchTiling::kMid);
  CHECK(launch_shape(mid, 17).tiling == LaunchTiling::kPortable);
  CHECK(launch_shape(LaunchPlan{128, 1, 1, 0}, 7).tiling == LaunchTiling::kPortable);

  DeviceInfo h200;
  h200.name = "H200";
  h200.arch = "sm_90a";
  h200.max_threads_per_block = 1024;
  h200.max_regs_per_block = 65536;
  h200.max_smem_per_block_optin = 232448;
  CHECK_NOTHROW(check_plan_fits(h200, LaunchPlan{256, 6, 6, 200000}, 128, 1024, 1024, "{}"));
  auto rejects = [&](LaunchPlan plan, int regs, int static_smem, int fmax, const char* word) {
    INFO(word);
    try {
      check_plan_fits(h200, plan, regs, static_smem, fmax, "{\"k\":1}");
      FAIL("expected kUnsupported");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kUnsupported);
      CHECK(std::string(e.what()).find(word) != std::string::npos);
      CHECK(e.key_json() == "{\"k\":1}");
    }
  };
  rejects(LaunchPlan{512, 1, 1, 0}, 255, 0, 1024, "registers");
  rejects(LaunchPlan{256, 1, 1, 232000}, 64, 1024, 1024, "shared memory");
  rejects(LaunchPlan{2048, 1, 1, 0}, 32, 0, 1024, "threads");
  rejects(LaunchPlan{384, 1, 1, 0}, 32, 0, 256, "function's max");
  rejects(LaunchPlan{128, 10, 10, 0}, 32, 0, 1024, "portable");
  rejects(LaunchPlan{128, 6, 4, 0}, 32, 0, 1024, "multiple");
  CHECK_NOTHROW(check_plan_fits(h200, LaunchPlan{512, 6, 6, 200000, 10, 0}, 96, 16, 1024, "{}"));
  rejects(LaunchPlan{512, 6, 6, 200000, 17, 0}, 96, 16, 1024, "wide cluster");
  rejects(LaunchPlan{512, 6, 6, 200000, 6, 0}, 96, 16, 1024, "wide cluster");
  rejects(LaunchPlan{512, 6, 6, 200000, 10, 0, 9, 0}, 96, 16, 1024, "mid cluster");
  rejects(LaunchPlan{512, 6, 6, 200000, 10, 0, 6, 0}, 96, 16, 1024, "mid cluster");
}

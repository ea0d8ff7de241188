// test_launch_path.cpp: the launch path through the host fake driver (tests/host_fake_driver.hpp):
// forward() and insert() of a warm layer allocate nothing (global operator new is replaced below and
// counts), the logged cuLaunchKernelEx matches the key's launch plan (grid, block, cluster, smem, PDL,
// stream, params) and launches the function of key_for(choose()), and the not-warmed rules (capture first,
// then seal) hold.
// NOTE: the cubins come from a fake store seam (Service::Impl::cubin_source): a minimal ELF header followed
// by the key's canonical JSON, registered with the host fake, so each launch is checked against its key's
// shapes and plan and its log entry names the key; the test needs neither NVRTC time nor the kernels
// (the real store is tested in test_cubin_store). The step's pointers are live host-fake allocations.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>
#include <string>
#include <utility>

#include "jit/error.hpp"
#include "jit/kernel_family.hpp"
#include "kernels_src/kernel_params.cuh"
#include "runtime/driver.hpp"
#include "runtime/launcher.hpp"
#include "runtime/service_impl.hpp"
#include "tests/catch.hpp"
#include "tests/host_fake_driver.hpp"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
}  // namespace

// Counting replacements of the global allocation functions (the whole test binary uses them; they count
// only while g_counting is set). The host fake's own bookkeeping inside its cuLaunchKernelEx (the launch
// log: strings, the key, vector growth) is not the launch path's allocation: hostfake::in_launch() is set
// on this thread for the duration of that entry point, and allocations made then are not counted.
namespace {
void* counted_malloc(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed) && !swapjit::hostfake::in_launch())
    g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace
void* operator new(std::size_t n) { return counted_malloc(n); }
void* operator new[](std::size_t n) { return counted_malloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using namespace swapjit;
namespace hf = swapjit::hostfake;

namespace {

ServiceOptions temp_options() {
  ServiceOptions o;
  o.store.roots = {(std::filesystem::temp_directory_path() / "swapjit_test_launch").string()};
  o.jobs = 2;
  return o;
}

// The fake store: the "cubin" is an ELF64 EM_CUDA header (what the host fake's loader checks) whose section
// table offset is the image's end, so the whole image, the key's canonical JSON included, identifies it.
int g_fetches = 0;
std::string fake_cubin(const CompileKey& key) {
  std::string img(64, '\0');
  img.replace(0, 4, "\x7f" "ELF");
  img[4] = 2;  // ELFCLASS64
  img += key.canonical_json() + '\0';
  const uint16_t machine = 190;       // EM_CUDA
  const uint64_t shoff = img.size();  // no section headers: the image is all of its identity
  std::memcpy(&img[18], &machine, 2);
  std::memcpy(&img[40], &shoff, 8);
  return img;
}
void install_fake_store(Service& s) {
  s.impl().cubin_source = [](const CompileKey& key) {
    ++g_fetches;
    CubinResult r;
    const std::string img = fake_cubin(key);
    hf::register_image(img, key);
    r.digest = "fake-" + key.canonical_json();
    r.cubin.assign(img.begin(), img.end());
    // The fake resolves a function by its family's entry name inside the lowered name.
    const std::string entry = key.family == Family::kKvInsert        ? "kv_insert_kernel"
                              : key.family == Family::kHeadpadDecode ? "headpad_decode_kernel"
                                                                     : "swapab_decode_kernel";
    r.lowered_name = "_ZN7swapjit" + std::to_string(entry.size()) + entry + "E";
    return r;
  };
}

// Live host-fake allocations (zeroed: empty slot lists, position 0) for every pointer of the steps below
// (up to 64 tokens of tp4_config()), and a created stream. Allocated before any capture begins.
struct Device {  // q bf16 [64, 64*512], lists int32 [64, width], caches [100 pages], out [64, 8 groups]
  const DriverApi& d = hf::table();
  CUstream stream = nullptr;
  void* q; void* positions; void* cos_sin; void* swa_slots; void* swa_lens; void* comp_slots; void* comp_lens;
  void* swa_cache; void* comp_cache; void* out_data; void* out_scale; void* rows; void* slots;
  void* alloc(size_t bytes) {
    CUdeviceptr p = 0;
    REQUIRE(d.cuMemAlloc(&p, bytes) == CUDA_SUCCESS);
    REQUIRE(d.cuMemsetD8(p, 0, bytes) == CUDA_SUCCESS);
    return reinterpret_cast<void*>(uintptr_t(p));
  }
  Device() {
    CUcontext ctx = nullptr;
    REQUIRE(d.cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    REQUIRE(d.cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    REQUIRE(d.cuStreamCreate(&stream, 0) == CUDA_SUCCESS);
    q = alloc(64 * 64 * 512 * 2), positions = alloc(64 * 8), cos_sin = alloc(4096 * 64 * 4);
    swa_slots = alloc(64 * 128 * 4), swa_lens = alloc(64 * 4), comp_slots = alloc(64 * 512 * 4), comp_lens = alloc(64 * 4);
    swa_cache = alloc(100 * (64 * size_t(record_bytes(kFormatV41Fp8)) + 16));
    comp_cache = alloc(100 * 64 * size_t(record_bytes(kFormatV41Fp4)));
    out_data = alloc(64 * 8 * size_t(kGroupDataBytes)), out_scale = alloc(4 * 32 * 64 * 8);
    rows = alloc(7 * 512 * 2), slots = alloc(7 * 8);
  }
};

DecodeStep valid_step(const LayerConfig& c, int tokens, const Device& dev) {
  DecodeStep s;
  s.num_tokens = tokens;
  s.q = dev.q, s.q_h_pad = 64, s.q_token_stride = 64 * 512;
  s.positions = static_cast<const int64_t*>(dev.positions);
  s.cos_sin = static_cast<const float*>(dev.cos_sin);
  s.max_pos = 4096;
  s.swa_slots = static_cast<const int32_t*>(dev.swa_slots);
  s.swa_lens = static_cast<const int32_t*>(dev.swa_lens);
  s.swa_width = c.window;
  if (c.topk > 0) {
    s.comp_slots = static_cast<const int32_t*>(dev.comp_slots);
    s.comp_lens = static_cast<const int32_t*>(dev.comp_lens);
    s.comp_width = c.topk;
    s.comp_cache = CacheRef{dev.comp_cache, int64_t(c.comp_page) * record_bytes(c.comp_format), 100};
  }
  s.swa_cache = CacheRef{dev.swa_cache, int64_t(c.swa_page) * record_bytes(c.swa_format) + 16, 100};
  s.out_data = dev.out_data, s.out_scale = dev.out_scale;
  s.n_groups_alloc = 8, s.n_total = 64;
  return s;
}

// A step the head-padded kernel takes at any token count: its SWA list is narrower than the window (SPEC §5).
DecodeStep headpad_step(const LayerConfig& c, int tokens, const Device& dev) {
  DecodeStep s = valid_step(c, tokens, dev);
  s.swa_width = c.window / 2;
  return s;
}

LayerConfig tp4_config() {
  LayerConfig c;
  c.live_heads = 16, c.window = 128, c.topk = 512;
  c.swa_format = kFormatV41Fp8, c.comp_format = kFormatV41Fp4;
  c.swa_page = 64, c.comp_page = 64;
  return c;
}

// The fake's log entry of the last launch (copied out, outside any counted region).
hf::Launch last_launch() {
  const hf::Stats st = hf::stats();
  REQUIRE(!st.launches_log.empty());
  return st.launches_log.back();
}

// The last logged launch is the plan of the key forward(tokens) chose; the fake rejects y/z dimensions
// other than 1, so grid.x / block.x are the whole grid and block. A swap-AB step of at most the default
// split cap tokens runs the key of half the heads with two clusters a token (DecodeParams.head_groups).
void check_launch_matches(const DecodeAttention& layer, int tokens, CUstream stream, const Device& dev) {
  const hf::Launch r = last_launch();
  const KernelChoice choice = layer.choose(tokens, layer.config().window);
  const LayerConfig& lc = layer.config();
  int groups = 1;
  if (choice == KernelChoice::kSwapab) {
    if (swapab_split_heads(lc.live_heads, 4) > 0 &&
        (tokens <= default_swapab_split4_max_tokens(lc.live_heads, lc.topk) ||
         tokens == default_swapab_split4_also_at(lc.live_heads, lc.topk)))
      groups = 4;
    else if (swapab_split_heads(lc.live_heads, 2) > 0 &&
             (tokens <= default_swapab_split_max_tokens(lc.live_heads, lc.topk) ||
              tokens == default_swapab_split_also_at(lc.live_heads, lc.topk)))
      groups = 2;
  }
  CompileKey key = layer.key_for(choice);
  key.live_heads /= groups;
  CHECK(std::find(layer.keys().begin(), layer.keys().end(), key) != layer.keys().end());
  CHECK(layer.launch_key(tokens, layer.config().window) == key);
  const LaunchPlan plan = launch_plan(key);
  INFO(key.describe() << " tokens " << tokens);
  CHECK(r.problems.empty());
  CHECK(r.keyed);
  CHECK(r.key == key);
  const int items = tokens * groups;
  // The loader sets wide_max_items and mid_max_items from the occupancy of those clusters: the fake answers
  // 7 for 10 CTAs (as the H200) and 16 for 8.
  const bool wide = plan.wide_cluster > 0 && items <= 7;
  const bool mid = !wide && plan.mid_cluster > 0 && items <= 16;
  const int cluster = wide ? plan.wide_cluster : mid ? plan.mid_cluster : plan.cluster;
  CHECK(r.grid == unsigned(items * (wide ? plan.wide_cluster : mid ? plan.mid_cluster : plan.ctas_per_item)));
  // Each tiling has its own entry point (swapab_decode.cuh): the wide and mid ones by their extern "C" names.
  if (wide) {
    CHECK(r.function == "swapjit_swapab_decode_kernel_wide");
  } else if (mid) {
    CHECK(r.function == "swapjit_swapab_decode_kernel_mid");
  } else {
    CHECK(r.function.rfind("_ZN7swapjit", 0) == 0);
  }
  CHECK(r.block == unsigned(plan.threads));
  CHECK(r.smem == unsigned(plan.smem_bytes));
  CHECK(r.pdl);
  CHECK(r.stream == stream);
  if (cluster > 1) {
    CHECK(r.cluster == unsigned(cluster));
    CHECK(r.num_attrs == 2);
  } else {
    CHECK(r.cluster == 1);  // no cluster attribute: PDL's is the only one
    CHECK(r.num_attrs == 1);
  }
  DecodeParams p;
  std::memcpy(&p, r.params, sizeof(p));
  CHECK(p.num_tokens == tokens);
  CHECK(p.head_groups == groups);
  CHECK(p.q == dev.q);
  CHECK(p.comp_cache.base == dev.comp_cache);
  CHECK(p.n_total == 64);
}

}  // namespace

TEST_CASE("warm forward() and insert() allocate nothing; launches match the plan", "[runtime]") {
  hf::Scope fake;  // outlives the Service (its module cache unloads through the fake)
  Device dev;
  Service service(temp_options());
  REQUIRE(service.has_driver());
  REQUIRE(service.arch() == "sm_90a");
  install_fake_store(service);
  const LayerConfig c = tp4_config();
  DecodeAttention layer(service, c);
  g_fetches = 0;
  service.warmup();
  service.seal();
  CHECK(g_fetches == int(layer.keys().size()));
  CHECK(hf::stats().module_loads == long(layer.keys().size()));
  // Every entry point a key's plan may launch is loaded at warmup: the portable one, and the wide / mid ones.
  long entries = 0;
  for (const CompileKey& k : layer.keys()) {
    const LaunchPlan plan = launch_plan(k);
    entries += 1 + (plan.wide_cluster > 0) + (plan.mid_cluster > 0);
  }
  CHECK(entries > long(layer.keys().size()));  // the layer has keys with wide or mid shapes
  CHECK(hf::stats().func_loads == entries);
  CHECK(hf::stats().max_dyn_smem_set >= 0);

  CUstream stream = dev.stream;
  DecodeStep steps[3] = {valid_step(c, 1, dev), valid_step(c, 16, dev), headpad_step(c, 40, dev)};
  for (auto& s : steps) layer.forward(s, stream);  // first calls outside the counted region
  const long launches_before = hf::stats().launches;
  const long capture_queries_before = hf::stats().capture_queries;

  // Positive control: the counter sees an allocation (else a zero below would prove nothing).
  g_allocations = 0;
  g_counting = true;
  auto control = std::make_unique<std::string>(64, 'x');
  g_counting = false;
  REQUIRE(g_allocations.load() >= 1);
  control.reset();

  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < 100; ++i) layer.forward(steps[i % 3], stream);
  g_counting = false;
  CHECK(g_allocations.load() == 0);
  CHECK(hf::stats().launches == launches_before + 100);
  CHECK(hf::stats().capture_queries == capture_queries_before);  // warm: the capture state is never asked

  for (int tokens : {1, 3, 4, 5, 16, 17, 40}) {  // 16 heads: split up to 3 tokens (the default cap)
    layer.forward(valid_step(c, tokens, dev), stream);
    check_launch_matches(layer, tokens, stream, dev);
  }

  // insert(): warm, allocation-free, plan as kv_insert's.
  InsertStep ins;
  ins.num_rows = 7;
  ins.rows = dev.rows;
  ins.slots = static_cast<const int64_t*>(dev.slots);
  ins.cache = CacheRef{dev.comp_cache, int64_t(c.comp_page) * record_bytes(c.comp_format), 100};
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < 100; ++i) layer.insert(ins, false, stream);
  g_counting = false;
  CHECK(g_allocations.load() == 0);
  const LaunchPlan ip = launch_plan(layer.insert_key(false));
  const hf::Launch r = last_launch();
  CHECK(r.problems.empty());
  CHECK(r.grid == unsigned(7 * ip.ctas_per_item));
  CHECK(r.block == unsigned(ip.threads));
  CHECK(r.keyed);
  CHECK(r.key == layer.insert_key(false));
  InsertParams p;
  std::memcpy(&p, r.params, sizeof(p));
  CHECK(p.num_rows == 7);
  CHECK(p.cache.page_stride == int64_t(c.comp_page) * record_bytes(c.comp_format));
  CHECK(hf::stats().violations == 0);

  // swapjit's own share of a forward() (host checks, params, dispatch, launch config), with the fake
  // driver's cuLaunchKernelEx standing in for the real one; an upper bound, since the fake also checks
  // every pointer of the launch. Reported, not asserted: CI machines vary. Last in the test case: the
  // fake's launch log (4096 entries) is full afterwards. docs/perf-notes.md sets it beside the H200 figure.
  {
    constexpr int kCalls = 20000;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) layer.forward(steps[i % 3], stream);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    WARN("forward() on the host fake driver: " << us / kCalls << " us per call (" << kCalls << " calls)");
  }
}

TEST_CASE("a 32-head layer's small steps launch the 8- and 16-head keys, four or two clusters a token",
          "[runtime]") {
  hf::Scope fake;
  Device dev;
  Service service(temp_options());
  install_fake_store(service);
  LayerConfig c = tp4_config();
  c.live_heads = 32;
  DecodeAttention layer(service, c);
  service.warmup();
  service.seal();
  // swapab, its split keys (16 and 8 heads), headpad, two kv_insert (v41_fp8, v41_fp4)
  CHECK(layer.keys().size() == 6);
  // Both sides of both caps, and the shapes of the multiplied cluster counts (wide, mid, portable).
  const int cap4 = default_swapab_split4_max_tokens(32, c.topk),
            cap = default_swapab_split_max_tokens(32, c.topk), at4 = default_swapab_split4_also_at(32, c.topk);
  REQUIRE(at4 > cap4 + 1);  // the extra four-way point lies past the cap, with a two-way count between
  for (int tokens : {1, cap4, cap4 + 1, 3, at4, at4 + 1, cap, cap + 1, 16, 40}) {
    layer.forward(valid_step(c, tokens, dev), dev.stream);
    check_launch_matches(layer, tokens, dev.stream, dev);
    const hf::Launch r = last_launch();
    DecodeParams p;
    std::memcpy(&p, r.params, sizeof(p));
    const int groups = tokens <= cap4 || tokens == at4 ? 4 : tokens <= cap ? 2 : 1;
    CHECK(r.key.live_heads == 32 / groups);
    CHECK(p.head_groups == groups);
  }
  // Forced swap-AB splits the same way; the head-padded kernel never does.
  layer.forward(valid_step(c, cap4 + 1, dev), dev.stream, KernelChoice::kSwapab);
  CHECK(last_launch().key.live_heads == 16);
  layer.forward(valid_step(c, 2, dev), dev.stream, KernelChoice::kHeadpad);
  DecodeParams hp;
  std::memcpy(&hp, last_launch().params, sizeof(hp));
  CHECK(hp.head_groups == 1);
  CHECK(last_launch().problems.empty());
  CHECK(hf::stats().violations == 0);
}

TEST_CASE("a device that refuses non-portable clusters keeps swap-AB on its portable shape", "[runtime]") {
  hf::Scope fake;
  hf::refuse_non_portable_clusters(true);
  Device dev;
  ServiceOptions unsplit = temp_options();
  unsplit.swapab_split_max_tokens = 0;  // one cluster a token: the shapes of the layer's own key
  Service service(unsplit);
  install_fake_store(service);
  const LayerConfig c = tp4_config();
  DecodeAttention layer(service, c);
  service.warmup();  // the opt-in fails: the load goes on, without the wide shape
  const LaunchPlan plan = launch_plan(layer.key_for(KernelChoice::kSwapab));
  REQUIRE(plan.wide_cluster > plan.cluster);  // the key has a wide shape, which this device refuses
  // Its portable shapes remain: the mid one (8 CTAs, the fake's occupancy 16) where the key has it.
  const int portable = plan.mid_cluster > 0 ? plan.mid_cluster : plan.ctas_per_item;
  for (int tokens : {1, 5}) {
    layer.forward(valid_step(c, tokens, dev), dev.stream);
    const hf::Launch r = last_launch();
    INFO("tokens " << tokens);
    CHECK(r.problems.empty());
    CHECK(r.cluster == unsigned(portable));
    CHECK(r.grid == unsigned(tokens * portable));
    CHECK(r.function.find("_wide") == std::string::npos);
  }
  // Control: the same layer on a device that accepts the opt-in takes the wide shape at T = 1.
  hf::refuse_non_portable_clusters(false);
  Service service2(unsplit);
  install_fake_store(service2);
  DecodeAttention layer2(service2, c);
  service2.warmup();
  layer2.forward(valid_step(c, 1, dev), dev.stream);
  CHECK(last_launch().cluster == unsigned(plan.wide_cluster));
  CHECK(last_launch().function == "swapjit_swapab_decode_kernel_wide");
}

TEST_CASE("not warmed: capture is checked first, then seal; otherwise compiled on demand", "[runtime]") {
  hf::Scope fake;
  Device dev;
  const LayerConfig c = tp4_config();
  CUstream stream = dev.stream;
  {
    Service service(temp_options());
    install_fake_store(service);
    DecodeAttention layer(service, c);
    g_fetches = 0;
    REQUIRE(dev.d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    try {
      layer.forward(valid_step(c, 1, dev), stream);
      FAIL("forward() during capture of a cold key must throw");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kNotWarmed);
      CHECK(std::string(e.what()).find("not warmed") != std::string::npos);
      CHECK(e.key_json() == layer.launch_key(1, c.window).canonical_json());
    }
    CHECK(g_fetches == 0);
    CHECK(hf::stats().module_loads == 0);
    CHECK(hf::stats().launches == 0);
    CUgraph graph = nullptr;
    CHECK(dev.d.cuStreamEndCapture(stream, &graph) == CUDA_SUCCESS);  // the capture was never broken

    service.seal();
    try {
      layer.forward(headpad_step(c, 40, dev), stream);
      FAIL("forward() after seal() of a cold key must throw");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kNotWarmed);
      CHECK(e.key_json() == layer.key_for(KernelChoice::kHeadpad).canonical_json());
    }
    CHECK(g_fetches == 0);
  }
  {
    Service service(temp_options());
    install_fake_store(service);
    DecodeAttention layer(service, c);
    g_fetches = 0;
    layer.forward(valid_step(c, 2, dev), stream);  // not capturing, not sealed: compiled and loaded now
    CHECK(g_fetches == 1);
    check_launch_matches(layer, 2, stream, dev);
    layer.forward(valid_step(c, 3, dev), stream);
    CHECK(g_fetches == 1);
    // A second layer with the same keys, built later, reuses the loaded kernel.
    DecodeAttention twin(service, c);
    twin.forward(valid_step(c, 1, dev), stream);
    CHECK(g_fetches == 1);
  }
  CHECK(hf::stats().violations == 0);
}

TEST_CASE("host checks name the field; driver errors name the call and the key", "[runtime]") {
  hf::Scope fake;
  Device dev;
  Service service(temp_options());
  install_fake_store(service);
  LayerConfig c = tp4_config();
  DecodeAttention layer(service, c);
  service.warmup();
  CUstream stream = nullptr;
  auto expect_invalid = [&](DecodeStep s, const char* field) {
    INFO(field);
    try {
      layer.forward(s, stream);
      FAIL("expected kInvalidArgument");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kInvalidArgument);
      CHECK(std::string(e.what()).find(field) != std::string::npos);
    }
  };
  const std::pair<void (*)(DecodeStep&, const Device&), const char*> bad[] = {
      {[](DecodeStep& s, const Device&) { s.q = nullptr; }, "DecodeStep.q"},
      {[](DecodeStep& s, const Device&) { s.n_total = 3; }, "n_total"},
      {[](DecodeStep& s, const Device&) { s.num_tokens = 0; }, "num_tokens"},
      {[](DecodeStep& s, const Device&) { s.swa_width = 129; }, "swa_width"},
      {[](DecodeStep& s, const Device&) { s.comp_slots = nullptr; }, "comp_slots"},
      {[](DecodeStep& s, const Device&) { s.q_h_pad = 8; }, "q_h_pad"},
      {[](DecodeStep& s, const Device&) { s.swa_cache.page_stride = 64 * 528 - 16; }, "page_stride"},
      {[](DecodeStep& s, const Device& d) { s.comp_cache.base = static_cast<const char*>(d.comp_cache) + 8; }, "aligned"},
  };
  for (const auto& [mutate, field] : bad) {
    DecodeStep s = valid_step(c, 4, dev);
    mutate(s, dev);
    expect_invalid(s, field);
  }
  CHECK(hf::stats().launches == 0);  // every bad step was stopped on the host
  CHECK_NOTHROW(layer.forward(valid_step(c, 4, dev), stream, KernelChoice::kSwapab));  // forced, full window: fine
  DecodeStep s = valid_step(c, 4, dev);
  s.swa_width = 64;
  CHECK_THROWS_AS(layer.forward(s, stream, KernelChoice::kSwapab), Error);
  layer.forward(s, stream);  // auto: narrower list -> head-padded
  CHECK(last_launch().key == layer.key_for(KernelChoice::kHeadpad));
  CHECK(hf::stats().violations == 0);

  // A launch the driver fails on purpose (a code the fake names CUDA_ERROR_FAKE).
  hf::fail_launches(CUDA_ERROR_LAUNCH_FAILED);
  try {
    layer.forward(valid_step(c, 1, dev), stream);
    FAIL("a failing cuLaunchKernelEx must throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kDriver);
    CHECK(std::string(e.what()).find("cuLaunchKernelEx") != std::string::npos);
    CHECK(std::string(e.what()).find("CUDA_ERROR_FAKE") != std::string::npos);
    CHECK(e.key_json() == layer.launch_key(1, c.window).canonical_json());
  }
  hf::fail_launches(CUDA_SUCCESS);

  // A hand-made handle whose plan takes the wide shape but whose wide entry was never resolved: an error
  // naming the key, not the portable function launched in wide clusters.
  KernelHandle h;
  h.function = reinterpret_cast<CUfunction>(&dev);  // never launched
  h.plan = LaunchPlan{512, 6, 6, 1024, 10, 7};
  h.key_json = "{\"hand\":\"made\"}";
  const long launches = hf::stats().launches;
  DecodeParams params{};
  try {
    launch_kernel(h, 1, &params, stream);
    FAIL("a wide shape without its entry point must throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kInternal);
    CHECK(std::string(e.what()).find("entry point") != std::string::npos);
    CHECK(e.key_json() == h.key_json);
  }
  CHECK(hf::stats().launches == launches);
}

TEST_CASE("real keys through NVRTC and the CubinStore, loaded by the fake driver, launch allocation-free",
          "[runtime][nvrtc]") {
  hf::Scope fake;
  Device dev;
  Service service(temp_options());  // the real store: cubins compiled by NVRTC (cached in a temp dir)
  const LayerConfig c = tp4_config();
  DecodeAttention layer(service, c);
  service.warmup();
  service.seal();
  CHECK(hf::stats().module_loads == long(layer.keys().size()));
  CUstream stream = dev.stream;
  const DecodeStep one = valid_step(c, 1, dev), many = valid_step(c, 33, dev);
  layer.forward(one, stream);
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < 100; ++i) layer.forward(i % 2 ? one : many, stream);
  g_counting = false;
  CHECK(g_allocations.load() == 0);
  layer.forward(many, stream);  // the last launch: 33 tokens, the head-padded kernel
  const LaunchPlan plan = launch_plan(layer.key_for(layer.choose(33, c.window)));
  const hf::Launch r = last_launch();
  CHECK(r.problems.empty());
  CHECK(r.grid == unsigned(33 * plan.ctas_per_item));
  CHECK(r.block == unsigned(plan.threads));
  CHECK(r.smem == unsigned(plan.smem_bytes));
  CHECK(r.pdl);
  CHECK(hf::stats().violations == 0);
}

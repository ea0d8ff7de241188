// test_launch_path.cpp: the launch path through a fake DriverApi (below): forward() and
// insert() of a warm layer allocate nothing (global operator new is replaced below and counts), the
// recorded cuLaunchKernelEx matches the key's launch plan (grid, block, cluster, smem, PDL) and launches
// the function of key_for(choose()), and the not-warmed rules (capture first, then seal) hold.
// NOTE: the cubins come from a fake store seam (Service::Impl::cubin_source) holding each key's canonical
// JSON, so the test needs neither NVRTC time nor the kernels; the real store is tested in test_cubin_store.
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <filesystem>
#include <memory>
#include <new>
#include <string>

#include <nlohmann/json.hpp>

#include "jit/error.hpp"
#include "jit/kernel_family.hpp"
#include "kernels_src/kernel_params.cuh"
#include "runtime/driver.hpp"
#include "runtime/launcher.hpp"
#include "runtime/service_impl.hpp"
#include "tests/catch.hpp"

// A DriverApi whose functions succeed without a GPU and record what they were given. Modules are the
// "cubin" bytes (the fake store below puts the key's canonical JSON there); functions are module indices.
namespace swapjit::testing {

struct LaunchRecord {
  CUfunction function = nullptr;
  unsigned grid[3] = {}, block[3] = {}, smem = 0;
  CUstream stream = nullptr;
  unsigned num_attrs = 0;
  bool pdl = false;
  unsigned cluster[3] = {0, 0, 0};  // 0 = no cluster attribute
  alignas(16) unsigned char params[512] = {};
};

struct FakeState {
  std::vector<std::string> modules;  // index + 1 = CUmodule = CUfunction
  int module_loads = 0, func_loads = 0, launches = 0, capture_queries = 0;
  int max_dyn_smem_set = -1;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult launch_result = CUDA_SUCCESS;
  size_t param_bytes = 0;  // bytes of params[0] the fake launch copies (the params struct's size)
  LaunchRecord last;
};

inline FakeState& fake() {
  static FakeState s;
  return s;
}

inline std::string fake_function_text(CUfunction f) {
  const size_t i = reinterpret_cast<size_t>(f);
  return i >= 1 && i <= fake().modules.size() ? fake().modules[i - 1] : std::string();
}

inline DriverApi make_fake_driver() {
  DriverApi d;
  d.driver_version = 13000;
  d.cuInit = [](unsigned) { return CUDA_SUCCESS; };
  d.cuDriverGetVersion = [](int* v) { *v = 13000; return CUDA_SUCCESS; };
  d.cuDeviceGet = [](CUdevice* dev, int ordinal) { *dev = ordinal; return CUDA_SUCCESS; };
  d.cuDeviceGetCount = [](int* n) { *n = 1; return CUDA_SUCCESS; };
  d.cuDeviceGetName = [](char* name, int len, CUdevice) { std::strncpy(name, "Fake H200", len); return CUDA_SUCCESS; };
  d.cuDeviceGetAttribute = [](int* v, CUdevice_attribute a, CUdevice) {
    switch (a) {
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
      case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
      case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
      case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *v = 65536; break;
      case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
      case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; break;
      default: *v = 0;
    }
    return CUDA_SUCCESS;
  };
  d.cuDevicePrimaryCtxRetain = [](CUcontext* c, CUdevice) { *c = reinterpret_cast<CUcontext>(0x10); return CUDA_SUCCESS; };
  d.cuCtxSetCurrent = [](CUcontext) { return CUDA_SUCCESS; };
  d.cuCtxGetCurrent = [](CUcontext* c) { *c = reinterpret_cast<CUcontext>(0x10); return CUDA_SUCCESS; };
  d.cuModuleLoadData = [](CUmodule* m, const void* image) {
    fake().modules.emplace_back(static_cast<const char*>(image));
    ++fake().module_loads;
    *m = reinterpret_cast<CUmodule>(fake().modules.size());
    return CUDA_SUCCESS;
  };
  d.cuModuleUnload = [](CUmodule) { return CUDA_SUCCESS; };
  d.cuModuleGetFunction = [](CUfunction* f, CUmodule m, const char*) {
    *f = reinterpret_cast<CUfunction>(m);
    return CUDA_SUCCESS;
  };
  d.cuFuncLoad = [](CUfunction) { ++fake().func_loads; return CUDA_SUCCESS; };
  d.cuFuncSetAttribute = [](CUfunction, CUfunction_attribute a, int v) {
    if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) fake().max_dyn_smem_set = v;
    return CUDA_SUCCESS;
  };
  d.cuFuncGetAttribute = [](int* v, CUfunction_attribute a, CUfunction) {
    *v = a == CU_FUNC_ATTRIBUTE_NUM_REGS ? 64 : a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
    return CUDA_SUCCESS;
  };
  d.cuOccupancyMaxActiveClusters = [](int* n, CUfunction, const CUlaunchConfig*) { *n = 16; return CUDA_SUCCESS; };
  d.cuStreamIsCapturing = [](CUstream, CUstreamCaptureStatus* s) {
    ++fake().capture_queries;
    *s = fake().capture;
    return CUDA_SUCCESS;
  };
  d.cuGetErrorName = [](CUresult, const char** s) { *s = "CUDA_ERROR_FAKE"; return CUDA_SUCCESS; };
  d.cuGetErrorString = [](CUresult, const char** s) { *s = "fake driver error"; return CUDA_SUCCESS; };
  // Records without allocating: this runs inside the allocation-counted region.
  d.cuLaunchKernelEx = [](const CUlaunchConfig* c, CUfunction f, void** params, void**) {
    FakeState& s = fake();
    ++s.launches;
    LaunchRecord& r = s.last;
    r = LaunchRecord{};
    r.function = f;
    r.grid[0] = c->gridDimX, r.grid[1] = c->gridDimY, r.grid[2] = c->gridDimZ;
    r.block[0] = c->blockDimX, r.block[1] = c->blockDimY, r.block[2] = c->blockDimZ;
    r.smem = c->sharedMemBytes;
    r.stream = c->hStream;
    r.num_attrs = c->numAttrs;
    for (unsigned i = 0; i < c->numAttrs; ++i) {
      if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
        r.pdl = c->attrs[i].value.programmaticStreamSerializationAllowed != 0;
      if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
        r.cluster[0] = c->attrs[i].value.clusterDim.x;
        r.cluster[1] = c->attrs[i].value.clusterDim.y;
        r.cluster[2] = c->attrs[i].value.clusterDim.z;
      }
    }
    if (s.param_bytes <= sizeof(r.params)) std::memcpy(r.params, params[0], s.param_bytes);
    return s.launch_result;
  };
  return d;
}

// Installs the fake for one scope and resets its state.
struct FakeDriverScope {
  DriverApi api = make_fake_driver();
  FakeDriverScope() {
    fake() = FakeState{};
    install_driver_for_testing(&api);
  }
  ~FakeDriverScope() { install_driver_for_testing(nullptr); }
};

}  // namespace swapjit::testing

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
}  // namespace

// Counting replacements of the global allocation functions (the whole test binary uses them; they count
// only while g_counting is set).
namespace {
void* counted_malloc(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
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
using swapjit::testing::fake;

namespace {

ServiceOptions temp_options() {
  ServiceOptions o;
  o.store.roots = {(std::filesystem::temp_directory_path() / "swapjit_test_launch").string()};
  o.jobs = 2;
  return o;
}

// The fake store: the "cubin" is the key's canonical JSON (NUL-terminated, as the fake module loader reads it).
int g_fetches = 0;
void install_fake_store(Service& s) {
  s.impl().cubin_source = [](const CompileKey& key) {
    ++g_fetches;
    CubinResult r;
    const std::string json = key.canonical_json();
    r.digest = "fake-" + json;
    r.cubin.assign(json.begin(), json.end());
    r.cubin.push_back('\0');
    r.lowered_name = "_ZN7swapjit11fake_kernelE";
    return r;
  };
}

void* fake_ptr(uintptr_t v) { return reinterpret_cast<void*>(v); }

DecodeStep valid_step(const LayerConfig& c, int tokens) {
  DecodeStep s;
  s.num_tokens = tokens;
  s.q = fake_ptr(0x100000);
  s.q_h_pad = 64;
  s.q_token_stride = 64 * 512;
  s.positions = static_cast<const int64_t*>(fake_ptr(0x200000));
  s.cos_sin = static_cast<const float*>(fake_ptr(0x300000));
  s.max_pos = 4096;
  s.swa_slots = static_cast<const int32_t*>(fake_ptr(0x400000));
  s.swa_lens = static_cast<const int32_t*>(fake_ptr(0x500000));
  s.swa_width = c.window;
  if (c.topk > 0) {
    s.comp_slots = static_cast<const int32_t*>(fake_ptr(0x600000));
    s.comp_lens = static_cast<const int32_t*>(fake_ptr(0x700000));
    s.comp_width = c.topk;
    s.comp_cache = CacheRef{fake_ptr(0x900000), int64_t(c.comp_page) * record_bytes(c.comp_format), 100};
  }
  s.swa_cache = CacheRef{fake_ptr(0x800000), int64_t(c.swa_page) * record_bytes(c.swa_format) + 16, 100};
  s.out_data = fake_ptr(0xa00000);
  s.out_scale = fake_ptr(0xb00000);
  s.n_groups_alloc = 8;
  s.n_total = 64;
  return s;
}

LayerConfig tp4_config() {
  LayerConfig c;
  c.live_heads = 16;
  c.window = 128;
  c.topk = 512;
  c.swa_format = kFormatV41Fp8;
  c.comp_format = kFormatV41Fp4;
  c.swa_page = 64;
  c.comp_page = 64;
  return c;
}

void check_launch_matches(const DecodeAttention& layer, int tokens, CUstream stream) {
  const auto& r = fake().last;
  const CompileKey& key = layer.key_for(layer.choose(tokens, layer.config().window));
  const LaunchPlan plan = launch_plan(key);
  INFO(key.describe() << " tokens " << tokens);
  CHECK(CompileKey::parse(testing::fake_function_text(r.function)) == key);
  CHECK(r.grid[0] == unsigned(tokens * plan.ctas_per_item));
  CHECK(r.grid[1] == 1);
  CHECK(r.block[0] == unsigned(plan.threads));
  CHECK(r.smem == unsigned(plan.smem_bytes));
  CHECK(r.pdl);
  CHECK(r.stream == stream);
  if (plan.cluster > 1) {
    CHECK(r.cluster[0] == unsigned(plan.cluster));
    CHECK(r.num_attrs == 2);
  } else {
    CHECK(r.cluster[0] == 0);
    CHECK(r.num_attrs == 1);
  }
  DecodeParams p;
  std::memcpy(&p, r.params, sizeof(p));
  CHECK(p.num_tokens == tokens);
  CHECK(p.q == fake_ptr(0x100000));
  CHECK(p.comp_cache.base == fake_ptr(0x900000));
  CHECK(p.n_total == 64);
}

}  // namespace

TEST_CASE("warm forward() and insert() allocate nothing; launches match the plan", "[runtime]") {
  testing::FakeDriverScope scope;
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
  CHECK(fake().module_loads == int(layer.keys().size()));
  CHECK(fake().func_loads == int(layer.keys().size()));
  CHECK(fake().max_dyn_smem_set >= 0);

  CUstream stream = reinterpret_cast<CUstream>(0x5150);
  fake().param_bytes = sizeof(DecodeParams);
  DecodeStep steps[3] = {valid_step(c, 1), valid_step(c, 16), valid_step(c, 40)};
  for (auto& s : steps) layer.forward(s, stream);  // first calls outside the counted region
  const int launches_before = fake().launches;
  const int capture_queries_before = fake().capture_queries;

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
  CHECK(fake().launches == launches_before + 100);
  CHECK(fake().capture_queries == capture_queries_before);  // warm: the capture state is never asked

  for (int tokens : {1, 5, 16, 17, 40}) {
    layer.forward(valid_step(c, tokens), stream);
    check_launch_matches(layer, tokens, stream);
  }

  // insert(): warm, allocation-free, plan as kv_insert's.
  InsertStep ins;
  ins.num_rows = 7;
  ins.rows = fake_ptr(0xc00000);
  ins.slots = static_cast<const int64_t*>(fake_ptr(0xd00000));
  ins.cache = CacheRef{fake_ptr(0x900000), int64_t(c.comp_page) * record_bytes(c.comp_format), 100};
  fake().param_bytes = sizeof(InsertParams);
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < 100; ++i) layer.insert(ins, false, stream);
  g_counting = false;
  CHECK(g_allocations.load() == 0);
  const LaunchPlan ip = launch_plan(layer.insert_key(false));
  CHECK(fake().last.grid[0] == unsigned(7 * ip.ctas_per_item));
  CHECK(fake().last.block[0] == unsigned(ip.threads));
  CHECK(CompileKey::parse(testing::fake_function_text(fake().last.function)) == layer.insert_key(false));
  InsertParams p;
  std::memcpy(&p, fake().last.params, sizeof(p));
  CHECK(p.num_rows == 7);
  CHECK(p.cache.page_stride == int64_t(c.comp_page) * record_bytes(c.comp_format));
}

TEST_CASE("not warmed: capture is checked first, then seal; otherwise compiled on demand", "[runtime]") {
  testing::FakeDriverScope scope;
  const LayerConfig c = tp4_config();
  CUstream stream = reinterpret_cast<CUstream>(0x77);
  fake().param_bytes = sizeof(DecodeParams);
  {
    Service service(temp_options());
    install_fake_store(service);
    DecodeAttention layer(service, c);
    g_fetches = 0;
    fake().capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    try {
      layer.forward(valid_step(c, 1), stream);
      FAIL("forward() during capture of a cold key must throw");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kNotWarmed);
      CHECK(std::string(e.what()).find("not warmed") != std::string::npos);
      CHECK(e.key_json() == layer.key_for(KernelChoice::kSwapab).canonical_json());
    }
    CHECK(g_fetches == 0);
    CHECK(fake().module_loads == 0);
    CHECK(fake().launches == 0);

    fake().capture = CU_STREAM_CAPTURE_STATUS_NONE;
    service.seal();
    try {
      layer.forward(valid_step(c, 40), stream);
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
    layer.forward(valid_step(c, 2), stream);  // not capturing, not sealed: compiled and loaded now
    CHECK(g_fetches == 1);
    check_launch_matches(layer, 2, stream);
    layer.forward(valid_step(c, 3), stream);
    CHECK(g_fetches == 1);
    // A second layer with the same keys, built later, reuses the loaded kernel.
    DecodeAttention twin(service, c);
    twin.forward(valid_step(c, 1), stream);
    CHECK(g_fetches == 1);
  }
}

TEST_CASE("host checks name the field; driver errors name the call and the key", "[runtime]") {
  testing::FakeDriverScope scope;
  Service service(temp_options());
  install_fake_store(service);
  LayerConfig c = tp4_config();
  DecodeAttention layer(service, c);
  service.warmup();
  CUstream stream = nullptr;
  fake().param_bytes = sizeof(DecodeParams);
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
  DecodeStep s = valid_step(c, 4);
  s.q = nullptr;
  expect_invalid(s, "DecodeStep.q");
  s = valid_step(c, 4);
  s.n_total = 3;
  expect_invalid(s, "n_total");
  s = valid_step(c, 0);
  expect_invalid(s, "num_tokens");
  s = valid_step(c, 4);
  s.swa_width = 129;
  expect_invalid(s, "swa_width");
  s = valid_step(c, 4);
  s.comp_slots = nullptr;
  expect_invalid(s, "comp_slots");
  s = valid_step(c, 4);
  s.q_h_pad = 8;
  expect_invalid(s, "q_h_pad");
  s = valid_step(c, 4);
  s.swa_cache.page_stride = 64 * 528 - 16;
  expect_invalid(s, "page_stride");
  s = valid_step(c, 4);
  s.comp_cache.base = fake_ptr(0x900008);
  expect_invalid(s, "aligned");
  CHECK_NOTHROW(layer.forward(valid_step(c, 4), stream, KernelChoice::kSwapab));  // forced, full window: fine
  s = valid_step(c, 4);
  s.swa_width = 64;
  CHECK_THROWS_AS(layer.forward(s, stream, KernelChoice::kSwapab), Error);
  layer.forward(s, stream);  // auto: narrower list -> head-padded
  CHECK(CompileKey::parse(testing::fake_function_text(fake().last.function)) ==
        layer.key_for(KernelChoice::kHeadpad));

  fake().launch_result = CUDA_ERROR_INVALID_VALUE;
  try {
    layer.forward(valid_step(c, 1), stream);
    FAIL("a failing cuLaunchKernelEx must throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kDriver);
    CHECK(std::string(e.what()).find("cuLaunchKernelEx") != std::string::npos);
    CHECK(std::string(e.what()).find("CUDA_ERROR_FAKE") != std::string::npos);
    CHECK(e.key_json() == layer.key_for(KernelChoice::kSwapab).canonical_json());
  }
}

TEST_CASE("real keys through NVRTC and the CubinStore, loaded by the fake driver, launch allocation-free",
          "[runtime][nvrtc]") {
  testing::FakeDriverScope scope;
  Service service(temp_options());  // the real store: cubins compiled by NVRTC (cached in a temp dir)
  const LayerConfig c = tp4_config();
  DecodeAttention layer(service, c);
  service.warmup();
  service.seal();
  CHECK(fake().module_loads == int(layer.keys().size()));
  CUstream stream = reinterpret_cast<CUstream>(0x99);
  fake().param_bytes = sizeof(DecodeParams);
  const DecodeStep one = valid_step(c, 1), many = valid_step(c, 33);
  layer.forward(one, stream);
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < 100; ++i) layer.forward(i % 2 ? one : many, stream);
  g_counting = false;
  CHECK(g_allocations.load() == 0);
  layer.forward(many, stream);  // the last launch: 33 tokens, the head-padded kernel
  const LaunchPlan plan = launch_plan(layer.key_for(layer.choose(33, c.window)));
  CHECK(fake().last.grid[0] == unsigned(33 * plan.ctas_per_item));
  CHECK(fake().last.block[0] == unsigned(plan.threads));
  CHECK(fake().last.smem == unsigned(plan.smem_bytes));
  CHECK(fake().last.pdl);
}

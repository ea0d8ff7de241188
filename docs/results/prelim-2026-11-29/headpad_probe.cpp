// probe.cpp (not part of the build): launches headpad_decode directly through the driver API on random
// cases of reference/step_case and compares with the fp64 reference (compare_output). Also checks that
// two launches give identical bytes.
#include <cuda.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "jit/kernel_family.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "kernels_src/kernel_params.cuh"
#include "reference/step_case.hpp"

using namespace swapjit;
#define CK(x)                                                                  \
  do {                                                                         \
    CUresult r_ = (x);                                                         \
    if (r_ != CUDA_SUCCESS) {                                                  \
      const char* s_ = "?";                                                    \
      cuGetErrorString(r_, &s_);                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_);     \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

template <class T>
CUdeviceptr up(const std::vector<T>& v) {
  if (v.empty()) return 0;
  CUdeviceptr p;
  CK(cuMemAlloc(&p, v.size() * sizeof(T)));
  CK(cuMemcpyHtoD(p, v.data(), v.size() * sizeof(T)));
  return p;
}

struct Loaded {
  CUfunction fn;
  LaunchPlan plan;
};
std::map<std::string, Loaded> g_mods;

Loaded load(const CompileKey& k) {
  auto it = g_mods.find(k.canonical_json());
  if (it != g_mods.end()) return it->second;
  CompiledKernel ck = compile_key(k);
  std::printf("  compiled %s: %d regs, %.0f ms\n", k.describe().c_str(), ck.resources.registers, ck.compile_ms);
  CUmodule m;
  CK(cuModuleLoadData(&m, ck.cubin.data()));
  Loaded l;
  CK(cuModuleGetFunction(&l.fn, m, ck.lowered_name.c_str()));
  l.plan = launch_plan(k);
  CK(cuFuncSetAttribute(l.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, l.plan.smem_bytes));
  g_mods[k.canonical_json()] = l;
  return l;
}

bool run_case(const char* name, ref::CaseShape sh, ref::CaseOptions o, bool timed = false) {
  ref::StepCase c = ref::make_case(sh, o);
  CompileKey k;
  k.family = Family::kHeadpadDecode;
  k.variant = "mma";
  k.arch = "sm_90a";
  k.live_heads = sh.heads;
  k.window = sh.window;
  k.topk = sh.topk;
  k.swa_format = sh.swa_format;
  k.comp_format = sh.topk ? sh.comp_format : kFormatNone;
  k.swa_page = sh.swa_page;
  k.comp_page = sh.topk ? sh.comp_page : 0;
  k.q_layout = sh.q_layout;
  k.out_layout = sh.out_layout;
  Loaded l = load(k);
  const uint8_t poison = 0xA5;
  DecodeParams p{};
  p.num_tokens = sh.tokens;
  p.q = reinterpret_cast<const u16*>(up(c.q));
  p.q_token_stride = c.q_token_stride;
  p.q_h_pad = sh.q_h_pad;
  p.positions = reinterpret_cast<const i64*>(up(c.positions));
  p.cos_sin = reinterpret_cast<const float*>(up(c.cos_sin));
  p.max_pos = o.max_pos;
  p.swa_slots = reinterpret_cast<const i32*>(up(c.swa_slots));
  p.swa_lens = reinterpret_cast<const i32*>(up(c.swa_lens));
  p.swa_width = sh.window;
  p.comp_slots = reinterpret_cast<const i32*>(up(c.comp_slots));
  p.comp_lens = reinterpret_cast<const i32*>(up(c.comp_lens));
  p.comp_width = sh.topk;
  p.sink = reinterpret_cast<const float*>(up(c.sink));
  p.sm_scale = c.sm_scale;
  p.swa_cache = CacheView{reinterpret_cast<const u8*>(up(c.swa_cache.bytes)), c.swa_cache.page_stride, c.swa_cache.pages};
  if (sh.topk)
    p.comp_cache = CacheView{reinterpret_cast<const u8*>(up(c.comp_cache.bytes)), c.comp_cache.page_stride, c.comp_cache.pages};
  std::vector<uint8_t> data(ref::out_data_bytes(c), poison), scale(ref::out_scale_bytes(c), poison);
  CUdeviceptr dd = up(data), ds = up(scale);
  p.out_data = reinterpret_cast<u8*>(dd);
  p.out_scale = reinterpret_cast<i32*>(ds);
  p.n_groups_alloc = c.n_groups_alloc;
  p.n_total = c.n_total;
  p.out_bf16 = reinterpret_cast<u16*>(dd);
  p.out_token_stride = int64_t(sh.heads) * 512;

  CUlaunchAttribute at[2];
  int na = 0;
  if (l.plan.cluster > 1) {
    at[na].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at[na].value.clusterDim.x = l.plan.cluster;
    at[na].value.clusterDim.y = 1;
    at[na].value.clusterDim.z = 1;
    ++na;
  }
  at[na].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  at[na].value.programmaticStreamSerializationAllowed = 1;
  ++na;
  CUlaunchConfig cfg{};
  cfg.gridDimX = sh.tokens * l.plan.ctas_per_item;
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = l.plan.threads;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = l.plan.smem_bytes;
  cfg.attrs = at;
  cfg.numAttrs = na;
  void* args[] = {&p};
  std::vector<uint8_t> out1, sc1;
  for (int rep = 0; rep < 2; ++rep) {
    CK(cuLaunchKernelEx(&cfg, l.fn, args, nullptr));
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(data.data(), dd, data.size()));
    if (!scale.empty()) CK(cuMemcpyDtoH(scale.data(), ds, scale.size()));
    if (rep == 0) { out1 = data; sc1 = scale; }
  }
  const bool same = out1 == data && sc1 == scale;
  if (timed) {
    CUevent e0, e1;
    CK(cuEventCreate(&e0, 0));
    CK(cuEventCreate(&e1, 0));
    for (int i = 0; i < 5; ++i) CK(cuLaunchKernelEx(&cfg, l.fn, args, nullptr));
    CK(cuEventRecord(e0, nullptr));
    for (int i = 0; i < 50; ++i) CK(cuLaunchKernelEx(&cfg, l.fn, args, nullptr));
    CK(cuEventRecord(e1, nullptr));
    CK(cuEventSynchronize(e1));
    float ms = 0;
    CK(cuEventElapsedTime(&ms, e0, e1));
    std::printf("TIME %s: %.2f us per launch (eager, warm L2)\n", name, ms * 1000 / 50);
  }
  ref::CompareResult r = ref::compare_output(c, out1, sc1, poison);
  std::printf("%s %-44s T%-3d h%-3d cl%d: max_abs %.3g rel %.3g (bound %.3g) nan %ld poison %ld unwritten %ld scale %ld elem %ld %s%s\n",
              r.pass && same ? "PASS" : "FAIL", name, sh.tokens, sh.heads, l.plan.cluster, r.max_abs_err, r.rel_err,
              r.bound, r.nan_count, r.poison_violations, r.unwritten, r.scale_mismatches, r.element_violations,
              same ? "" : "NONDETERMINISTIC ", r.pass ? "" : r.detail.c_str());
  return r.pass && same;
}

int main(int argc, char** argv) {
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  int fails = 0, n = 0;
  auto S = [](int h, int T, int topk, int sf, int cf, int sp, int cp, int q, int out) {
    ref::CaseShape s;
    s.heads = h; s.tokens = T; s.topk = topk; s.swa_format = sf; s.comp_format = cf; s.swa_page = sp; s.comp_page = cp;
    s.q_layout = q; s.out_layout = out; s.q_h_pad = h > 64 ? 128 : 64;
    return s;
  };
  const float ninf = -std::numeric_limits<float>::infinity();
  const int P = kQLayoutPlain, C = kQLayoutChunk16, B = kOutBf16, M = kOutMxfp8Ofused;
  const int F8 = kFormatV41Fp8, F4 = kFormatV41Fp4, V4 = kFormatV4Fp8, NO = kFormatNone;
  ref::CaseOptions o;
  o.seed = 1;
  auto go = [&](const char* nm, ref::CaseShape s, ref::CaseOptions oo) { ++n; fails += !run_case(nm, s, oo); oo.seed++; };
  go("v4/v4 512 plain bf16", S(16, 1, 512, V4, V4, 64, 64, P, B), o);
  { auto oo = o; oo.empty_token = true; oo.seed = 2; go("fp8/fp4 512 chunk16 mxfp8 empty", S(32, 5, 512, F8, F4, 64, 128, C, M), oo); }
  { auto oo = o; oo.sink_value = ninf; oo.seed = 3; go("swa-only fp8 chunk16 bf16 sink-inf", S(16, 2, 0, F8, NO, 64, 0, C, B), oo); }
  { auto oo = o; oo.seed = 4; go("fp8/fp8 512 chunk16 mxfp8", S(64, 20, 512, F8, F8, 64, 64, C, M), oo); }
  { auto oo = o; oo.seed = 5; oo.no_sink = true; go("v4/v4 1024 chunk16 bf16 128h", S(128, 3, 1024, V4, V4, 64, 32, C, B), oo); }
  { auto oo = o; oo.seed = 6; oo.peaked = true; go("fp8/fp4 2048 plain mxfp8 peaked", S(8, 17, 2048, F8, F4, 128, 128, P, M), oo); }
  { auto oo = o; oo.seed = 7; oo.full_lengths = true; oo.extra_page_bytes = 32; oo.position_mode = 2;
    go("swa-only v4 p32 plain bf16 full", S(64, 2, 0, V4, NO, 32, 0, P, B), oo); }
  { auto oo = o; oo.seed = 8; oo.sink_value = 8.0f; go("fp8/fp4 512 plain bf16 big sink", S(16, 16, 512, F8, F4, 64, 64, P, B), oo); }
  { auto oo = o; oo.seed = 9; oo.position_mode = 1; go("v4/v4 512 chunk16 mxfp8 128h", S(128, 33, 512, V4, V4, 64, 64, C, M), oo); }
  { auto oo = o; oo.seed = 10; oo.full_lengths = true; go("fp8/fp8 512 plain bf16 full", S(32, 4, 512, F8, F8, 128, 64, P, B), oo); }
  std::printf("%d / %d cases failed\n", fails, n);
  { auto oo = o; oo.seed = 20; oo.full_lengths = true; oo.minus_one_rate = 0; oo.duplicate_rate = 0;
    run_case("timing h64 T64 fp8/fp4 512", S(64, 64, 512, F8, F4, 64, 64, C, M), oo, true);
    run_case("timing h16 T16 fp8/fp4 512", S(16, 16, 512, F8, F4, 64, 64, C, M), oo, true);
    run_case("timing h32 T1 fp8/fp4 512", S(32, 1, 512, F8, F4, 64, 64, C, M), oo, true);
    run_case("timing h128 T32 v4/v4 1024", S(128, 32, 1024, V4, V4, 64, 32, C, M), oo, true); }
  return fails ? 1 : 0;
}

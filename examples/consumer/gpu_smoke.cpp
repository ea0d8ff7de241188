// gpu_smoke.cpp: an installed swapjit on a real GPU: warmup (NVRTC, cache, module load), forward() on
// both kernels with empty lists (the output must be SPEC §3.2's empty result: zero data, scale byte 105
// in every live block), a KV insert, a captured-and-replayed CUDA graph, and the not-warmed error inside
// a capture. Exit 0 = all held. Needs a GPU; links the CUDA driver directly for its own buffers.
#include <cuda.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "swapjit/decode_attention.hpp"

#define CK(x)                                                              \
  do {                                                                     \
    CUresult r_ = (x);                                                     \
    if (r_ != CUDA_SUCCESS) {                                              \
      std::printf("FAIL %s = %d at line %d\n", #x, int(r_), __LINE__);     \
      return 1;                                                            \
    }                                                                      \
  } while (0)

static CUdeviceptr alloc(size_t bytes, int fill) {
  CUdeviceptr p = 0;
  if (cuMemAlloc(&p, bytes) != CUDA_SUCCESS) return 0;
  cuMemsetD8(p, static_cast<unsigned char>(fill), bytes);
  return p;
}

int main() {
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CUstream stream;
  CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  try {
    swapjit::Service service;
    swapjit::LayerConfig cfg;  // V4-Flash TP4: 16 heads, window 128, topk 512, v4_fp8, pages 64
    swapjit::DecodeAttention layer(service, cfg);
    service.warmup();
    std::printf("warm: arch %s, %zu keys\n", service.arch().c_str(), layer.keys().size());
    const int max_t = 20, heads = cfg.live_heads, groups = heads / 8;
    const int64_t stride = 64 * 584;
    CUdeviceptr q = alloc(size_t(max_t) * 64 * 512 * 2, 0), pos = alloc(max_t * 8, 0), cs = alloc(16 * 64 * 4, 0);
    CUdeviceptr swa_s = alloc(max_t * 128 * 4, 0xff), swa_l = alloc(max_t * 4, 0);
    CUdeviceptr comp_s = alloc(max_t * 512 * 4, 0xff), comp_l = alloc(max_t * 4, 0);
    CUdeviceptr cache = alloc(2 * stride, 0), out = alloc(max_t * groups * 4096, 0x5a), scale = alloc(1 << 20, 0x5a);
    for (int tokens : {1, 20}) {
      swapjit::DecodeStep s;
      s.num_tokens = tokens;
      s.q = (void*)q;
      s.q_token_stride = 64 * 512;
      s.positions = (const int64_t*)pos;
      s.cos_sin = (const float*)cs;
      s.max_pos = 16;
      s.swa_slots = (const int32_t*)swa_s;
      s.swa_lens = (const int32_t*)swa_l;
      s.swa_width = 128;
      s.comp_slots = (const int32_t*)comp_s;
      s.comp_lens = (const int32_t*)comp_l;
      s.comp_width = 512;
      s.swa_cache = s.comp_cache = swapjit::CacheRef{(const void*)cache, stride, 2};
      s.out_data = (void*)out;
      s.out_scale = (void*)scale;
      s.n_groups_alloc = groups;
      s.n_total = tokens;
      layer.forward(s, stream);
      CK(cuStreamSynchronize(stream));
      std::vector<unsigned char> h(size_t(tokens) * groups * 4096);
      CK(cuMemcpyDtoH(h.data(), out, h.size()));
      size_t nonzero = 0;
      for (unsigned char b : h) nonzero += b != 0;
      const int n4 = (tokens + 3) / 4 * 4;
      std::vector<unsigned char> sc(size_t(4) * groups * 32 * n4);
      CK(cuMemcpyDtoH(sc.data(), scale, sc.size()));
      size_t bad_scale = 0;
      for (int t = 0; t < tokens; ++t)
        for (int g = 0; g < groups; ++g)
          for (int b = 0; b < 128; ++b) bad_scale += sc[4 * (t + g * 32 * n4 + (b / 4) * n4) + b % 4] != 105;
      std::printf("%d token(s) via %s: nonzero data bytes %zu, scale bytes != 105: %zu\n", tokens,
                  layer.choose(tokens, 128) == swapjit::KernelChoice::kSwapab ? "swapab" : "headpad", nonzero,
                  bad_scale);
      if (nonzero || bad_scale) return 1;
      // The same step captured into a graph and replayed.
      CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
      layer.forward(s, stream);
      CUgraph graph;
      CK(cuStreamEndCapture(stream, &graph));
      CUgraphExec exec;
      CK(cuGraphInstantiate(&exec, graph, 0));
      CK(cuGraphLaunch(exec, stream));
      CK(cuStreamSynchronize(stream));
      cuGraphExecDestroy(exec);
      cuGraphDestroy(graph);
    }
    swapjit::InsertStep ins;
    ins.num_rows = 4;
    CUdeviceptr rows = alloc(4 * 512 * 2, 0), slots = alloc(4 * 8, 0);
    ins.rows = (const void*)rows;
    ins.slots = (const int64_t*)slots;
    ins.cache = swapjit::CacheRef{(const void*)cache, stride, 2};
    layer.insert(ins, true, stream);
    CK(cuStreamSynchronize(stream));
    std::printf("insert ok\n");
    // A layer built after warmup, first used inside a capture: kNotWarmed naming the key.
    swapjit::LayerConfig cold = cfg;
    cold.live_heads = 32;
    swapjit::DecodeAttention late(service, cold);
    CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    bool threw = false;
    try {
      swapjit::DecodeStep s;
      s.num_tokens = 1;
      s.q = (void*)q; s.q_token_stride = 64 * 512; s.positions = (const int64_t*)pos; s.cos_sin = (const float*)cs;
      s.max_pos = 16; s.swa_slots = (const int32_t*)swa_s; s.swa_lens = (const int32_t*)swa_l; s.swa_width = 128;
      s.comp_slots = (const int32_t*)comp_s; s.comp_lens = (const int32_t*)comp_l; s.comp_width = 512;
      s.swa_cache = s.comp_cache = swapjit::CacheRef{(const void*)cache, stride, 2};
      s.out_data = (void*)out; s.out_scale = (void*)scale; s.n_groups_alloc = 4; s.n_total = 1;
      late.forward(s, stream);
    } catch (const swapjit::Error& e) {
      threw = e.code() == swapjit::ErrorCode::kNotWarmed;
      std::printf("in capture: %.120s...\n", e.what());
    }
    CUgraph g2;
    cuStreamEndCapture(stream, &g2);
    if (!threw) return 1;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  std::printf("gpu smoke: OK\n");
  return 0;
}

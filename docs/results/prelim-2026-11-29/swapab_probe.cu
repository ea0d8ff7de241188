// Standalone GPU check of swapab_decode (throwaway harness, not part of the product).
// Build: nvcc -std=c++20 -arch=sm_90a --expt-relaxed-constexpr -I kernels_src -I cccl -DKH=.. etc.
#include <cuda_runtime.h>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <random>
#include <vector>
#include "key_shape.cuh"
#include "kernel_params.cuh"
namespace swapjit {
constexpr KeyShape kKey{KH, KW, KK, KSF, KCF, KSP, KCP, KQL, KOL};
constexpr int kVariant = 2;
}
#include "swapab_decode.cuh"
using namespace swapjit;

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); exit(2); } } while (0)

static std::mt19937 rng(1234 + KH + KK + KSF * 7 + KCF * 13 + KCP + KQL * 3 + KOL * 5);
static int ri(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
static double rd(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }

static float bf2f(uint16_t b) { uint32_t u = uint32_t(b) << 16; float f; memcpy(&f, &u, 4); return f; }
static uint16_t f2bf(float f) { uint32_t u; memcpy(&u, &f, 4); if ((u & 0x7fffffff) > 0x7f800000) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1); return uint16_t(u >> 16); }
static double e4m3(uint8_t v) { int s = v >> 7, e = (v >> 3) & 15, m = v & 7; if ((v & 0x7f) == 0x7f) return NAN;
  double x = e == 0 ? m * std::ldexp(1.0, -9) : (1 + m / 8.0) * std::ldexp(1.0, e - 7); return s ? -x : x; }
static double e2m1(int c) { static const double t[8] = {0, .5, 1, 1.5, 2, 3, 4, 6}; return (c & 8) ? -t[c & 7] : t[c & 7]; }
static uint8_t rand_e4m3() { uint8_t v; do { v = uint8_t(ri(0, 255)); } while ((v & 0x7f) == 0x7f); return v; }

struct Cache { int fmt, P, pages; int64_t stride; std::vector<uint8_t> bytes; };
static Cache make_cache(int fmt, int P, int pages) {
  Cache c{fmt, P, pages, (int64_t(P) * record_bytes(fmt) + 48 + 15) / 16 * 16, {}};
  c.bytes.resize(size_t(c.stride) * pages);
  for (auto& b : c.bytes) b = uint8_t(ri(0, 255));
  const int D = record_data_bytes(fmt), S = record_scale_bytes(fmt);
  for (int s = 0; s < P * pages; ++s) {
    uint8_t* d = &c.bytes[size_t(s / P) * c.stride + (s % P) * D];
    uint8_t* sc = &c.bytes[size_t(s / P) * c.stride + size_t(P) * D + (s % P) * S];
    if (fmt == kFormatV41Fp8) { for (int i = 0; i < 512; ++i) d[i] = rand_e4m3(); for (int i = 0; i < 16; ++i) sc[i] = uint8_t(ri(114, 122)); }
    if (fmt == kFormatV41Fp4) { for (int i = 0; i < 256; ++i) d[i] = uint8_t(ri(0, 255)); for (int i = 0; i < 32; ++i) sc[i] = uint8_t(ri(0x18, 0x40)); }
    if (fmt == kFormatV4Fp8) { for (int i = 0; i < 448; ++i) d[i] = rand_e4m3(); for (int i = 0; i < 64; ++i) { uint16_t b = f2bf(float(rd(-2, 2))); memcpy(d + 448 + 2 * i, &b, 2); }
      for (int i = 0; i < 7; ++i) sc[i] = uint8_t(ri(114, 122)); sc[7] = 0; }
  }
  return c;
}
static void decode(const Cache& c, int s, double* out) {
  const int P = c.P, D = record_data_bytes(c.fmt), S = record_scale_bytes(c.fmt);
  const uint8_t* d = &c.bytes[size_t(s / P) * c.stride + (s % P) * D];
  const uint8_t* sc = &c.bytes[size_t(s / P) * c.stride + size_t(P) * D + (s % P) * S];
  for (int i = 0; i < 512; ++i) {
    if (c.fmt == kFormatV41Fp8) out[i] = e4m3(d[i]) * std::ldexp(1.0, sc[i / 32] - 127);
    if (c.fmt == kFormatV41Fp4) out[i] = e2m1((d[i / 2] >> (4 * (i & 1))) & 15) * e4m3(sc[i / 16]);
    if (c.fmt == kFormatV4Fp8) { if (i < 448) out[i] = e4m3(d[i]) * std::ldexp(1.0, sc[i / 64] - 127);
      else { uint16_t b; memcpy(&b, d + 448 + 2 * (i - 448), 2); out[i] = bf2f(b); } }
  }
}
template <class T> static T* up(const std::vector<T>& v) { T* p; CK(cudaMalloc(&p, v.size() * sizeof(T) + 16)); CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice)); return p; }

int main(int argc, char** argv) {
  const int H = KH, T = argc > 1 ? atoi(argv[1]) : 5, mode = argc > 2 ? atoi(argv[2]) : 0;
  const int W = kKey.window, K = kKey.topk, max_pos = 4096, HP = 64;
  Cache swa = make_cache(KSF, KSP, 40), comp = K ? make_cache(KCF, KCP, 40) : Cache{};
  // Q
  const int64_t qts = KQL == kQLayoutPlain ? int64_t(H) * 512 + 8 : int64_t(HP) * 512;
  std::vector<uint16_t> q(size_t(qts) * T);
  for (auto& x : q) x = f2bf(float(rd(-1, 1)) * (mode == 1 ? 8.f : 1.f));
  auto qidx = [&](int t, int h, int d) -> size_t { return KQL == kQLayoutPlain ? size_t(t * qts + h * 512 + d) : size_t(t * qts + (d / 16) * (HP * 16) + h * 16 + d % 16); };
  std::vector<int64_t> pos(T); for (auto& x : pos) x = ri(0, max_pos - 1); pos[0] = 0; if (T > 1) pos[1] = max_pos - 1;
  std::vector<float> cs(size_t(max_pos) * 64);
  for (int p = 0; p < max_pos; ++p) for (int i = 0; i < 32; ++i) { double a = p * std::pow(10000.0, -i / 32.0); cs[p * 64 + i] = float(std::cos(a)); cs[p * 64 + 32 + i] = float(std::sin(a)); }
  auto lists = [&](int width, int nslots, std::vector<int>& sl, std::vector<int>& len) {
    sl.assign(size_t(T) * width, -1); len.assign(T, 0);
    for (int t = 0; t < T; ++t) {
      len[t] = t % 4 == 0 ? width : t % 4 == 1 ? ri(1, width) : t % 4 == 2 ? ri(0, width) : 0;
      if (T == 1) len[t] = width;
      for (int j = 0; j < width; ++j) { sl[t * width + j] = ri(0, nslots - 1); if (ri(0, 9) == 0) sl[t * width + j] = -1; }
      if (width > 4) sl[t * width + 3] = sl[t * width + 2];  // duplicate
    }
  };
  std::vector<int> ss, sln, cslv, cln; lists(W, swa.P * swa.pages, ss, sln); if (K) lists(K, comp.P * comp.pages, cslv, cln);
  std::vector<float> sink(H); for (auto& x : sink) x = float(rd(-2, 6)); sink[0] = -INFINITY; if (H > 1) sink[1] = 40.f;
  const bool use_sink = mode != 2;
  const float sm_scale = float(1.0 / std::sqrt(512.0));
  // reference
  const int ngroups = H / 8, nga = ngroups + 1, NT = T + 3, N4 = (NT + 3) / 4 * 4;
  std::vector<double> ref(size_t(T) * H * 512, 0.0);
  std::vector<double> kvrow(512);
  for (int t = 0; t < T; ++t) {
    std::vector<double> qr(size_t(H) * 512);
    const float* c = &cs[pos[t] * 64];
    for (int h = 0; h < H; ++h) { for (int d = 0; d < 448; ++d) qr[h * 512 + d] = bf2f(q[qidx(t, h, d)]);
      for (int i = 0; i < 32; ++i) { float x0 = bf2f(q[qidx(t, h, 448 + 2 * i)]), x1 = bf2f(q[qidx(t, h, 449 + 2 * i)]);
        float y0 = std::fmaf(x0, c[i], -(x1 * c[32 + i])), y1 = std::fmaf(x0, c[32 + i], x1 * c[i]);
        qr[h * 512 + 448 + 2 * i] = bf2f(f2bf(y0)); qr[h * 512 + 449 + 2 * i] = bf2f(f2bf(y1)); } }
    std::vector<std::vector<double>> rows; std::vector<std::vector<double>> z(H);
    auto add = [&](const Cache& cc, const std::vector<int>& sl, const std::vector<int>& ln, int width) {
      for (int j = 0; j < width; ++j) { if (j >= ln[t]) break; int s = sl[t * width + j]; if (s < 0) continue;
        decode(cc, s, kvrow.data()); rows.push_back(kvrow);
        for (int h = 0; h < H; ++h) { double acc = 0; for (int d = 0; d < 512; ++d) acc += qr[h * 512 + d] * kvrow[d]; z[h].push_back(double(sm_scale) * acc); } } };
    add(swa, ss, sln, W); if (K) add(comp, cslv, cln, K);
    if (rows.empty()) continue;
    for (int h = 0; h < H; ++h) {
      double m = -INFINITY; for (double v : z[h]) m = std::max(m, v);
      double L = 0; std::vector<double> o(512, 0.0);
      for (size_t j = 0; j < rows.size(); ++j) { double p = std::exp(z[h][j] - m); L += p; for (int d = 0; d < 512; ++d) o[d] += p * rows[j][d]; }
      if (use_sink) L += std::exp(double(sink[h]) - m);
      for (int d = 0; d < 512; ++d) o[d] /= L;
      for (int i = 0; i < 32; ++i) { double x0 = o[448 + 2 * i], x1 = o[449 + 2 * i]; o[448 + 2 * i] = x0 * c[i] + x1 * c[32 + i]; o[449 + 2 * i] = -x0 * c[32 + i] + x1 * c[i]; }
      for (int d = 0; d < 512; ++d) ref[(size_t(t) * H + h) * 512 + d] = o[d];
    }
  }
  // device buffers
  DecodeParams p{};
  p.num_tokens = T; p.q = up(q); p.q_token_stride = qts; p.q_h_pad = HP; p.positions = up(pos); p.cos_sin = up(cs); p.max_pos = max_pos;
  p.swa_slots = up(ss); p.swa_lens = up(sln); p.swa_width = W;
  if (K) { p.comp_slots = up(cslv); p.comp_lens = up(cln); p.comp_width = K; }
  p.sink = use_sink ? up(sink) : nullptr; p.sm_scale = sm_scale;
  p.swa_cache = {up(swa.bytes), swa.stride, swa.pages};
  if (K) p.comp_cache = {up(comp.bytes), comp.stride, comp.pages};
  const size_t data_n = size_t(NT) * nga * 4096, scale_n = size_t(4) * 32 * N4 * nga;  // bytes
  const int64_t ots = int64_t(H) * 512 + 64;
  const size_t bf_n = size_t(ots) * NT;
  std::vector<uint8_t> od(data_n, 0xA5), osc(scale_n, 0xA5); std::vector<uint16_t> ob(bf_n, 0xA5A5);
  p.out_data = up(od); p.out_scale = reinterpret_cast<int32_t*>(up(osc)); p.n_groups_alloc = nga; p.n_total = NT;
  p.out_bf16 = up(ob); p.out_token_stride = ots;
  const LaunchPlan plan = swapab_plan(kKey, kVariant);
  CK(cudaFuncSetAttribute(swapab_decode_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, plan.smem_bytes));
  cudaLaunchConfig_t cfg{}; cfg.gridDim = dim3(T * plan.ctas_per_item); cfg.blockDim = dim3(plan.threads); cfg.dynamicSmemBytes = plan.smem_bytes;
  cudaLaunchAttribute at[2]; at[0].id = cudaLaunchAttributeClusterDimension; at[0].val.clusterDim.x = plan.cluster; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
  at[1].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at; cfg.numAttrs = 2;
  std::vector<uint8_t> od1, osc1; std::vector<uint16_t> ob1;
  for (int rep = 0; rep < 2; ++rep) {
    CK(cudaLaunchKernelEx(&cfg, swapab_decode_kernel, p)); CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(od.data(), p.out_data, data_n, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(osc.data(), p.out_scale, scale_n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ob.data(), p.out_bf16, bf_n * 2, cudaMemcpyDeviceToHost));
    if (rep == 0) { od1 = od; osc1 = osc; ob1 = ob; }
  }
  if (argc > 3) {  // timing: back-to-back launches, no host work between
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    for (int i = 0; i < 20; ++i) CK(cudaLaunchKernelEx(&cfg, swapab_decode_kernel, p));
    CK(cudaEventRecord(e0)); for (int i = 0; i < 200; ++i) CK(cudaLaunchKernelEx(&cfg, swapab_decode_kernel, p)); CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); printf("TIME T=%d %.2f us/launch (stream)\n", T, ms * 1000 / 200);
    cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking)); cfg.stream = st;
    cudaGraph_t g; cudaGraphExec_t ge; CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < 100; ++i) CK(cudaLaunchKernelEx(&cfg, swapab_decode_kernel, p));
    CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, st)); CK(cudaStreamSynchronize(st));
    CK(cudaEventRecord(e0, st)); for (int i = 0; i < 5; ++i) CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1)); CK(cudaEventElapsedTime(&ms, e0, e1)); printf("TIME T=%d %.2f us/launch (graph)\n", T, ms * 1000 / 500);
    at[1].val.programmaticStreamSerializationAllowed = 0;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < 100; ++i) CK(cudaLaunchKernelEx(&cfg, swapab_decode_kernel, p));
    CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, st)); CK(cudaStreamSynchronize(st));
    CK(cudaEventRecord(e0, st)); for (int i = 0; i < 5; ++i) CK(cudaGraphLaunch(ge, st)); CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1)); CK(cudaEventElapsedTime(&ms, e0, e1)); printf("TIME T=%d %.2f us/launch (graph, no PDL)\n", T, ms * 1000 / 500);
    at[1].val.programmaticStreamSerializationAllowed = 1; cfg.stream = 0;
#ifdef SWAPAB_PROFILE
    unsigned long long pr[16]; CK(cudaMemcpyFromSymbol(pr, swapjit::swapab_prof, sizeof(pr)));
    printf("PROFILE (cycles from entry):"); for (int i = 1; i < 10; ++i) printf(" %llu", pr[i] - pr[0]); printf("\n");
#endif
  }
  int fails = 0; double worst = 0;
  if (od != od1 || osc != osc1 || ob != ob1) { printf("NONDETERMINISTIC\n"); ++fails; }
  if (KOL == kOutBf16) {
    for (size_t i = 0; i < od.size(); ++i) if (od[i] != 0xA5) { ++fails; printf("data byte written in bf16 mode\n"); break; }
    for (int t = 0; t < NT; ++t) for (int64_t e = 0; e < ots; ++e) {
      uint16_t v = ob[t * ots + e]; bool live = t < T && e < H * 512;
      if (!live && v != 0xA5A5) { if (fails++ < 5) printf("poison overwritten t=%d e=%ld\n", t, (long)e); }
    }
    for (int t = 0; t < T; ++t) for (int h = 0; h < H; ++h) {
      double num = 0, den = 0; bool nan = false;
      for (int d = 0; d < 512; ++d) { double o = bf2f(ob[t * ots + h * 512 + d]), r = ref[(size_t(t) * H + h) * 512 + d];
        if (std::isnan(o)) nan = true; num += (o - r) * (o - r); den += r * r; }
      double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
      worst = std::max(worst, rel);
      if (nan || rel > 5e-3) { if (fails++ < 8) printf("FAIL t=%d h=%d rel=%.3e nan=%d len=%d\n", t, h, rel, nan, sln[t]); }
    }
  } else {
    std::vector<char> live_d(data_n, 0), live_s(scale_n, 0);
    for (int t = 0; t < T; ++t) for (int h = 0; h < H; ++h) {
      const int g = h / 8, hg = h % 8;
      double dot = 0, nr = 0, no = 0;
      for (int blk = 0; blk < 16; ++blk) {
        const int b = blk * 8 + hg; const size_t si = size_t(4) * (t + g * 32 * N4 + (b / 4) * N4) + (b % 4);
        live_s[si] = 1; const int sb = osc[si];
        double amax = 1e-4; for (int l = 0; l < 32; ++l) amax = std::max(amax, std::fabs(ref[(size_t(t) * H + h) * 512 + blk * 32 + l]));
        const int e_ref = int(std::ceil(std::log2(double(float(amax / 448.0))))) + 127;
        if (std::abs(sb - e_ref) > 1 || (sb != e_ref && std::fabs(std::log2(amax / 448.0) - std::round(std::log2(amax / 448.0))) > 0.01)) { if (fails++ < 8) printf("FAIL scale t=%d h=%d blk=%d got %d ref %d\n", t, h, blk, sb, e_ref); }
        for (int l = 0; l < 32; ++l) {
          const size_t di = (size_t(t) * nga + g) * 4096 + blk * 256 + hg * 32 + l; live_d[di] = 1;
          const double o = e4m3(od[di]) * std::ldexp(1.0, sb - 127), r = ref[(size_t(t) * H + h) * 512 + blk * 32 + l];
          const double tol = std::max({1.1e-3, std::fabs(r) / 8, std::ldexp(1.0, sb - 127 - 10)});
          if (!(std::fabs(o - r) <= tol)) { if (fails++ < 8) printf("FAIL elem t=%d h=%d d=%d got %g ref %g\n", t, h, blk * 32 + l, o, r); }
          dot += o * r; nr += r * r; no += o * o;
        }
      }
      double rmax = 0; for (int d = 0; d < 512; ++d) rmax = std::max(rmax, std::fabs(ref[(size_t(t) * H + h) * 512 + d]));
      if (rmax > 1e-2) { double cosv = dot / std::sqrt(nr * no); worst = std::max(worst, 1 - cosv); if (!(cosv >= 1 - 1e-3)) { if (fails++ < 8) printf("FAIL cos t=%d h=%d %.6f\n", t, h, cosv); } }
    }
    for (size_t i = 0; i < data_n; ++i) if (!live_d[i] && od[i] != 0xA5) { if (fails++ < 5) printf("poison data %zu\n", i); }
    for (size_t i = 0; i < scale_n; ++i) if (!live_s[i] && osc[i] != 0xA5) { if (fails++ < 5) printf("poison scale %zu\n", i); }
    for (size_t i = 0; i < ob.size(); ++i) if (ob[i] != 0xA5A5) { ++fails; printf("bf16 written in mxfp8 mode\n"); break; }
  }
  printf("%s key h%d w%d k%d f%d/%d p%d/%d q%d o%d T=%d mode=%d worst=%.3e fails=%d\n", fails ? "FAILED" : "PASSED", KH, KW, KK, KSF, KCF, KSP, KCP, KQL, KOL, T, mode, worst, fails);
  return fails ? 1 : 0;
}

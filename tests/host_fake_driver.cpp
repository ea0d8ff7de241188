// host_fake_driver.cpp: the host-memory CUDA driver of host_fake_driver.hpp.
#include "tests/host_fake_driver.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "jit/kernel_family.hpp"
#include "kernels_src/kernel_params.cuh"
#include "kernels_src/key_shape.cuh"
#include "tests/host_fake_state.hpp"

namespace swapjit::hostfake {
using namespace detail;
namespace {

int g_primary = 0;  // its address is the one context
thread_local CUcontext t_current = nullptr;
CUcontext primary() { return reinterpret_cast<CUcontext>(&g_primary); }

// A synchronous call while this thread captures (thread-local mode) or anyone captures (global mode)
// invalidates those captures, as the driver does.
bool breaks_capture(const char* call) {
  State& s = S();
  bool broke = false;
  for (Stream& st : s.streams)
    if (st.capture == CU_STREAM_CAPTURE_STATUS_ACTIVE &&
        (st.mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL || st.capturer == std::this_thread::get_id()) &&
        st.mode != CU_STREAM_CAPTURE_MODE_RELAXED) {
      st.capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
      ++s.st.captures_invalidated;
      broke = true;
    }
  if (broke) violate(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, fmt::format("{} during a stream capture", call));
  return broke;
}
// The checks every memory / module / stream call makes. Returns CUDA_SUCCESS or the error to return.
CUresult guard(const char* call, bool sync) {
  if (!t_current) return violate(CUDA_ERROR_INVALID_CONTEXT, fmt::format("{} with no current context", call));
  if (sync && breaks_capture(call)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return CUDA_SUCCESS;
}
Stream* stream_of(CUstream h) { return reinterpret_cast<Stream*>(h); }

#define LOCK std::lock_guard<std::mutex> lock_(S().mu)

DriverApi build() {
  DriverApi d;
  d.driver_version = 13000;
  d.cuInit = [](unsigned) { return CUDA_SUCCESS; };
  d.cuDriverGetVersion = [](int* v) { *v = 13000; return CUDA_SUCCESS; };
  d.cuDeviceGet = [](CUdevice* dev, int o) { *dev = o; return o == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE; };
  d.cuDeviceGetCount = [](int* n) { *n = 1; return CUDA_SUCCESS; };
  d.cuDeviceGetName = [](char* name, int len, CUdevice) {
    std::snprintf(name, size_t(len), "%s", "NVIDIA H200 (host fake)");
    return CUDA_SUCCESS;
  };
  d.cuDeviceGetAttribute = [](int* v, CUdevice_attribute a, CUdevice) {
    switch (a) {
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
      case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
      case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
      case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *v = 65536; break;
      case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = kOptinSmem; break;
      case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; break;
      case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; break;
      case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
      case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
      case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break;
      case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 6144; break;
      case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 50331648; break;
      default: *v = 0;
    }
    return CUDA_SUCCESS;
  };
  d.cuDevicePrimaryCtxRetain = [](CUcontext* c, CUdevice dev) {
    LOCK;
    if (dev != 0) return CUDA_ERROR_INVALID_DEVICE;
    ++S().st.ctx_retains;
    *c = primary();
    return CUDA_SUCCESS;
  };
  d.cuCtxSetCurrent = [](CUcontext c) {
    if (c && c != primary()) return CUDA_ERROR_INVALID_CONTEXT;
    t_current = c;
    return CUDA_SUCCESS;
  };
  d.cuCtxGetCurrent = [](CUcontext* c) { *c = t_current; return CUDA_SUCCESS; };
  d.cuCtxSynchronize = [] { LOCK; return guard("cuCtxSynchronize", true); };
  d.cuGetErrorName = [](CUresult rc, const char** s) {
    *s = rc == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE"
         : rc == CUDA_ERROR_INVALID_CONTEXT ? "CUDA_ERROR_INVALID_CONTEXT"
         : rc == CUDA_ERROR_ILLEGAL_ADDRESS ? "CUDA_ERROR_ILLEGAL_ADDRESS"
         : rc == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED ? "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
         : rc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ? "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"
                                                        : "CUDA_ERROR_FAKE";
    return CUDA_SUCCESS;
  };
  d.cuGetErrorString = [](CUresult, const char** s) { *s = "host fake driver (see hostfake::stats())"; return CUDA_SUCCESS; };

  // ---- memory ----
  d.cuMemAlloc = [](CUdeviceptr* p, size_t bytes) {
    LOCK;
    State& s = S();
    if (CUresult rc = guard("cuMemAlloc", true)) return rc;
    if (bytes == 0) return violate(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc of 0 bytes");
    const size_t at = (s.next + kAlign - 1) / kAlign * kAlign;
    if (at + bytes > kReserve) return CUDA_ERROR_OUT_OF_MEMORY;
    s.next = at + bytes + kGap;
    Alloc a;
    a.size = bytes;
    a.host.reset(new uint8_t[bytes]);
    std::memset(a.host.get(), 0xCD, bytes);  // fresh device memory is garbage, not zeros
    *p = CUdeviceptr(uintptr_t(s.base + at));
    s.allocs.emplace(uintptr_t(s.base + at), std::move(a));
    ++s.st.allocs, ++s.st.live_allocs;
    return CUDA_SUCCESS;
  };
  d.cuMemFree = [](CUdeviceptr p) {
    LOCK;
    State& s = S();
    if (CUresult rc = guard("cuMemFree", true)) return rc;
    auto it = s.allocs.find(uintptr_t(p));
    if (it == s.allocs.end() || !it->second.host)
      return violate(CUDA_ERROR_INVALID_VALUE, fmt::format("cuMemFree({:#x}): not a live allocation", p));
    it->second.host.reset();
    ++s.st.frees, --s.st.live_allocs;
    return CUDA_SUCCESS;
  };
  d.cuMemcpyHtoD = [](CUdeviceptr dst, const void* src, size_t n) {
    LOCK;
    if (CUresult rc = guard("cuMemcpyHtoD", true)) return rc;
    std::string why;
    uint8_t* h = host_of(dst, n, &why);
    if (!h) return violate(CUDA_ERROR_INVALID_VALUE, "cuMemcpyHtoD: " + why);
    std::memcpy(h, src, n);
    return CUDA_SUCCESS;
  };
  d.cuMemcpyDtoH = [](void* dst, CUdeviceptr src, size_t n) {
    LOCK;
    if (CUresult rc = guard("cuMemcpyDtoH", true)) return rc;
    std::string why;
    const uint8_t* h = host_of(src, n, &why);
    if (!h) return violate(CUDA_ERROR_INVALID_VALUE, "cuMemcpyDtoH: " + why);
    std::memcpy(dst, h, n);
    return CUDA_SUCCESS;
  };
  d.cuMemsetD8 = [](CUdeviceptr dst, unsigned char v, size_t n) {
    LOCK;
    if (CUresult rc = guard("cuMemsetD8", true)) return rc;
    std::string why;
    uint8_t* h = host_of(dst, n, &why);
    if (!h) return violate(CUDA_ERROR_INVALID_VALUE, "cuMemsetD8: " + why);
    std::memset(h, v, n);
    return CUDA_SUCCESS;
  };

  // ---- modules ----
  d.cuModuleLoadData = [](CUmodule* mod, const void* image) {
    LOCK;
    State& s = S();
    if (CUresult rc = guard("cuModuleLoadData", true)) return rc;
    auto* b = static_cast<const unsigned char*>(image);
    if (b && (b[0] == '.' || b[0] == '/')) {  // PTX text: JIT-compiled by a real driver
      Module m;
      m.ptx = static_cast<const char*>(image);
      if (m.ptx.find(".version") == std::string::npos || m.ptx.find(".target") == std::string::npos)
        return violate(CUDA_ERROR_INVALID_PTX, "cuModuleLoadData: PTX without .version / .target");
      s.modules.push_back(std::move(m));
      ++s.st.module_loads;
      *mod = reinterpret_cast<CUmodule>(&s.modules.back());
      return CUDA_SUCCESS;
    }
    if (!b || std::memcmp(b, "\x7f" "ELF", 4) != 0 || b[4] != 2)
      return violate(CUDA_ERROR_INVALID_IMAGE, "cuModuleLoadData: not an ELF64 cubin");
    uint16_t machine, shentsize, shnum;
    uint64_t shoff;
    std::memcpy(&machine, b + 18, 2);
    std::memcpy(&shoff, b + 40, 8);
    std::memcpy(&shentsize, b + 58, 2);
    std::memcpy(&shnum, b + 60, 2);
    if (machine != 190) return violate(CUDA_ERROR_INVALID_IMAGE, "cuModuleLoadData: ELF is not EM_CUDA");
    const size_t min_size = size_t(shoff) + size_t(shentsize) * shnum;
    Module m;
    // The image holds at least its section headers; no two keys' cubins share those first bytes.
    for (const auto& [bytes, key] : s.images)
      if (bytes.size() >= min_size && std::memcmp(bytes.data(), b, min_size) == 0) {
        m.has_key = true;
        m.key = key;
        break;
      }
    s.modules.push_back(std::move(m));
    ++s.st.module_loads;
    *mod = reinterpret_cast<CUmodule>(&s.modules.back());
    return CUDA_SUCCESS;
  };
  d.cuModuleUnload = [](CUmodule m) {
    LOCK;
    reinterpret_cast<Module*>(m)->live = false;
    return CUDA_SUCCESS;
  };
  d.cuModuleGetFunction = [](CUfunction* f, CUmodule m, const char* name) {
    LOCK;
    State& s = S();
    auto* mod = reinterpret_cast<Module*>(m);
    if (!mod || !mod->live || !name) return violate(CUDA_ERROR_INVALID_HANDLE, "cuModuleGetFunction: bad module");
    const std::string n(name);
    Func f0{mod, n};
    if (!mod->ptx.empty()) {
      if (mod->ptx.find(".entry " + n + "(") == std::string::npos) return CUDA_ERROR_NOT_FOUND;
      f0.kind = n == "swapjit_bench_copy" ? Kind::kCopy : Kind::kEmpty;
    } else if (n.find("kv_insert_kernel") != n.npos) {
      f0.kind = Kind::kInsert;
    } else if (n.find("swapab_decode_kernel") == n.npos && n.find("headpad_decode_kernel") == n.npos) {
      return CUDA_ERROR_NOT_FOUND;
    }
    s.funcs.push_back(f0);
    *f = reinterpret_cast<CUfunction>(&s.funcs.back());
    return CUDA_SUCCESS;
  };
  d.cuFuncLoad = [](CUfunction) { LOCK; ++S().st.func_loads; return CUDA_SUCCESS; };
  d.cuFuncSetAttribute = [](CUfunction f, CUfunction_attribute a, int v) {
    LOCK;
    if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
      if (v < 0 || v > kOptinSmem) return violate(CUDA_ERROR_INVALID_VALUE, fmt::format("dynamic smem opt-in {}", v));
      reinterpret_cast<Func*>(f)->max_dyn_smem = v;
      S().st.max_dyn_smem_set = v;
    }
    if (a == CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) {
      if (S().refuse_non_portable) return CUDA_ERROR_NOT_SUPPORTED;
      reinterpret_cast<Func*>(f)->non_portable = v != 0;
    }
    return CUDA_SUCCESS;
  };
  d.cuFuncGetAttribute = [](int* v, CUfunction_attribute a, CUfunction) {
    *v = a == CU_FUNC_ATTRIBUTE_NUM_REGS ? kRegs : a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? kMaxThreads : 0;
    return CUDA_SUCCESS;
  };
  // As the H200 answers at 1 CTA per SM (HOPPER_NOTES §5): 17 clusters of 6, 7 of 9..16 CTAs, which
  // needs the non-portable opt-in first.
  d.cuOccupancyMaxActiveClusters = [](int* n, CUfunction f, const CUlaunchConfig* c) {
    unsigned cluster = 1;
    for (unsigned i = 0; c && i < c->numAttrs; ++i)
      if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) cluster = c->attrs[i].value.clusterDim.x;
    if (cluster > 16 || (cluster > 8 && !reinterpret_cast<Func*>(f)->non_portable)) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    *n = cluster > 8 ? 7 : cluster == 8 ? 16 : 17;  // guesses shaped like the H200 (10 CTAs: 7, 6: 17)
    return CUDA_SUCCESS;
  };

  // ---- streams, events ----
  d.cuStreamCreate = [](CUstream* h, unsigned) {
    LOCK;
    if (CUresult rc = guard("cuStreamCreate", false)) return rc;
    S().streams.emplace_back();
    *h = reinterpret_cast<CUstream>(&S().streams.back());
    return CUDA_SUCCESS;
  };
  d.cuStreamDestroy = [](CUstream h) {
    LOCK;
    if (!h) return violate(CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy(null)");
    stream_of(h)->live = false;
    return CUDA_SUCCESS;
  };
  d.cuStreamSynchronize = [](CUstream h) {
    LOCK;
    if (CUresult rc = guard("cuStreamSynchronize", false)) return rc;
    if (h && stream_of(h)->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
      stream_of(h)->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
      return violate(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "cuStreamSynchronize of a capturing stream");
    }
    return CUDA_SUCCESS;
  };
  d.cuEventCreate = [](CUevent* e, unsigned) {
    LOCK;
    S().events.push_back(0);
    *e = reinterpret_cast<CUevent>(&S().events.back());
    return CUDA_SUCCESS;
  };
  d.cuEventRecord = [](CUevent e, CUstream) {
    *reinterpret_cast<int*>(e) = 1;
    return CUDA_SUCCESS;
  };
  d.cuEventElapsedTime = [](float* ms, CUevent a, CUevent b) {
    if (!*reinterpret_cast<int*>(a) || !*reinterpret_cast<int*>(b)) return CUDA_ERROR_INVALID_HANDLE;
    *ms = 0.001f;
    return CUDA_SUCCESS;
  };
  d.cuEventDestroy = [](CUevent) { return CUDA_SUCCESS; };

  // ---- capture, graphs ----
  d.cuStreamBeginCapture = [](CUstream h, CUstreamCaptureMode mode) {
    LOCK;
    State& s = S();
    if (!h) return violate(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "capture of the legacy stream");
    Stream& st = *stream_of(h);
    if (st.capture != CU_STREAM_CAPTURE_STATUS_NONE) return violate(CUDA_ERROR_ILLEGAL_STATE, "capture begun twice");
    st.capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    st.mode = mode;
    st.capturer = std::this_thread::get_id();
    st.capture_id = ++s.capture_ids;
    st.captured.clear();
    ++s.st.captures_begun;
    return CUDA_SUCCESS;
  };
  d.cuStreamIsCapturing = [](CUstream h, CUstreamCaptureStatus* st) {
    LOCK;
    ++S().st.capture_queries;
    *st = h ? stream_of(h)->capture : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
  };
  d.cuStreamGetCaptureInfo = [](CUstream h, CUstreamCaptureStatus* st, cuuint64_t* id, CUgraph* g,
                                const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* n) {
    LOCK;
    *st = h ? stream_of(h)->capture : CU_STREAM_CAPTURE_STATUS_NONE;
    if (id) *id = h ? stream_of(h)->capture_id : 0;
    if (g) *g = nullptr;
    if (deps) *deps = nullptr;
    if (edges) *edges = nullptr;
    if (n) *n = 0;
    return CUDA_SUCCESS;
  };
  d.cuStreamEndCapture = [](CUstream h, CUgraph* g) {
    LOCK;
    State& s = S();
    *g = nullptr;
    if (!h || stream_of(h)->capture == CU_STREAM_CAPTURE_STATUS_NONE)
      return violate(CUDA_ERROR_ILLEGAL_STATE, "cuStreamEndCapture without a capture");
    Stream& st = *stream_of(h);
    const bool ok = st.capture == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    st.capture = CU_STREAM_CAPTURE_STATUS_NONE;
    if (!ok) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    s.graphs.push_back(Graph{std::move(st.captured)});
    st.captured.clear();
    *g = reinterpret_cast<CUgraph>(&s.graphs.back());
    return CUDA_SUCCESS;
  };
  d.cuGraphInstantiate = [](CUgraphExec* e, CUgraph g, unsigned long long) {
    LOCK;
    if (!g) return violate(CUDA_ERROR_INVALID_VALUE, "cuGraphInstantiate(null graph)");
    S().graphs.push_back(*reinterpret_cast<Graph*>(g));
    *e = reinterpret_cast<CUgraphExec>(&S().graphs.back());
    return CUDA_SUCCESS;
  };
  d.cuGraphLaunch = [](CUgraphExec e, CUstream) {
    LOCK;
    if (CUresult rc = guard("cuGraphLaunch", false)) return rc;
    for (const Pending& p : reinterpret_cast<Graph*>(e)->launches)
      if (CUresult rc = run_launch(p, true)) return rc;
    return CUDA_SUCCESS;
  };
  d.cuGraphDestroy = [](CUgraph) { return CUDA_SUCCESS; };
  d.cuGraphExecDestroy = [](CUgraphExec) { return CUDA_SUCCESS; };

  // ---- launch ----
  d.cuLaunchKernelEx = [](const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
    InLaunch mark;  // the fake's own bookkeeping below is not the caller's allocation
    LOCK;
    if (CUresult rc = guard("cuLaunchKernelEx", false)) return rc;
    return launch_entry(c, f, params, extra);
  };
  return d;
}

}  // namespace

const DriverApi& table() {
  static const DriverApi t = build();
  return t;
}

void reset() {
  LOCK;
  State& s = S();
  if (!s.base) {
    void* p = mmap(nullptr, kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("hostfake: cannot reserve the fake device address space");
    s.base = static_cast<uint8_t*>(p);
  }
  // NOTE: addresses are not rewound: a stale pointer from an earlier test can never alias a new buffer.
  s.allocs.clear();
  s.modules.clear();
  s.funcs.clear();
  s.streams.clear();
  s.graphs.clear();
  s.events.clear();
  s.images.clear();
  s.fail_rc = CUDA_SUCCESS;
  s.refuse_non_portable = false;
  s.st = Stats{};
  t_current = nullptr;
}

Scope::Scope() {
  reset();
  install_driver_for_testing(&table());
}
Scope::~Scope() {
  install_driver_for_testing(nullptr);
  std::lock_guard<std::mutex> lock(S().mu);
  t_current = nullptr;
}

}  // namespace swapjit::hostfake

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

namespace swapjit::hostfake {
namespace {

constexpr size_t kReserve = size_t(64) << 30;  // virtual only (PROT_NONE, no backing)
constexpr size_t kAlign = 256, kGap = 4096;    // cuMemAlloc's alignment; an unmapped gap between buffers
constexpr int kOptinSmem = 232448, kRegs = 128, kMaxThreads = 65536 / kRegs;

struct Alloc {
  size_t size = 0;
  std::unique_ptr<uint8_t[]> host;  // null once freed (the entry stays: a use after free is named as such)
};
struct Module {
  bool live = true;
  bool has_key = false;
  CompileKey key;
};
struct Func {
  Module* module = nullptr;
  std::string name;
  int max_dyn_smem = 48 * 1024;
};
struct Pending {  // one launch as captured: replayed (re-validated) by cuGraphLaunch
  Func* f = nullptr;
  unsigned grid = 0, block = 0, cluster = 1, smem = 0;
  bool pdl = false;
  alignas(16) unsigned char params[sizeof(DecodeParams) > sizeof(InsertParams) ? sizeof(DecodeParams)
                                                                                : sizeof(InsertParams)] = {};
};
struct Stream {
  bool live = true;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::thread::id capturer;
  uint64_t capture_id = 0;
  std::vector<Pending> captured;
};
struct Graph {
  std::vector<Pending> launches;
};

struct State {
  std::mutex mu;
  uint8_t* base = nullptr;  // the PROT_NONE reservation
  size_t next = 0;
  std::map<uintptr_t, Alloc> allocs;  // by device address
  std::deque<Module> modules;
  std::deque<Func> funcs;
  std::deque<Stream> streams;
  std::deque<Graph> graphs;
  std::deque<int> events;
  std::vector<std::pair<std::string, CompileKey>> images;
  uint64_t capture_ids = 0;
  Stats st;
};
State& S() {
  static State s;
  return s;
}
int g_primary = 0;  // its address is the one context
thread_local CUcontext t_current = nullptr;

CUresult violate(CUresult rc, const std::string& what) {
  State& s = S();
  ++s.st.violations;
  if (s.st.violation_log.size() < 16) s.st.violation_log.push_back(what);
  return rc;
}
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
// The host bytes of [dptr, dptr + bytes), or null with `why` set.
uint8_t* host_of(CUdeviceptr dptr, size_t bytes, std::string* why) {
  State& s = S();
  auto it = s.allocs.upper_bound(uintptr_t(dptr));
  if (it == s.allocs.begin()) {
    *why = fmt::format("{:#x} is not inside any allocation", dptr);
    return nullptr;
  }
  --it;
  const size_t off = uintptr_t(dptr) - it->first;
  if (!it->second.host) {
    *why = fmt::format("{:#x} is inside a freed allocation", dptr);
    return nullptr;
  }
  if (off + bytes > it->second.size) {
    *why = fmt::format("[{:#x}, +{}) runs past its allocation ({} bytes, offset {})", dptr, bytes, it->second.size, off);
    return nullptr;
  }
  return it->second.host.get() + off;
}
Stream* stream_of(CUstream h) { return reinterpret_cast<Stream*>(h); }

// ---- launch validation ----

struct Checker {
  std::vector<std::string>& out;
  void range(const void* p, long long bytes, const char* what) {
    if (bytes <= 0) return;
    if (!p) {
      out.push_back(fmt::format("{} is null but {} bytes are read/written", what, bytes));
      return;
    }
    std::string why;
    if (!host_of(CUdeviceptr(uintptr_t(p)), size_t(bytes), &why))
      out.push_back(fmt::format("{} ({} bytes): {}", what, bytes, why));
  }
  void cache(const CacheView& c, int format, int page, const char* what) {
    if (c.pages < 1) out.push_back(fmt::format("{}.pages {} < 1", what, c.pages));
    if (format != kFormatNone && c.page_stride < (long long)page * record_bytes(format))
      out.push_back(fmt::format("{}.page_stride {} < {} * {}", what, c.page_stride, page, record_bytes(format)));
    range(c.base, (long long)c.pages * c.page_stride, what);
  }
  // Every used slot id of a [T, width] list (lens per token) lies inside the cache (the fake reads the
  // lists through its own copies, as the kernel would).
  void slots(const int32_t* list, const int32_t* lens, int T, int width, const CacheView& c, int page,
             const char* what) {
    std::string why;
    auto* l = reinterpret_cast<const int32_t*>(host_of(CUdeviceptr(uintptr_t(list)), size_t(T) * width * 4, &why));
    auto* n = reinterpret_cast<const int32_t*>(host_of(CUdeviceptr(uintptr_t(lens)), size_t(T) * 4, &why));
    if (!l || !n || page <= 0) return;  // already reported by range()
    const long long cap = (long long)c.pages * page;
    for (int t = 0; t < T; ++t) {
      if (n[t] < 0 || n[t] > width) out.push_back(fmt::format("{} len[{}] = {} not in 0..{}", what, t, n[t], width));
      for (int j = 0; j < std::min(n[t], width); ++j)
        if (l[size_t(t) * width + j] < -1 || l[size_t(t) * width + j] >= cap) {
          out.push_back(fmt::format("{}[{}][{}] = {} outside the cache's {} slots", what, t, j, l[size_t(t) * width + j], cap));
          return;
        }
    }
  }
};

void check_decode(const DecodeParams& p, const Module& m, std::vector<std::string>& out) {
  Checker c{out};
  const int T = p.num_tokens;
  if (T < 1) out.push_back(fmt::format("num_tokens {} < 1", T));
  const bool key = m.has_key;
  const int H = key ? m.key.live_heads : 8;  // unknown image: the smallest legal head count
  const bool chunk16 = key && m.key.q_layout == kQLayoutChunk16;
  const long long q_row = chunk16 ? 496LL * p.q_h_pad + 16LL * H : (long long)H * kHeadDim;  // last index + 1
  c.range(p.q, ((T - 1LL) * p.q_token_stride + q_row) * 2, "q");
  c.range(p.positions, T * 8LL, "positions");
  c.range(p.cos_sin, (long long)p.max_pos * 64 * 4, "cos_sin");
  if (p.max_pos < 1) out.push_back("max_pos < 1");
  c.range(p.swa_slots, (long long)T * p.swa_width * 4, "swa_slots");
  c.range(p.swa_lens, T * 4LL, "swa_lens");
  c.cache(p.swa_cache, key ? m.key.swa_format : kFormatNone, key ? m.key.swa_page : 0, "swa_cache");
  if (key) c.slots(p.swa_slots, p.swa_lens, T, p.swa_width, p.swa_cache, m.key.swa_page, "swa_slots");
  const bool comp = key ? m.key.topk > 0 : p.comp_width > 0;
  if (comp) {
    c.range(p.comp_slots, (long long)T * p.comp_width * 4, "comp_slots");
    c.range(p.comp_lens, T * 4LL, "comp_lens");
    c.cache(p.comp_cache, key ? m.key.comp_format : kFormatNone, key ? m.key.comp_page : 0, "comp_cache");
    if (key) c.slots(p.comp_slots, p.comp_lens, T, p.comp_width, p.comp_cache, m.key.comp_page, "comp_slots");
  }
  if (p.sink) c.range(p.sink, H * 4LL, "sink");
  const bool mx = key ? m.key.out_layout == kOutMxfp8Ofused : p.out_data != nullptr;
  if (mx) {
    if (p.n_total < T) out.push_back(fmt::format("n_total {} < num_tokens {}", p.n_total, T));
    if (p.n_groups_alloc < H / kHeadsPerGroup) out.push_back(fmt::format("n_groups_alloc {} < {}", p.n_groups_alloc, H / 8));
    c.range(p.out_data, (long long)p.n_total * p.n_groups_alloc * kGroupDataBytes, "out_data");
    c.range(p.out_scale, 4LL * 32 * ((p.n_total + 3) / 4 * 4) * p.n_groups_alloc, "out_scale");
  } else {
    c.range(p.out_bf16, ((T - 1LL) * p.out_token_stride + (long long)H * kHeadDim) * 2, "out_bf16");
  }
}

void check_insert(const InsertParams& p, const Module& m, std::vector<std::string>& out) {
  Checker c{out};
  const int R = p.num_rows;
  if (R < 1) out.push_back(fmt::format("num_rows {} < 1 (an empty grid)", R));
  c.range(p.rows, ((R - 1LL) * p.row_stride + kHeadDim) * 2, "rows");
  c.range(p.slots, R * 8LL, "slots");
  if (p.positions) {
    c.range(p.positions, R * 8LL, "positions");
    c.range(p.cos_sin, (long long)p.max_pos * 64 * 4, "cos_sin");
  }
  const int page = m.has_key ? m.key.swa_page : 0;
  c.cache(p.cache, m.has_key ? m.key.swa_format : kFormatNone, page, "cache");
  std::string why;
  auto* sl = reinterpret_cast<const int64_t*>(host_of(CUdeviceptr(uintptr_t(p.slots)), size_t(R) * 8, &why));
  if (sl && page > 0)
    for (int r = 0; r < R; ++r)
      if (sl[r] < -1 || sl[r] >= (long long)p.cache.pages * page) {
        out.push_back(fmt::format("slots[{}] = {} outside the cache", r, sl[r]));
        break;
      }
}

// Validates one launch (eager or replayed) and logs it. Returns the driver's answer.
CUresult run_launch(const Pending& L, bool from_graph) {
  State& s = S();
  Launch rec;
  rec.function = L.f->name;
  rec.grid = L.grid, rec.block = L.block, rec.cluster = L.cluster, rec.smem = L.smem, rec.pdl = L.pdl;
  rec.from_graph = from_graph;
  rec.keyed = L.f->module->has_key;
  auto& pr = rec.problems;
  CUresult rc = CUDA_SUCCESS;
  if (!L.f->module->live) pr.push_back("function of an unloaded module");
  if (L.block < 1 || L.block > unsigned(kMaxThreads)) pr.push_back(fmt::format("block {} > {} threads", L.block, kMaxThreads));
  if (L.cluster > 8) pr.push_back(fmt::format("cluster {} > 8", L.cluster));
  if (L.grid < 1 || L.grid % L.cluster) pr.push_back(fmt::format("grid {} not a positive multiple of cluster {}", L.grid, L.cluster));
  if (int(L.smem) > L.f->max_dyn_smem) pr.push_back(fmt::format("smem {} > the function's opt-in {}", L.smem, L.f->max_dyn_smem));
  const Module& m = *L.f->module;
  const bool insert = L.f->name.find("kv_insert") != std::string::npos;
  if (m.has_key) {  // the launch must be the key's plan
    const LaunchPlan plan = launch_plan(m.key);
    const unsigned cl = plan.cluster > 1 ? unsigned(plan.cluster) : 1;
    if (L.block != unsigned(plan.threads) || L.cluster != cl || L.smem != unsigned(plan.smem_bytes) ||
        L.grid % unsigned(plan.ctas_per_item))
      pr.push_back(fmt::format("config grid {} block {} cluster {} smem {} is not the key's plan ({} ctas/item, {}, {}, {})",
                               L.grid, L.block, L.cluster, L.smem, plan.ctas_per_item, plan.threads, cl, plan.smem_bytes));
  }
  if (!pr.empty()) rc = CUDA_ERROR_INVALID_VALUE;
  if (insert) {
    InsertParams p;
    std::memcpy(&p, L.params, sizeof p);
    check_insert(p, m, pr);
  } else {
    DecodeParams p;
    std::memcpy(&p, L.params, sizeof p);
    check_decode(p, m, pr);
  }
  if (!pr.empty() && rc == CUDA_SUCCESS) rc = CUDA_ERROR_ILLEGAL_ADDRESS;  // the kernel would fault
  if (!pr.empty()) violate(rc, fmt::format("launch of {}: {}", L.f->name, pr.front()));
  ++(from_graph ? s.st.graph_launches : s.st.launches);
  if (s.st.launches_log.size() < 4096) s.st.launches_log.push_back(std::move(rec));
  return rc;
}

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
    if (n.find("swapab_decode_kernel") == n.npos && n.find("headpad_decode_kernel") == n.npos &&
        n.find("kv_insert_kernel") == n.npos)
      return CUDA_ERROR_NOT_FOUND;
    s.funcs.push_back(Func{mod, n});
    *f = reinterpret_cast<CUfunction>(&s.funcs.back());
    return CUDA_SUCCESS;
  };
  d.cuFuncLoad = [](CUfunction) { return CUDA_SUCCESS; };
  d.cuFuncSetAttribute = [](CUfunction f, CUfunction_attribute a, int v) {
    LOCK;
    if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
      if (v < 0 || v > kOptinSmem) return violate(CUDA_ERROR_INVALID_VALUE, fmt::format("dynamic smem opt-in {}", v));
      reinterpret_cast<Func*>(f)->max_dyn_smem = v;
    }
    return CUDA_SUCCESS;
  };
  d.cuFuncGetAttribute = [](int* v, CUfunction_attribute a, CUfunction) {
    *v = a == CU_FUNC_ATTRIBUTE_NUM_REGS ? kRegs : a == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? kMaxThreads : 0;
    return CUDA_SUCCESS;
  };
  d.cuOccupancyMaxActiveClusters = [](int* n, CUfunction, const CUlaunchConfig*) { *n = 17; return CUDA_SUCCESS; };

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
    LOCK;
    if (CUresult rc = guard("cuLaunchKernelEx", false)) return rc;
    if (!c || !f || !params || !params[0] || extra)
      return violate(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernelEx: null config / function / params, or extra set");
    Pending p;
    p.f = reinterpret_cast<Func*>(f);
    p.grid = c->gridDimX, p.block = c->blockDimX, p.smem = c->sharedMemBytes;
    if (c->gridDimY != 1 || c->gridDimZ != 1 || c->blockDimY != 1 || c->blockDimZ != 1)
      return violate(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernelEx: y/z dimensions are not 1");
    for (unsigned i = 0; i < c->numAttrs; ++i) {
      if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) p.cluster = c->attrs[i].value.clusterDim.x;
      if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
        p.pdl = c->attrs[i].value.programmaticStreamSerializationAllowed != 0;
    }
    const bool insert = p.f->name.find("kv_insert") != std::string::npos;
    std::memcpy(p.params, params[0], insert ? sizeof(InsertParams) : sizeof(DecodeParams));
    Stream* st = stream_of(c->hStream);
    if (st && st->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
      st->captured.push_back(p);
      // Validated now too (a capture records pointers that must be live when it replays).
      std::vector<std::string> pr;
      if (insert) {
        InsertParams ip;
        std::memcpy(&ip, p.params, sizeof ip);
        check_insert(ip, *p.f->module, pr);
      } else {
        DecodeParams dp;
        std::memcpy(&dp, p.params, sizeof dp);
        check_decode(dp, *p.f->module, pr);
      }
      if (!pr.empty()) return violate(CUDA_ERROR_ILLEGAL_ADDRESS, "captured launch: " + pr.front());
      return CUDA_SUCCESS;
    }
    return run_launch(p, false);
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
  s.st = Stats{};
  t_current = nullptr;
}

Stats stats() {
  LOCK;
  return S().st;
}

void register_image(const std::string& cubin, const CompileKey& key) {
  LOCK;
  for (const auto& im : S().images)
    if (im.first == cubin) return;
  S().images.emplace_back(cubin, key);
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

// driver.cpp: dlopen("libcuda.so.1") once, resolve the typed entry points with cuGetProcAddress_v2.
#include "runtime/driver.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string_view>

#include <fmt/format.h>

namespace swapjit {
namespace {

// The loaded real table, or the reason there is none. Built once under g_once; never freed (the driver
// stays loaded for the life of the process, as libcudart does).
struct Loaded {
  DriverApi api;
  bool ok = false;
  ErrorCode code = ErrorCode::kNoDriver;
  std::string reason;
};

std::once_flag g_once;
Loaded* g_loaded = nullptr;
// What driver() returns on the hot path: the fake table when a test installed one, else the real one
// (set once g_loaded->ok). One acquire load per call.
std::atomic<const DriverApi*> g_active{nullptr};
std::atomic<const DriverApi*> g_fake{nullptr};

using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

}  // namespace

DriverSymbolRequest driver_symbol_request(const char* field, int want) {
  const std::string_view f(field);
  // cuda.h #defines cuGraphInstantiate to cuGraphInstantiateWithFlags (so the field has the 3-argument
  // type), while the driver's unversioned "cuGraphInstantiate" is the legacy 5-argument entry at the older
  // versions: ask for the symbol the field's type names.
  if (f == "cuGraphInstantiate") return {"cuGraphInstantiateWithFlags", want};
  // cuda.h declares cuCtxSynchronize(void) with no version macro, but from 13.0 the driver serves
  // cuCtxSynchronize_v2(CUcontext) under that name (cudaTypedefs.h: PFN_cuCtxSynchronize_v13000). Asking
  // at 13000 returned the one-argument function, which our zero-argument calls handed a garbage context
  // (a host SIGSEGV inside libcuda on the H200). Cap the request below 13.0: the void ABI.
  if (f == "cuCtxSynchronize") return {"cuCtxSynchronize", std::min(want, 12090)};
  return {field, want};
}

namespace {

void load_real() {
  auto* l = new Loaded();
  g_loaded = l;
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    l->reason = fmt::format("libcuda.so.1 not found: {} (no GPU driver on this machine)", why ? why : "?");
    return;
  }
  auto get_proc = reinterpret_cast<GetProcAddressFn>(dlsym(handle, "cuGetProcAddress_v2"));
  auto driver_version = reinterpret_cast<CUresult (*)(int*)>(dlsym(handle, "cuDriverGetVersion"));
  if (!get_proc || !driver_version) {
    l->reason = "libcuda.so.1 has no cuGetProcAddress_v2: the driver is older than CUDA 12; swapjit needs 12.3+";
    return;
  }
  int version = 0;
  driver_version(&version);
  l->api.driver_version = version;
  // Ask for each symbol as this build's cuda.h declares it, but never for a version above the driver's.
  const int want = std::min(version, CUDA_VERSION);
  std::string missing;
  auto resolve = [&](const char* name, void** slot, bool required) {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    const DriverSymbolRequest req = driver_symbol_request(name, want);
    CUresult rc = get_proc(req.symbol, slot, req.version, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (rc != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || *slot == nullptr) {
      *slot = nullptr;
      if (required) missing += std::string(missing.empty() ? "" : ", ") + name;
    }
  };
#define SWAPJIT_RESOLVE_REQ(name) resolve(#name, reinterpret_cast<void**>(&l->api.name), true);
#define SWAPJIT_RESOLVE_OPT(name) resolve(#name, reinterpret_cast<void**>(&l->api.name), false);
  SWAPJIT_DRIVER_FUNCTIONS(SWAPJIT_RESOLVE_REQ)
  SWAPJIT_DRIVER_OPTIONAL_FUNCTIONS(SWAPJIT_RESOLVE_OPT)
#undef SWAPJIT_RESOLVE_REQ
#undef SWAPJIT_RESOLVE_OPT
  // NOTE: cuStreamGetCaptureInfo below 12.3 resolves to the _v2 signature, which this cuda.h's _v3
  // prototype does not match: drop it rather than call it with the wrong arguments.
  if (version < 12030) l->api.cuStreamGetCaptureInfo = nullptr;
  if (!missing.empty()) {
    l->code = ErrorCode::kDriver;
    l->reason = fmt::format("libcuda.so.1 (driver version {}) lacks entry points swapjit needs: {}", version,
                            missing);
    return;
  }
  CUresult rc = l->api.cuInit(0);
  if (rc != CUDA_SUCCESS) {
    const char* name = nullptr;
    l->api.cuGetErrorName(rc, &name);
    l->code = rc == CUDA_ERROR_NO_DEVICE ? ErrorCode::kNoDriver : ErrorCode::kDriver;
    l->reason = fmt::format("cuInit(0) failed: {} (driver version {}; no usable GPU on this machine?)",
                            name ? name : "?", version);
    return;
  }
  l->ok = true;
  g_active.store(&l->api, std::memory_order_release);
}

}  // namespace

const DriverApi& driver() {
  if (const DriverApi* fake = g_fake.load(std::memory_order_acquire)) return *fake;
  if (const DriverApi* real = g_active.load(std::memory_order_acquire)) return *real;
  std::call_once(g_once, load_real);
  if (!g_loaded->ok) throw Error(g_loaded->code, g_loaded->reason);
  return g_loaded->api;
}

bool has_driver() {
  try {
    driver();
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string no_driver_reason() {
  if (g_fake.load()) return {};
  std::call_once(g_once, load_real);
  return g_loaded->ok ? std::string() : g_loaded->reason;
}

void install_driver_for_testing(const DriverApi* fake) { g_fake.store(fake, std::memory_order_release); }

std::string cu_error_text(CUresult rc) {
  const DriverApi* api = g_fake.load();
  if (!api) api = g_active.load();
  const char* name = nullptr;
  const char* text = nullptr;
  if (api && api->cuGetErrorName) api->cuGetErrorName(rc, &name);
  if (api && api->cuGetErrorString) api->cuGetErrorString(rc, &text);
  return fmt::format("{} ({}): {}", name ? name : "CUresult", static_cast<int>(rc), text ? text : "no description");
}

void throw_cu_error(CUresult rc, const char* call, const char* file, int line, const std::string& key_json) {
  throw_error(ErrorCode::kDriver, fmt::format("{} failed: {}", call, cu_error_text(rc)), file, line, key_json);
}

}  // namespace swapjit

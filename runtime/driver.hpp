// driver.hpp: the CUDA Driver API, loaded at run time with dlopen("libcuda.so.1") (DESIGN.md "Driver by
// dlopen, NVRTC linked"). The library, CLI and CPU tests run on machines with the toolkit and no driver;
// there every GPU-needing call throws Error(kNoDriver) with a clear message instead of failing to load.
//
// Entry points are resolved once with cuGetProcAddress_v2 (CUDA 12+), asking for the version of each
// symbol that this build's cuda.h declares (capped at the driver's version), so that a `_v2` / `_v3`
// signature in cuda.h always matches the pointer we get. Tests may install a fake table.
#pragma once
#include <string>

#include <cuda.h>  // types and prototypes only; nothing here links against libcuda

#include "jit/error.hpp"

namespace swapjit {

// X-macro list of every driver entry point swapjit uses. The field of DriverApi is named after the
// cuda.h spelling (which may be a macro for a versioned symbol, e.g. cuMemAlloc -> cuMemAlloc_v2; the
// field then carries the versioned name, and calls through `api.cuMemAlloc(...)` expand the same way).
// The string handed to cuGetProcAddress is the unversioned name (stringified before expansion).
#define SWAPJIT_DRIVER_FUNCTIONS(X)                                                                 \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetAttribute)       \
  X(cuDeviceGetName) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxGetCurrent)              \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncSetAttribute)               \
  X(cuFuncGetAttribute) X(cuLaunchKernelEx) X(cuStreamIsCapturing) X(cuOccupancyMaxActiveClusters) \
  X(cuGetErrorName) X(cuGetErrorString) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH)  \
  X(cuMemsetD8) X(cuStreamSynchronize) X(cuCtxSynchronize) X(cuEventCreate) X(cuEventRecord)        \
  X(cuEventElapsedTime) X(cuEventDestroy) X(cuStreamCreate) X(cuStreamDestroy)                      \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch)              \
  X(cuGraphDestroy) X(cuGraphExecDestroy)

// Entry points that may be missing on an older driver (nullptr then; callers check).
//   cuFuncLoad: CUDA 12.4+. cuStreamGetCaptureInfo (_v3 signature in this cuda.h): CUDA 12.3+.
//   cuModuleGetGlobal: only `swapjit timeline` (a development tool) reads a module global.
#define SWAPJIT_DRIVER_OPTIONAL_FUNCTIONS(X) X(cuFuncLoad) X(cuStreamGetCaptureInfo) X(cuModuleGetGlobal)

struct DriverApi {
#define SWAPJIT_DRIVER_FIELD(name) decltype(&::name) name = nullptr;
  SWAPJIT_DRIVER_FUNCTIONS(SWAPJIT_DRIVER_FIELD)
  SWAPJIT_DRIVER_OPTIONAL_FUNCTIONS(SWAPJIT_DRIVER_FIELD)
#undef SWAPJIT_DRIVER_FIELD
  int driver_version = 0;  // cuDriverGetVersion, e.g. 12080
};

// The process-wide table. The first call dlopens libcuda.so.1, resolves every entry point and runs
// cuInit(0); later calls are one atomic load. Throws Error(kNoDriver) when libcuda.so.1 is absent or
// cuInit reports no device, Error(kDriver) when an entry point is missing.
const DriverApi& driver();
// True when driver() would succeed. Never throws.
bool has_driver();
// The reason has_driver() is false (empty when it is true).
std::string no_driver_reason();

// What load_real() hands cuGetProcAddress for the DriverApi field named `field` when the build wants
// version `want` (min of the driver's and this cuda.h's): the symbol (usually `field` itself) and the
// version whose ABI matches the field's type. Exposed for tests.
struct DriverSymbolRequest {
  const char* symbol;
  int version;
};
DriverSymbolRequest driver_symbol_request(const char* field, int want);

// Tests: make driver() return `fake` (not owned; must outlive its use). nullptr restores the real one.
void install_driver_for_testing(const DriverApi* fake);

// Throws Error(kDriver) naming the call, the decoded CUDA error and file:line (and the key, when given).
[[noreturn]] void throw_cu_error(CUresult rc, const char* call, const char* file, int line,
                                 const std::string& key_json = {});

// Decoded "CUDA_ERROR_X: description" for a result code (uses the installed table when there is one).
std::string cu_error_text(CUresult rc);

}  // namespace swapjit

// SWAPJIT_CU(api.cuFoo(...)): throws Error(kDriver) with the call text when it does not return
// CUDA_SUCCESS. SWAPJIT_CU_KEY adds the compile key's canonical JSON to the error.
#define SWAPJIT_CU(call)                                                               \
  do {                                                                                 \
    CUresult swapjit_cu_rc_ = (call);                                                  \
    if (swapjit_cu_rc_ != CUDA_SUCCESS)                                                \
      ::swapjit::throw_cu_error(swapjit_cu_rc_, #call, __FILE__, __LINE__);            \
  } while (0)
#define SWAPJIT_CU_KEY(call, key_json)                                                 \
  do {                                                                                 \
    CUresult swapjit_cu_rc_ = (call);                                                  \
    if (swapjit_cu_rc_ != CUDA_SUCCESS)                                                \
      ::swapjit::throw_cu_error(swapjit_cu_rc_, #call, __FILE__, __LINE__, (key_json)); \
  } while (0)

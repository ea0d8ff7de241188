// fake_driver.hpp: a DriverApi whose functions succeed without a GPU and record what they were given, for
// the CPU tests of the launch path (tests/test_launch_path.cpp, tests/test_c_api.cpp). Modules are the
// "cubin" bytes (a test's fake store puts the key's canonical JSON there), functions are module indices.
#pragma once
#include <cstring>
#include <string>
#include <vector>

#include "runtime/driver.hpp"

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

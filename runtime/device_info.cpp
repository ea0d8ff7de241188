// device_info.cpp: device limits through the dlopen'ed driver.
#include "runtime/device_info.hpp"

#include <fmt/format.h>

#include "runtime/driver.hpp"

namespace swapjit {

std::string arch_for_compute_capability(int major, int minor) {
  if (major == 9 && minor == 0) return "sm_90a";
  if (major == 10 && minor == 0) return "sm_100a";
  return fmt::format("sm_{}{}", major, minor);
}

DeviceInfo query_device(int ordinal) {
  const DriverApi& api = driver();
  int count = 0;
  SWAPJIT_CU(api.cuDeviceGetCount(&count));
  if (ordinal < 0 || ordinal >= count)
    SWAPJIT_THROW(ErrorCode::kInvalidArgument,
                  fmt::format("device ordinal {} out of range: this machine has {} CUDA device(s)", ordinal, count));
  CUdevice dev = 0;
  SWAPJIT_CU(api.cuDeviceGet(&dev, ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  SWAPJIT_CU(api.cuDeviceGetName(name, sizeof(name) - 1, dev));
  info.name = name;
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    SWAPJIT_CU(api.cuDeviceGetAttribute(&v, a, dev));
    return v;
  };
  info.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  info.max_regs_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  info.max_smem_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info.max_smem_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  info.arch = arch_for_compute_capability(info.cc_major, info.cc_minor);
  return info;
}

CUcontext ensure_context(int ordinal) {
  const DriverApi& api = driver();
  CUcontext current = nullptr;
  SWAPJIT_CU(api.cuCtxGetCurrent(&current));
  if (current) return current;
  CUdevice dev = 0;
  SWAPJIT_CU(api.cuDeviceGet(&dev, ordinal));
  // NOTE: retained for the life of the process, never released: modules loaded into it must outlive every
  // graph that captured their functions.
  SWAPJIT_CU(api.cuDevicePrimaryCtxRetain(&current, dev));
  SWAPJIT_CU(api.cuCtxSetCurrent(current));
  return current;
}

}  // namespace swapjit

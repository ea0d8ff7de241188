// device_info.hpp: the limits of one CUDA device that swapjit checks kernels against at load time, and the
// arch string its keys are compiled for.
#pragma once
#include <string>

#include <cuda.h>

namespace swapjit {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int max_threads_per_block = 0;
  int max_regs_per_block = 0;
  int max_smem_per_block_optin = 0;  // bytes a kernel may opt in to (static + dynamic)
  int max_smem_per_sm = 0;
  std::string arch;  // the key's arch: "sm_90a", "sm_100a", else "sm_<maj><min>"
};

// The arch a key targets on a device of this compute capability. NOTE: the "a" targets (wgmma, tcgen05,
// setmaxnreg) run only on exactly that major.minor, so they are chosen only for 9.0 and 10.0.
std::string arch_for_compute_capability(int major, int minor);
// The arch used when there is no driver (precompile in CI / a docker build stage): the H200's.
inline constexpr const char* kDefaultArch = "sm_90a";

// Queries device `ordinal` through driver(). Throws kNoDriver without a driver, kInvalidArgument for an
// ordinal past the device count.
DeviceInfo query_device(int ordinal);

// Makes the device's primary context current on this thread unless some context already is (a caller
// such as PyTorch has usually set the primary context already). Returns the current context.
CUcontext ensure_context(int ordinal);

}  // namespace swapjit

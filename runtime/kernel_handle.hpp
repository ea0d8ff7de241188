// kernel_handle.hpp: a loaded, launch-ready kernel: the CUfunction (loaded, attributes set, limits checked
// by ModuleCache), its launch plan and its key. What the hot path holds; copying it never touches the driver.
#pragma once
#include <array>
#include <string>

#include <cuda.h>

#include "jit/compile_key.hpp"
#include "kernels_src/key_shape.cuh"

namespace swapjit {

// Which of a key's entry points a launch runs (launch_shape(); KernelHandle::entries() is indexed by it).
enum class LaunchTiling { kPortable, kWide, kMid };

struct KernelHandle {
  CUfunction function = nullptr;       // the portable tiling's entry (the only one of most keys)
  CUfunction wide_function = nullptr;  // the wide / mid tilings' entries (FamilyInfo::wide_entry, mid_entry) where
  CUfunction mid_function = nullptr;   // the plan has that shape (resolve_shape_entries finds them)
  // The entry points by LaunchTiling (null where the key has no such shape).
  std::array<CUfunction, 3> entries() const { return {function, wide_function, mid_function}; }
  CUcontext context = nullptr;  // the context the module was loaded into (made current by a launch that needs it)
  LaunchPlan plan{0, 0, 0, 0};
  CompileKey key;
  std::string key_json;  // canonical JSON, precomputed so that a failing launch names the key cheaply
  std::string digest;
  int registers = -1;          // CU_FUNC_ATTRIBUTE_NUM_REGS
  int static_smem_bytes = 0;   // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
  bool valid() const { return function != nullptr; }
};

}  // namespace swapjit

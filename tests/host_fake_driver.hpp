// host_fake_driver.hpp: a CUDA driver made of host memory, for running the GPU harness (tools/gpu_harness*)
// and the runtime end to end on a machine without a GPU. Installed through install_driver_for_testing().
//
// What it models, so that host-side bugs show up on the CPU as they would on the H200:
// - Device memory lives in a PROT_NONE reservation: a CUdeviceptr is an address there, the bytes are kept
//   in a separate host block that only the fake touches. A host dereference of a device pointer faults,
//   as it does with a real GPU; copies and memsets outside a live allocation fail (CUDA_ERROR_INVALID_VALUE)
//   and count as violations. Addresses are never reused, so a use after free is caught too.
// - Contexts: memory, module, stream and launch calls need a current context on the calling thread
//   (CUDA_ERROR_INVALID_CONTEXT otherwise), made current with cuDevicePrimaryCtxRetain + cuCtxSetCurrent.
// - Stream capture: cuStreamBeginCapture marks the stream; launches into it are recorded into the graph;
//   a synchronous call (alloc, copy, memset, sync, module load) while this thread captures invalidates the
//   capture and fails (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED); cuGraphLaunch re-validates the launches.
// - cuLaunchKernelEx validates the config (grid a multiple of the cluster, block <= the function's max,
//   dynamic smem <= the function's opt-in, cluster <= 8) and every pointer of the DecodeParams /
//   InsertParams argument against the live allocations, sized from the params' shapes and, when the image
//   was registered with register_image(), the key's shape (heads, formats, pages). No decode or insert
//   kernel runs: outputs keep whatever the caller wrote into them. The PTX helpers of `swapjit bench`
//   load too; its copy kernel is the one kernel the fake executes (a memmove), its empty kernel nothing.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "jit/compile_key.hpp"
#include "kernels_src/kernel_params.cuh"
#include "runtime/driver.hpp"

namespace swapjit::hostfake {

// The argument bytes a launch keeps: the larger of the two params structs.
constexpr size_t kParamBytes = sizeof(DecodeParams) > sizeof(InsertParams) ? sizeof(DecodeParams) : sizeof(InsertParams);

struct Launch {
  std::string function;  // the lowered name it was looked up by
  unsigned grid = 0, block = 0, cluster = 1, smem = 0;  // y/z dimensions are always 1 (others fail)
  bool pdl = false;
  bool from_graph = false;
  bool keyed = false;  // its image was registered: checked against the key's exact shapes and plan
  CompileKey key;      // the registered image's key (when keyed)
  CUstream stream = nullptr;
  unsigned num_attrs = 0;  // CUlaunchConfig::numAttrs as given
  alignas(16) unsigned char params[kParamBytes] = {};  // params[0]'s bytes (the family's params struct)
  std::vector<std::string> problems;  // empty: the config and every pointer checked out
};

struct Stats {
  long allocs = 0, frees = 0, live_allocs = 0;
  long module_loads = 0, launches = 0, graph_launches = 0, captures_begun = 0, captures_invalidated = 0;
  long ctx_retains = 0;
  long func_loads = 0, capture_queries = 0;  // cuFuncLoad, cuStreamIsCapturing calls
  int max_dyn_smem_set = -1;                 // the last dynamic smem opt-in set (-1: none)
  long violations = 0;  // failed calls that a real driver would also fail (bad pointer, no context, ...)
  std::vector<std::string> violation_log;  // the first few, human readable
  std::vector<Launch> launches_log;
};

// The table (built once). Install with install_driver_for_testing(&table()).
const DriverApi& table();
// Frees every allocation, module, stream and graph the fake holds and clears the stats and registered
// images. Call between tests (with nothing of the previous test still alive).
void reset();
Stats stats();

// Tells the fake which key a cubin image belongs to, so launches of its function are checked against the
// key's exact shapes (live heads, record formats, pages). Images are matched by content at cuModuleLoadData.
void register_image(const std::string& cubin, const CompileKey& key);

// From now on every eager cuLaunchKernelEx that validates returns `rc` (it is still validated and logged):
// for testing how a failing launch is reported. CUDA_SUCCESS ends it; reset() does too.
void fail_launches(CUresult rc);

// From now on cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED) fails with
// CUDA_ERROR_NOT_SUPPORTED, as on a device without clusters of more than 8 CTAs. reset() ends it.
void refuse_non_portable_clusters(bool refuse);

// True on this thread while the fake's cuLaunchKernelEx runs: an allocation counter of a test uses it to
// leave the fake's own bookkeeping (its launch log) out of what the launch path allocates.
bool in_launch();

// RAII: installs the fake (after reset()) and restores the real driver lookup at scope end.
struct Scope {
  Scope();
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
};

}  // namespace swapjit::hostfake

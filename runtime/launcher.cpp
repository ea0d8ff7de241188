// launcher.cpp: the hot path. Keep it allocation-free (tests/test_launch_path.cpp counts operator new).
#include "runtime/launcher.hpp"

#include "runtime/driver.hpp"

namespace swapjit {

LaunchShape launch_shape(const LaunchPlan& plan, int items) {
  // Few items: the wide shape (more, smaller tiles per item) when the loader found them all resident; past
  // it the mid shape under the same rule; else the portable one.
  const bool wide = plan.wide_cluster > 0 && items <= plan.wide_max_items;
  const bool mid = !wide && plan.mid_cluster > 0 && items <= plan.mid_max_items;
  const int cluster = wide ? plan.wide_cluster : mid ? plan.mid_cluster : plan.cluster;
  const int ctas = wide ? plan.wide_cluster : mid ? plan.mid_cluster : plan.ctas_per_item;
  return LaunchShape{static_cast<unsigned>(items) * static_cast<unsigned>(ctas),
                     static_cast<unsigned>(plan.threads), static_cast<unsigned>(cluster > 1 ? cluster : 1),
                     static_cast<unsigned>(plan.smem_bytes), true,
                     wide ? LaunchTiling::kWide : mid ? LaunchTiling::kMid : LaunchTiling::kPortable};
}

void launch_kernel(const KernelHandle& handle, int items, void* params, CUstream stream) {
  const DriverApi& api = driver();
  const LaunchShape shape = launch_shape(handle.plan, items);
  // A wide or mid shape is chosen only where the loader resolved its entry (resolve_shape_entries) and found
  // its clusters resident; a hand-made handle without it fails here, never launches another tiling's code.
  const CUfunction f = handle.entries()[static_cast<size_t>(shape.tiling)];
  if (f == nullptr)
    throw_error(ErrorCode::kInternal,
                shape.tiling == LaunchTiling::kPortable ? "launch of a handle without a function"
                                                        : "launch of a wide or mid shape whose entry point was not resolved",
                __FILE__, __LINE__, handle.key_json);
  CUlaunchAttribute attrs[2] = {};
  unsigned n_attrs = 0;
  // PDL: the kernel may start while the previous kernel in the stream finishes; it waits with
  // griddepcontrol.wait before reading that kernel's outputs.
  attrs[n_attrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attrs[n_attrs].value.programmaticStreamSerializationAllowed = 1;
  ++n_attrs;
  if (shape.cluster_x > 1) {
    attrs[n_attrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n_attrs].value.clusterDim.x = shape.cluster_x;
    attrs[n_attrs].value.clusterDim.y = 1;
    attrs[n_attrs].value.clusterDim.z = 1;
    ++n_attrs;
  }
  CUlaunchConfig config = {};
  config.gridDimX = shape.grid_x;
  config.gridDimY = 1;
  config.gridDimZ = 1;
  config.blockDimX = shape.block_x;
  config.blockDimY = 1;
  config.blockDimZ = 1;
  config.sharedMemBytes = shape.smem_bytes;
  config.hStream = stream;
  config.attrs = attrs;
  config.numAttrs = n_attrs;
  void* args[1] = {params};
  CUresult r = api.cuLaunchKernelEx(&config, f, args, nullptr);
  if (r == CUDA_ERROR_INVALID_CONTEXT && handle.context) {
    // A serving thread that never touched CUDA has no current context: make the module's one current
    // (once per thread) and launch again. The common path pays nothing for this.
    SWAPJIT_CU_KEY(api.cuCtxSetCurrent(handle.context), handle.key_json);
    r = api.cuLaunchKernelEx(&config, f, args, nullptr);
  }
  if (r != CUDA_SUCCESS)
    throw_cu_error(r, "cuLaunchKernelEx(&config, f, args, nullptr)", __FILE__, __LINE__,
                   handle.key_json);
}

}  // namespace swapjit

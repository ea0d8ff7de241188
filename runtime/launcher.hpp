// launcher.hpp: one cuLaunchKernelEx of a KernelHandle (DESIGN.md "Launch is cheap and graph-safe").
// grid.x = items * plan.ctas_per_item, block.x = plan.threads, cluster.x = plan.cluster (attribute only when
// > 1), dynamic smem = plan.smem_bytes, programmatic dependent launch on; or, for at most
// plan.wide_max_items items, grid.x = items * plan.wide_cluster in clusters of plan.wide_cluster; past that,
// for at most plan.mid_max_items items, the same with plan.mid_cluster; each shape launches its own entry point
// (handle.function, wide_function, mid_function). The attribute array lives on the
// stack of the call: no allocation, no lock, no environment read, no host sync.
#pragma once
#include <cuda.h>

#include "runtime/kernel_handle.hpp"

namespace swapjit {

// REQUIRES: handle.valid(), items >= 1, `params` points at the family's params struct (DecodeParams or
// InsertParams), passed by value as the kernel's only argument. Throws Error(kDriver) naming the key.
void launch_kernel(const KernelHandle& handle, int items, void* params, CUstream stream);

// The launch configuration launch_kernel() hands the driver, exposed for tests and the explain tool.
struct LaunchShape {
  unsigned grid_x, block_x, cluster_x, smem_bytes;
  bool pdl;
  LaunchTiling tiling = LaunchTiling::kPortable;
};
LaunchShape launch_shape(const LaunchPlan& plan, int items);

}  // namespace swapjit

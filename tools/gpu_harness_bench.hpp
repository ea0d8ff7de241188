// gpu_harness_bench.hpp: the pieces of `swapjit bench` (DESIGN.md "Measuring") that touch the device:
// two tiny helper kernels (a Q writer / copy and an empty kernel, hand-written PTX loaded by the driver, so
// that no NVRTC call and no CUDA runtime is needed), shared KV caches (warm: 4096 slots; cold: 1M slots),
// 16 input sets per measurement, graph timing, and the swap-AB cluster occupancy query.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "tools/gpu_harness.hpp"

namespace swapjit::bench {

constexpr int kSetsPerGraph = 16;      // calls per graph, each over its own input set
constexpr int kWarmSlots = 4096;       // per cache: L2-resident
constexpr int kColdSlots = 1 << 20;    // per cache: far past the 60 MB L2
constexpr int kBenchMaxPos = 4096;

class BenchKernels {
 public:
  BenchKernels();
  // dst[0 .. bytes) = src[0 .. bytes); REQUIRES bytes % 16 == 0 and 16-byte aligned pointers.
  void launch_copy(CUdeviceptr src, CUdeviceptr dst, size_t bytes, CUstream s) const;
  void launch_empty(unsigned grid, CUstream s) const;

 private:
  harness::RawModule module_;
  CUfunction copy_ = nullptr, empty_ = nullptr;
};

// Device copy bandwidth in bytes/s, counting read + write (as CUDA's bandwidthTest counts a D2D copy),
// the median of 10 copies of 512 MiB.
double measure_copy_bandwidth(const BenchKernels& k, CUstream s);

struct DevCache {
  harness::DeviceBuffer buf;  // [pages, page_stride] bytes of valid records (SPEC.md §2.1)
  int64_t page_stride = 0;
  int pages = 0;
  int64_t slots() const { return int64_t(pages) * page; }
  int page = 0;
};

// Caches built on first use and kept for the run: (role, format, page, cold) -> cache. The SWA and the
// compressed cache of a layer are separate buffers, as in a model.
class CacheSet {
 public:
  CacheSet(const BenchKernels& k, CUstream s) : kernels_(k), stream_(s) {}
  const DevCache& get(bool swa_role, int format, int page, bool cold);

 private:
  const BenchKernels& kernels_;
  CUstream stream_;
  std::map<std::tuple<bool, int, int, bool>, std::unique_ptr<DevCache>> caches_;
};

// 16 input sets of one layer and token count: each with its own Q source (what the Q writer copies from),
// Q, positions, full-length slot lists of random slots, and outputs; caches shared.
class BenchInputs {
 public:
  BenchInputs(const LayerConfig& layer, int tokens, bool cold, CacheSet& caches, uint64_t seed);
  struct Set {
    harness::DeviceBuffer q_src, q, positions, swa_slots, swa_lens, comp_slots, comp_lens, out_data, out_scale;
    DecodeStep step;
    size_t q_bytes = 0;
  };
  std::vector<Set> sets;
  // KV records + Q + slot lists one call reads (the bandwidth floor's numerator).
  size_t bytes_read_per_call() const { return bytes_read_; }

 private:
  harness::DeviceBuffer cos_sin_, sink_;
  size_t bytes_read_ = 0;
};

// Captures a graph of kSetsPerGraph x (Q writer, call(set.step)), replays it 3 times untimed, then
// `replays` times timed one by one; returns the median replay time / kSetsPerGraph, in ms.
double time_calls(BenchInputs& in, const BenchKernels& k, CUstream s, int replays,
                  const std::function<void(const DecodeStep&)>& call);

struct OccupancyInfo {
  int max_clusters = 0, cluster = 0, threads = 0, smem_bytes = 0;
};
// cuOccupancyMaxActiveClusters for a swap-AB key's launch (its own module load of the cached cubin).
OccupancyInfo swapab_occupancy(Service& service, const CompileKey& key);

std::string device_name();

}  // namespace swapjit::bench

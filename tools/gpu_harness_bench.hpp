// gpu_harness_bench.hpp: `swapjit bench` (DESIGN.md "Measuring"), callable without the CLI so the CPU
// tests run it over the host fake driver. Device pieces (gpu_harness_bench.cpp): three tiny helper kernels
// (a Q writer / copy, an empty kernel, a spin kernel; hand-written PTX loaded by the driver, so that no
// NVRTC call and no CUDA runtime is needed), shared KV caches (warm: 4096 slots; cold: 1M slots), 16 input
// sets per measurement, graph timing, the swap-AB cluster occupancy query. The runner (_run.cpp), the JIT
// and host-overhead measurements (_jit.cpp), the ratio summary and the two-run comparison (_summary.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/kernel_handle.hpp"
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
  // The copies after this call trigger their dependents at entry (the Q writer of a PDL-aware producer): a
  // decode kernel launched with the PDL attribute then starts, and runs its prologue, under the copy; its
  // reads still wait for the copy's completion (griddepcontrol.wait).
  void set_copy_triggers_dependents(bool on) { q_writer_triggers_ = on; }
  // The Q writer's preferred L1 / shared-memory carve-out (CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
  // percent of the maximum shared memory; -1: no preference, the driver's choice). A model's Q projection is
  // a GEMM with a large carve-out; the copy declares none (tools/probes/launch_floor_probe.cu asks what the
  // difference costs the kernel launched after it).
  void set_copy_carveout(int percent);
  void launch_empty(unsigned grid, CUstream s) const;
  // One 32-thread CTA that spins on %globaltimer for `ns` nanoseconds: keeps the GPU busy so that the
  // launches enqueued behind it never wait on the device (the host-overhead measurement).
  void launch_spin(uint64_t ns, CUstream s) const;
  // The host-overhead controls: a handle that launches the empty kernel the way a decode step is launched
  // (swapjit::launch_kernel: one cluster of `cluster` CTAs with the PDL attribute, no smem), and a bare
  // cuLaunchKernelEx of it with no attributes. Beside forward()'s time they separate the driver's launch
  // cost from swapjit's own.
  KernelHandle empty_as_decode(int cluster) const;
  void launch_empty_bare(CUstream s) const;

 private:
  harness::RawModule module_;
  CUfunction copy_ = nullptr, copy_pdl_ = nullptr, empty_ = nullptr, spin_ = nullptr;
  bool q_writer_triggers_ = false;
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
// Q, positions, full-length slot lists of random slots, outputs, and the step's new SWA rows (one per
// token, inserted at a random slot that is also the last entry of the token's SWA list, so the decode
// reads what the insert wrote); caches shared.
class BenchInputs {
 public:
  BenchInputs(const LayerConfig& layer, int tokens, bool cold, CacheSet& caches, uint64_t seed);
  struct Set {
    harness::DeviceBuffer q_src, q, positions, swa_slots, swa_lens, comp_slots, comp_lens, out_data, out_scale;
    harness::DeviceBuffer new_rows, new_slots;  // bf16 [T, 512], int64 [T]
    DecodeStep step;
    InsertStep insert;  // the new rows into the SWA cache (RoPE at the token's position)
    size_t q_bytes = 0;
  };
  std::vector<Set> sets;
  // KV records + Q + slot lists one call reads (the bandwidth floor's numerator).
  size_t bytes_read_per_call() const { return bytes_read_; }

 private:
  harness::DeviceBuffer cos_sin_, sink_;
  size_t bytes_read_ = 0;
};

// Captures a graph of kSetsPerGraph x (Q writer, call(set)), replays it 3 times untimed, then `replays`
// times timed one by one; returns the median replay time / kSetsPerGraph, in ms.
double time_sets(BenchInputs& in, const BenchKernels& k, CUstream s, int replays,
                 const std::function<void(const BenchInputs::Set&)>& call);
// time_sets with call(set.step).
double time_calls(BenchInputs& in, const BenchKernels& k, CUstream s, int replays,
                  const std::function<void(const DecodeStep&)>& call);

struct OccupancyInfo {
  int max_clusters = 0, cluster = 0, threads = 0, smem_bytes = 0;
  int wide_cluster = 0, wide_max_clusters = 0;  // the key's wide shape (LaunchPlan), 0 = none
  int mid_cluster = 0, mid_max_clusters = 0;    // the key's mid shape (LaunchPlan), 0 = none
  // by_cluster[c]: max active clusters of c CTAs at the key's threads and smem, c = 2..16 (0 where the
  // device refuses the size): what a tiling of another cluster size would get, before it is written.
  std::vector<int> by_cluster;
};
// cuOccupancyMaxActiveClusters for a swap-AB key's launch (its own module load of the cached cubin).
OccupancyInfo swapab_occupancy(Service& service, const CompileKey& key);

std::string device_name();
double median(std::vector<double> v);
// The q-th quantile (0..1) by nearest rank; 0 for an empty vector.
double quantile(std::vector<double> v, double q);

// ---- the runner (gpu_harness_bench_run.cpp) ----

struct JitOptions {
  std::string preset = "v4.1-flash";  // the model whose warmup is timed from a cold and a warm cache
  int tp = 4;
  int cold_layers = 0;  // 0 = all the preset's layer configs; N = the first N (the CPU test: a small set)
  int calls = 1000;     // forward() calls timed on the host, behind spin kernels
  double spin_ms = 20;  // each spin kernel's duration
  int calls_per_spin = 200;
};

struct BenchOptions {
  std::vector<int> tokens{1, 2, 4, 8, 16, 32, 64};
  std::vector<int> heads{16, 32, 64};
  std::vector<int> pairs{0, 1, 2};  // record pairings: v41_fp8+v41_fp8, v41_fp8+v41_fp4, v4_fp8+v4_fp8
  int topk = 512;                   // the compressed layers' list width (V4.1-Flash; v4-pro: 1024)
  int replays = 20;
  bool no_cold = false;
  bool no_step = false;     // skip the whole-step graphs (Q writer, kv_insert, decode)
  bool pdl_producer = false;  // the Q writer triggers its dependents at entry (BenchKernels::launch_copy)
  int writer_carveout = -1;   // the Q writer's preferred carve-out in percent (-1: none; BenchKernels)
  bool jit = true;          // the JIT / host-overhead measurements, first
  bool kernels = true;      // the per-call and per-step tables (false: --jit only)
  bool allow_no_gpu = false;
  std::string json;
  std::vector<std::string> roots;  // cache roots; empty = SWAPJIT_CACHE_DIR / the default
  int split_max_tokens = -1;       // ServiceOptions::swapab_split_max_tokens (-1: the per-head default)
  int split4_max_tokens = -1;      // ServiceOptions::swapab_split4_max_tokens (-1: the per-head default)
  int headpad_split_max_tokens = -1;   // ServiceOptions::headpad_split_max_tokens (-1: the default)
  int headpad_split4_max_tokens = -1;  // ServiceOptions::headpad_split4_max_tokens (-1: the default)
  JitOptions jit_options;
};

// Prints the tables and the summary to stdout, optionally writes JSON. Returns the exit code: 0 every
// measurement ran, 1 some failed, 2 no GPU (without allow_no_gpu). Throws Error for a setup failure.
int run_bench(const BenchOptions& options);

// ---- JIT and host overhead (gpu_harness_bench_jit.cpp) ----

// (a) host time inside forward() (median, p99, max over o.calls calls enqueued behind spin kernels) on
// `layer` at one token; (b) store lookup + module load ms per key of `service`'s registered keys (all in
// the cache), each into a fresh module cache; (c) Service::warmup() wall time of the preset's layer
// configs from a fresh temporary cache dir (cold: compile ms per key too) and again from it (warm).
// REQUIRES: `service` warmed up, its context current. Prints as it goes; returns the "jit" JSON object.
// Failures of one part are reported in the JSON ("error") and counted in *failures; the rest runs.
nlohmann::json measure_jit(Service& service, DecodeAttention& layer, CacheSet& caches, const BenchKernels& k,
                           CUstream s, const JitOptions& o, int* failures);

// ---- summary and comparison (gpu_harness_bench_summary.cpp; pure JSON, no device) ----

// Groups the result rows by (layer, kv, heads, cache): the swapab/headpad time ratio per T (per call and
// per step), the crossover (smallest T whose ratio >= 1: head-padded at least as fast; null if none), and
// per head count the suggested swapab_max_tokens: the largest measured T below which swap-AB is faster in
// every group of that head count (cold caches when measured, as in a served model; else warm).
nlohmann::json summarize(const nlohmann::json& results);
// One row per measurement (issue 6's schema), from the result rows: {"kernel" (swapab | headpad), "measure"
// (call: the decode alone; step: KV insert + decode), "heads", "tokens", "layer", "swa_format",
// "comp_format" ("none" for an SWA-only layer), "l2" (warm | cold), "us_per_call", and the floors of that
// shape ("empty_floor_us", "bandwidth_floor_us")}. Rows that failed or were not measured give none.
nlohmann::json measurement_rows(const nlohmann::json& results);
void print_summary(const nlohmann::json& summary);

// The ratios of two bench JSONs, row by row (rows matched on layer, kv, heads, tokens, cache): printed,
// with whether they agree within `tolerance` (max/min - 1). Returns the number of rows that disagree;
// *matched (if given) = the rows compared.
int compare_runs(const nlohmann::json& a, const nlohmann::json& b, double tolerance, int* matched = nullptr);

}  // namespace swapjit::bench

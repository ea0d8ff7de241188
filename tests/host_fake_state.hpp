// host_fake_state.hpp: the insides of the host fake driver (tests/host_fake_driver.hpp), shared by its two
// sources: host_fake_driver.cpp (the entry points) and host_fake_launch.cpp (launch validation, replay).
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernels_src/kernel_params.cuh"
#include "tests/host_fake_driver.hpp"

namespace swapjit::hostfake::detail {

constexpr size_t kReserve = size_t(64) << 30;  // virtual only (PROT_NONE, no backing)
constexpr size_t kAlign = 256, kGap = 4096;    // cuMemAlloc's alignment; an unmapped gap between buffers
constexpr int kOptinSmem = 232448, kRegs = 128, kMaxThreads = 65536 / kRegs;

struct Alloc {
  size_t size = 0;
  std::unique_ptr<uint8_t[]> host;  // null once freed (the entry stays: a use after free is named as such)
};
struct Module {
  bool live = true;
  bool has_key = false;
  CompileKey key;
  std::string ptx;  // PTX text (the bench's helper kernels); empty for a cubin
};
// What a function's argument is: a family's params struct, or the bench helpers (gpu_harness_bench.cpp),
// which the fake executes: swapjit_bench_copy(src, dst, n16) copies n16 16-byte words.
enum class Kind { kDecode, kInsert, kCopy, kEmpty };
struct Func {
  Module* module = nullptr;
  std::string name;
  Kind kind = Kind::kDecode;
  int max_dyn_smem = 48 * 1024;
  bool non_portable = false;  // CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED set
};
struct Pending {  // one launch as captured: replayed (re-validated) by cuGraphLaunch
  Func* f = nullptr;
  unsigned grid = 0, block = 0, cluster = 1, smem = 0;
  bool pdl = false;
  CUstream stream = nullptr;
  unsigned num_attrs = 0;
  alignas(16) unsigned char params[kParamBytes] = {};
};
struct Stream {
  bool live = true;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::thread::id capturer;
  uint64_t capture_id = 0;
  std::vector<Pending> captured;
};
struct Graph {
  std::vector<Pending> launches;
};

struct State {
  std::mutex mu;
  uint8_t* base = nullptr;  // the PROT_NONE reservation
  size_t next = 0;
  std::map<uintptr_t, Alloc> allocs;  // by device address
  std::deque<Module> modules;
  std::deque<Func> funcs;
  std::deque<Stream> streams;
  std::deque<Graph> graphs;
  std::deque<int> events;
  std::vector<std::pair<std::string, CompileKey>> images;
  uint64_t capture_ids = 0;
  CUresult fail_rc = CUDA_SUCCESS;  // fail_launches()
  bool refuse_non_portable = false;  // refuse_non_portable_clusters()
  Stats st;
};

State& S();
// Counts a failed call that a real driver would also fail, logs it, returns `rc`.
CUresult violate(CUresult rc, const std::string& what);
// The host bytes of [dptr, dptr + bytes), or null with `why` set (outside, freed, past the end).
uint8_t* host_of(CUdeviceptr dptr, size_t bytes, std::string* why);
// The argument's pointers against the live allocations, by the function's kind (problems appended).
void check_params(const Pending& launch, std::vector<std::string>& problems);
// Validates one launch (eager or replayed), runs it when it is the bench's copy, logs it. Caller holds S().mu.
CUresult run_launch(const Pending& launch, bool from_graph);
// cuLaunchKernelEx after the context check: decodes the config, captures or runs it. Caller holds S().mu.
CUresult launch_entry(const CUlaunchConfig* c, CUfunction f, void** params, void** extra);
// Marks this thread as inside the fake's cuLaunchKernelEx for its lifetime (see in_launch()).
struct InLaunch {
  InLaunch();
  ~InLaunch();
};

}  // namespace swapjit::hostfake::detail

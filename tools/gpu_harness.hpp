// gpu_harness.hpp: device copies of host reference cases (reference/step_case.hpp) and the thin RAII
// wrappers over the driver table (runtime/driver.hpp) that `swapjit check`, `swapjit bench` and the GPU
// tests share. Everything that touches the driver goes through here, so the three users stay free of raw
// CUresult handling. Without a driver, gpu_available() says why and nothing else here is called.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <cuda.h>

#include "reference/step_case.hpp"
#include "swapjit/decode_attention.hpp"

namespace swapjit::harness {

// True when a driver and a GPU are usable; otherwise false and `why` (if given) says what is missing.
bool gpu_available(std::string* why = nullptr);
// For `swapjit <command>` (check, bench), which needs a GPU: -1 when one is usable; otherwise says why and
// returns the command's exit code, 0 (skipped) with --allow-no-gpu, else 2.
int exit_code_without_gpu(const char* command, bool allow_no_gpu);
// Retains device `ordinal`'s primary context and makes it current on this thread (idempotent).
void make_context_current(int ordinal = 0);

// ---- RAII wrappers (each throws Error(kDriver) naming the failing call) ----

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr dptr() const { return ptr_; }
  void* ptr() const { return reinterpret_cast<void*>(ptr_); }  // null when empty
  size_t size() const { return bytes_; }
  // Synchronous copies (the host waits); REQUIRES offset + bytes <= size().
  void upload(const void* host, size_t bytes, size_t offset = 0);
  void download(void* host, size_t bytes, size_t offset = 0) const;
  void fill(uint8_t byte);  // synchronous memset of the whole buffer
  template <class T>
  void upload_vec(const std::vector<T>& v) { upload(v.data(), v.size() * sizeof(T)); }
  std::vector<uint8_t> download_all() const;

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  CUstream get() const { return s_; }
  void sync() const;

 private:
  CUstream s_ = nullptr;
};

class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  CUevent get() const { return e_; }
  void record(CUstream s);
  // Milliseconds from `start` to this event (both recorded and complete).
  float since(const Event& start) const;

 private:
  CUevent e_ = nullptr;
};

// A CUDA graph captured from a stream, instantiated, replayable.
class Graph {
 public:
  Graph() = default;
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  // Starts a thread-local capture on `s`.
  static void begin_capture(CUstream s);
  // Ends the capture and instantiates. Throws on a capture that was invalidated.
  void end_capture(CUstream s);
  // Ends a capture after a failure inside it, discarding whatever was captured. Never throws; returns the
  // CUresult of cuStreamEndCapture (a CUDA error when the capture was invalidated).
  static CUresult abort_capture(CUstream s);
  // True while `s` is capturing.
  static bool capturing(CUstream s);
  void launch(CUstream s) const;
  bool ready() const { return exec_ != nullptr; }

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

// A module loaded from PTX or cubin text, owning its CUmodule.
class RawModule {
 public:
  explicit RawModule(const std::string& image);  // PTX text (NUL-terminated on load) or cubin bytes
  ~RawModule();
  RawModule(const RawModule&) = delete;
  RawModule& operator=(const RawModule&) = delete;
  CUfunction function(const char* name) const;
  CUmodule handle() const { return mod_; }
  // Device address and size of the module's global `name` (an extern "C" __device__ variable).
  CUdeviceptr global(const char* name, size_t* bytes = nullptr) const;

 private:
  CUmodule mod_ = nullptr;
};

// Launches `f` (no cluster, no PDL) with grid x block threads; `args` as cuLaunchKernelEx takes them.
void launch_plain(CUfunction f, unsigned grid, unsigned block, void** args, CUstream s);

// ---- device copy of a reference case ----

// Bytes after every output buffer that no kernel may touch (checked against the poison).
constexpr size_t kGuardBytes = 4096;

struct DeviceOutput {
  std::vector<uint8_t> data;   // the out_data_bytes(c) bytes the comparator reads
  std::vector<uint8_t> scale;  // out_scale_bytes(c) bytes (empty for bf16)
  long guard_violations = 0;   // guard bytes that lost the poison
  bool operator==(const DeviceOutput& o) const { return data == o.data && scale == o.scale; }
};

class DeviceStep {
 public:
  explicit DeviceStep(const ref::StepCase& c);
  // Re-uploads the inputs and caches of `c` into the same buffers (for graph replays after an in-place
  // change). REQUIRES: the same shape and byte sizes as the case this was built from.
  void upload_inputs(const ref::StepCase& c);
  void poison_outputs(uint8_t byte);
  const DecodeStep& step() const { return step_; }
  DeviceOutput download_outputs() const;  // synchronous; checks the guards against the last poison

 private:
  DecodeStep step_;
  uint8_t poison_ = 0;
  size_t data_bytes_ = 0, scale_bytes_ = 0;
  DeviceBuffer q_, positions_, cos_sin_, swa_slots_, swa_lens_, comp_slots_, comp_lens_, sink_;
  DeviceBuffer swa_cache_, comp_cache_, out_data_, out_scale_;
};

// ---- layers and cases ----

// The layer of a case shape or a compile key: the same fields under the same names, but for the head
// count (CaseShape::heads, CompileKey::live_heads), which the caller passes.
template <class Shape>
LayerConfig layer_config_from(const Shape& s, int heads) {
  LayerConfig lc;
  lc.live_heads = heads;
  lc.window = s.window;
  lc.topk = s.topk;
  lc.swa_format = s.swa_format;
  lc.comp_format = s.topk ? s.comp_format : kFormatNone;
  lc.swa_page = s.swa_page;
  lc.comp_page = s.topk ? s.comp_page : 0;
  lc.q_layout = s.q_layout;
  lc.out_layout = s.out_layout;
  return lc;
}
inline LayerConfig layer_config_for(const ref::CaseShape& s) { return layer_config_from(s, s.heads); }
// Whether the swap-AB kernel takes a step of this shape (SPEC.md §5: 8, 16 or 32 heads, one portable
// cluster per token, at most `max_tokens` tokens).
bool swapab_eligible(const ref::CaseShape& s, int max_tokens = kDefaultSwapabMaxTokens);
// For swapab_eligible: the static conditions only. `check` and `bench` run swap-AB past the dispatch cap,
// so that the cap (a speed choice) can move without routing steps to an unchecked or untimed shape.
constexpr int kNoTokenCap = std::numeric_limits<int>::max();

// One DecodeAttention per distinct layer config, built on first use.
class LayerPool {
 public:
  explicit LayerPool(Service& service) : service_(service) {}
  DecodeAttention& get(const LayerConfig& config);

 private:
  Service& service_;
  std::map<std::string, std::unique_ptr<DecodeAttention>> layers_;
};

struct CheckCase {
  std::string name;
  ref::CaseShape shape;
  ref::CaseOptions options;
  bool determinism = false;  // also check eager repeats and graph replays bit-identical
};
// The case list of `swapjit check` (SPEC.md §4 coverage). Seeds are set by the caller.
std::vector<CheckCase> check_case_list();
// A few small cases per kernel for the GPU tests.
std::vector<CheckCase> small_case_list();

// One forced-kernel launch of a case: poison, forward, sync, download, compare with the reference.
struct KernelRun {
  ref::CompareResult cmp;
  DeviceOutput out;
  bool pass = false;  // cmp.pass and no guard violation
};
KernelRun run_kernel(DecodeAttention& layer, DeviceStep& dev, const ref::StepCase& c, KernelChoice k,
                     CUstream s, uint8_t poison);

// bf16 outputs of two kernels on one case: max over live heads of ||a - b|| / ||b||.
double bf16_relative_difference(const ref::StepCase& c, const DeviceOutput& a, const DeviceOutput& b);

// kv_insert against the host encoder, byte for byte, over a whole cache (records and padding).
struct InsertCheck {
  std::string name;
  bool pass = false;
  long mismatched_bytes = 0;
  std::string detail;
};
InsertCheck check_insert(LayerPool& pool, int format, int page, bool with_positions, uint64_t seed,
                         CUstream s);

}  // namespace swapjit::harness

// gpu_harness.cpp: the driver wrappers and the device copy of a reference case (gpu_harness.hpp).
// The case lists and the kv_insert check are in gpu_harness_cases.cpp (same header).
#include "tools/gpu_harness.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "jit/error.hpp"
#include "jit/kernel_family.hpp"
#include "reference/numerics.hpp"
#include "runtime/driver.hpp"

namespace swapjit::harness {

bool gpu_available(std::string* why) {
  if (has_driver()) return true;
  if (why) *why = no_driver_reason();
  return false;
}

int exit_code_without_gpu(const char* command, bool allow_no_gpu) {
  std::string why;
  if (gpu_available(&why)) return -1;
  if (allow_no_gpu) {
    std::printf("no GPU driver: %s skipped (%s)\n", command, why.c_str());
    return 0;
  }
  std::fprintf(stderr, "no GPU driver: `swapjit %s` needs a GPU (%s); pass --allow-no-gpu to skip\n", command,
               why.c_str());
  return 2;
}

void make_context_current(int ordinal) {
  const DriverApi& api = driver();
  CUcontext cur = nullptr;
  SWAPJIT_CU(api.cuCtxGetCurrent(&cur));
  if (cur) return;  // the Service (or an earlier call) already made one current on this thread
  CUdevice dev = 0;
  SWAPJIT_CU(api.cuDeviceGet(&dev, ordinal));
  CUcontext ctx = nullptr;
  // NOTE: the primary context is the one the library's Service retains too, so buffers allocated here
  // are valid for its launches. Retained once per thread and never released: the process owns it.
  SWAPJIT_CU(api.cuDevicePrimaryCtxRetain(&ctx, dev));
  SWAPJIT_CU(api.cuCtxSetCurrent(ctx));
}

// ---------------- DeviceBuffer ----------------

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  SWAPJIT_CU(driver().cuMemAlloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) driver().cuMemFree(ptr_);  // NOTE: no throw from a destructor; a failed free is leaked
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = 0;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) driver().cuMemFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = 0;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
  SWAPJIT_REQUIRE(offset + bytes <= bytes_, ErrorCode::kInvalidArgument, "upload past the buffer's end");
  if (bytes) SWAPJIT_CU(driver().cuMemcpyHtoD(ptr_ + offset, host, bytes));
}

void DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
  SWAPJIT_REQUIRE(offset + bytes <= bytes_, ErrorCode::kInvalidArgument, "download past the buffer's end");
  if (bytes) SWAPJIT_CU(driver().cuMemcpyDtoH(host, ptr_ + offset, bytes));
}

void DeviceBuffer::fill(uint8_t byte) {
  if (bytes_) SWAPJIT_CU(driver().cuMemsetD8(ptr_, byte, bytes_));
}

std::vector<uint8_t> DeviceBuffer::download_all() const {
  std::vector<uint8_t> v(bytes_);
  download(v.data(), bytes_);
  return v;
}

// ---------------- Stream, Event, Graph, RawModule ----------------

// NOTE: a blocking stream (CU_STREAM_DEFAULT): it orders after the synchronous-API copies and memsets,
// which run on the legacy stream and may return before the device has finished them.
Stream::Stream() { SWAPJIT_CU(driver().cuStreamCreate(&s_, CU_STREAM_DEFAULT)); }
Stream::~Stream() {
  if (s_) driver().cuStreamDestroy(s_);
}
void Stream::sync() const { SWAPJIT_CU(driver().cuStreamSynchronize(s_)); }

Event::Event() { SWAPJIT_CU(driver().cuEventCreate(&e_, CU_EVENT_DEFAULT)); }
Event::~Event() {
  if (e_) driver().cuEventDestroy(e_);
}
void Event::record(CUstream s) { SWAPJIT_CU(driver().cuEventRecord(e_, s)); }
float Event::since(const Event& start) const {
  float ms = 0;
  SWAPJIT_CU(driver().cuEventElapsedTime(&ms, start.e_, e_));
  return ms;
}

Graph::~Graph() {
  if (exec_) driver().cuGraphExecDestroy(exec_);
  if (graph_) driver().cuGraphDestroy(graph_);
}

void Graph::begin_capture(CUstream s) {
  // NOTE: thread-local mode, so that another thread's unsafe call (a cuMemAlloc in a test helper) does
  // not invalidate this capture, and a forbidden call on this thread still does.
  SWAPJIT_CU(driver().cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
}

void Graph::end_capture(CUstream s) {
  SWAPJIT_REQUIRE(exec_ == nullptr, ErrorCode::kInternal, "graph captured twice");
  SWAPJIT_CU(driver().cuStreamEndCapture(s, &graph_));
  SWAPJIT_CU(driver().cuGraphInstantiate(&exec_, graph_, 0));
}

CUresult Graph::abort_capture(CUstream s) {
  CUgraph g = nullptr;
  CUresult rc = driver().cuStreamEndCapture(s, &g);
  if (g) driver().cuGraphDestroy(g);
  return rc;
}

bool Graph::capturing(CUstream s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  SWAPJIT_CU(driver().cuStreamIsCapturing(s, &st));
  return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

void Graph::launch(CUstream s) const {
  SWAPJIT_REQUIRE(exec_ != nullptr, ErrorCode::kInternal, "graph launched before end_capture");
  SWAPJIT_CU(driver().cuGraphLaunch(exec_, s));
}

RawModule::RawModule(const std::string& image) {
  // PTX must be NUL-terminated; std::string's c_str() is, and a cubin ignores the extra byte.
  SWAPJIT_CU(driver().cuModuleLoadData(&mod_, image.c_str()));
}
RawModule::~RawModule() {
  if (mod_) driver().cuModuleUnload(mod_);
}
CUfunction RawModule::function(const char* name) const {
  CUfunction f = nullptr;
  SWAPJIT_CU(driver().cuModuleGetFunction(&f, mod_, name));
  return f;
}

CUdeviceptr RawModule::global(const char* name, size_t* bytes) const {
  SWAPJIT_REQUIRE(driver().cuModuleGetGlobal != nullptr, ErrorCode::kDriver,
                  "this driver has no cuModuleGetGlobal");
  CUdeviceptr p = 0;
  size_t n = 0;
  SWAPJIT_CU(driver().cuModuleGetGlobal(&p, &n, mod_, name));
  if (bytes) *bytes = n;
  return p;
}

void launch_plain(CUfunction f, unsigned grid, unsigned block, void** args, CUstream s) {
  CUlaunchConfig cfg{};
  cfg.gridDimX = grid;
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = block;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = 0;
  cfg.hStream = s;
  cfg.attrs = nullptr;
  cfg.numAttrs = 0;
  SWAPJIT_CU(driver().cuLaunchKernelEx(&cfg, f, args, nullptr));
}

// ---------------- DeviceStep ----------------

namespace {
template <class T>
DeviceBuffer upload_new(const std::vector<T>& v) {
  DeviceBuffer b(v.size() * sizeof(T));
  b.upload_vec(v);
  return b;
}
CacheRef cache_ref(const DeviceBuffer& b, const ref::PagedCache& c) {
  return CacheRef{b.ptr(), c.page_stride, c.pages};
}
}  // namespace

DeviceStep::DeviceStep(const ref::StepCase& c) {
  const auto& s = c.shape;
  data_bytes_ = ref::out_data_bytes(c);
  scale_bytes_ = ref::out_scale_bytes(c);
  q_ = upload_new(c.q);
  positions_ = upload_new(c.positions);
  cos_sin_ = upload_new(c.cos_sin);
  swa_slots_ = upload_new(c.swa_slots);
  swa_lens_ = upload_new(c.swa_lens);
  comp_slots_ = upload_new(c.comp_slots);
  comp_lens_ = upload_new(c.comp_lens);
  sink_ = upload_new(c.sink);
  swa_cache_ = upload_new(c.swa_cache.bytes);
  comp_cache_ = upload_new(c.comp_cache.bytes);
  out_data_ = DeviceBuffer(data_bytes_ + kGuardBytes);
  if (s.out_layout == kOutMxfp8Ofused) out_scale_ = DeviceBuffer(scale_bytes_ + kGuardBytes);

  DecodeStep& st = step_;
  st.num_tokens = s.tokens;
  st.q = q_.ptr();
  st.q_token_stride = c.q_token_stride;
  st.q_h_pad = s.q_h_pad;
  st.positions = static_cast<const int64_t*>(positions_.ptr());
  st.cos_sin = static_cast<const float*>(cos_sin_.ptr());
  st.max_pos = int32_t(c.cos_sin.size() / 64);
  st.swa_slots = static_cast<const int32_t*>(swa_slots_.ptr());
  st.swa_lens = static_cast<const int32_t*>(swa_lens_.ptr());
  st.swa_width = s.window;
  st.comp_slots = static_cast<const int32_t*>(comp_slots_.ptr());  // null on SWA-only layers
  st.comp_lens = static_cast<const int32_t*>(comp_lens_.ptr());
  st.comp_width = s.topk;
  st.sink = static_cast<const float*>(sink_.ptr());  // null = no sink
  st.sm_scale = c.sm_scale;
  st.swa_cache = cache_ref(swa_cache_, c.swa_cache);
  st.comp_cache = s.topk ? cache_ref(comp_cache_, c.comp_cache) : CacheRef{};
  if (s.out_layout == kOutMxfp8Ofused) {
    st.out_data = out_data_.ptr();
    st.out_scale = out_scale_.ptr();
    st.n_groups_alloc = c.n_groups_alloc;
    st.n_total = c.n_total;
  } else {
    st.out_bf16 = out_data_.ptr();
    st.out_token_stride = int64_t(s.heads) * kHeadDim;
  }
  SWAPJIT_CU(driver().cuCtxSynchronize());
}

void DeviceStep::upload_inputs(const ref::StepCase& c) {
  auto put = [](DeviceBuffer& b, const auto& v, const char* what) {
    size_t bytes = v.size() * sizeof(v[0]);
    if (bytes != b.size())
      SWAPJIT_THROW(ErrorCode::kInvalidArgument,
                    std::string("upload_inputs: ") + what + " changed size (" + std::to_string(b.size()) +
                        " -> " + std::to_string(bytes) + " bytes)");
    b.upload(v.data(), bytes);
  };
  put(q_, c.q, "q");
  put(positions_, c.positions, "positions");
  put(cos_sin_, c.cos_sin, "cos_sin");
  put(swa_slots_, c.swa_slots, "swa_slots");
  put(swa_lens_, c.swa_lens, "swa_lens");
  put(comp_slots_, c.comp_slots, "comp_slots");
  put(comp_lens_, c.comp_lens, "comp_lens");
  put(sink_, c.sink, "sink");
  put(swa_cache_, c.swa_cache.bytes, "swa cache");
  put(comp_cache_, c.comp_cache.bytes, "comp cache");
  SWAPJIT_CU(driver().cuCtxSynchronize());
  step_.sm_scale = c.sm_scale;  // NOTE: a by-value launch argument; a graph keeps the captured one
}

void DeviceStep::poison_outputs(uint8_t byte) {
  poison_ = byte;
  out_data_.fill(byte);
  out_scale_.fill(byte);
  SWAPJIT_CU(driver().cuCtxSynchronize());  // the memsets may still be in flight on the legacy stream
}

DeviceOutput DeviceStep::download_outputs() const {
  DeviceOutput o;
  auto split = [&](const DeviceBuffer& b, size_t live, std::vector<uint8_t>& dst) {
    if (b.size() == 0) return;
    std::vector<uint8_t> all = b.download_all();
    dst.assign(all.begin(), all.begin() + long(live));
    for (size_t i = live; i < all.size(); ++i) o.guard_violations += all[i] != poison_;
  };
  split(out_data_, data_bytes_, o.data);
  split(out_scale_, scale_bytes_, o.scale);
  return o;
}

// ---------------- layers, runs ----------------

bool swapab_eligible(const ref::CaseShape& s, int max_tokens) {
  bool heads_ok = swapab_heads_supported(s.heads);
  bool cluster_ok = swapab_tiles(s.window, s.topk) <= kPortableClusterMax;
  // NOTE: 32-slot pages are a head-padded-only case of SPEC.md §4; the swap-AB tiles are 64/128 slots.
  bool pages_ok = s.swa_page >= 64 && (s.topk == 0 || s.comp_page >= 64);
  return heads_ok && cluster_ok && pages_ok && s.tokens <= max_tokens;
}

DecodeAttention& LayerPool::get(const LayerConfig& c) {
  std::string id = std::to_string(c.live_heads) + "/" + std::to_string(c.window) + "/" +
                   std::to_string(c.topk) + "/" + std::to_string(c.swa_format) + "/" +
                   std::to_string(c.comp_format) + "/" + std::to_string(c.swa_page) + "/" +
                   std::to_string(c.comp_page) + "/" + std::to_string(c.q_layout) + "/" +
                   std::to_string(c.out_layout) + "/" + std::to_string(int(c.batch_invariant));
  auto it = layers_.find(id);
  if (it == layers_.end()) it = layers_.emplace(id, std::make_unique<DecodeAttention>(service_, c)).first;
  return *it->second;
}

KernelRun run_kernel(DecodeAttention& layer, DeviceStep& dev, const ref::StepCase& c, KernelChoice k,
                     CUstream s, uint8_t poison) {
  KernelRun r;
  dev.poison_outputs(poison);
  layer.forward(dev.step(), s, k);
  SWAPJIT_CU(driver().cuStreamSynchronize(s));
  r.out = dev.download_outputs();
  r.cmp = ref::compare_output(c, r.out.data, r.out.scale, poison);
  r.pass = r.cmp.pass && r.out.guard_violations == 0;
  if (r.out.guard_violations)
    r.cmp.detail += " guard bytes written past the output: " + std::to_string(r.out.guard_violations);
  return r;
}

double bf16_relative_difference(const ref::StepCase& c, const DeviceOutput& a, const DeviceOutput& b) {
  const int T = c.shape.tokens, H = c.shape.heads;
  if (a.data.size() < size_t(T) * H * kHeadDim * 2 || b.data.size() < size_t(T) * H * kHeadDim * 2)
    return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      double diff = 0, norm = 0;
      for (int d = 0; d < kHeadDim; ++d) {
        size_t off = ((size_t(t) * H + h) * kHeadDim + d) * 2;
        uint16_t ua, ub;
        std::memcpy(&ua, &a.data[off], 2);
        std::memcpy(&ub, &b.data[off], 2);
        double x = ref::bf16_to_float(ua), y = ref::bf16_to_float(ub);
        diff += (x - y) * (x - y);
        norm += y * y;
      }
      if (std::isnan(diff) || std::isnan(norm)) return std::numeric_limits<double>::infinity();
      // An all-zero head (an empty token) must be all-zero in both.
      double rel = norm > 0 ? std::sqrt(diff / norm) : (diff > 0 ? 1.0 : 0.0);
      worst = std::max(worst, rel);
    }
  return worst;
}

}  // namespace swapjit::harness

// gpu_harness_bench.cpp: device pieces of `swapjit bench` (gpu_harness_bench.hpp).
#include "tools/gpu_harness_bench.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "jit/error.hpp"
#include "jit/kernel_family.hpp"
#include "reference/numerics.hpp"
#include "reference/paged_cache.hpp"
#include "runtime/device_info.hpp"
#include "runtime/driver.hpp"
#include "runtime/launcher.hpp"
#include "runtime/module_cache.hpp"

namespace swapjit::bench {
namespace {

// NOTE: hand-written PTX, JIT-compiled by the driver at module load: the CLI links no NVRTC of its own
// and these two kernels need nothing from the specializer. PTX 8.0 / sm_90 loads on any driver >= 12.0.
// swapjit_bench_copy: grid-stride copy of n16 16-byte words; swapjit_bench_copy_pdl: the same, after
// triggering its dependents at entry (griddepcontrol.launch_dependents), as a PDL-aware Q projection would.
// swapjit_bench_empty: returns.
constexpr const char* kHelperPtx = R"(.version 8.0
.target sm_90
.address_size 64

.visible .entry swapjit_bench_empty()
{
	ret;
}

.visible .entry swapjit_bench_spin(.param .u64 ns)
{
	.reg .pred %p;
	.reg .b64 %rd<5>;
	ld.param.u64 %rd1, [ns];
	mov.u64 %rd2, %globaltimer;
SPIN:
	mov.u64 %rd3, %globaltimer;
	sub.u64 %rd4, %rd3, %rd2;
	setp.lt.u64 %p, %rd4, %rd1;
	@%p bra SPIN;
	ret;
}
)";

// The copy, in two entries: swapjit_bench_copy, and swapjit_bench_copy_pdl, which first triggers its
// dependents (@TRIGGER@ filled in by helper_ptx).
constexpr const char* kCopyPtx = R"(
.visible .entry swapjit_bench_copy@NAME@(.param .u64 src, .param .u64 dst, .param .u64 n16)
{
	.reg .pred %p;
	.reg .b32 %r<12>;
	.reg .b64 %rd<12>;
@TRIGGER@	ld.param.u64 %rd1, [src];
	ld.param.u64 %rd2, [dst];
	ld.param.u64 %rd3, [n16];
	cvta.to.global.u64 %rd1, %rd1;
	cvta.to.global.u64 %rd2, %rd2;
	mov.u32 %r1, %ctaid.x;
	mov.u32 %r2, %ntid.x;
	mov.u32 %r3, %tid.x;
	mov.u32 %r4, %nctaid.x;
	mul.wide.u32 %rd4, %r1, %r2;
	cvt.u64.u32 %rd5, %r3;
	add.u64 %rd4, %rd4, %rd5;
	mul.wide.u32 %rd6, %r4, %r2;
LOOP:
	setp.ge.u64 %p, %rd4, %rd3;
	@%p bra DONE;
	shl.b64 %rd7, %rd4, 4;
	add.u64 %rd8, %rd1, %rd7;
	add.u64 %rd9, %rd2, %rd7;
	ld.global.v4.u32 {%r5, %r6, %r7, %r8}, [%rd8];
	st.global.v4.u32 [%rd9], {%r5, %r6, %r7, %r8};
	add.u64 %rd4, %rd4, %rd6;
	bra LOOP;
DONE:
	ret;
}
)";

std::string helper_ptx() {
  std::string ptx = kHelperPtx;
  for (const bool pdl : {false, true}) {
    std::string e = kCopyPtx;
    e.replace(e.find("@NAME@"), 6, pdl ? "_pdl" : "");
    e.replace(e.find("@TRIGGER@"), 9, pdl ? "\tgriddepcontrol.launch_dependents;\n" : "");
    ptx += e;
  }
  return ptx;
}

// Q values: windows of one pool of N(0, 1) bf16 values, at a random offset per set. Drawing every value
// anew cost T x 0.5M normal samples per row (seconds per layer at T = 64, 30 layer/cache pairs); the
// timing needs finite values that differ between sets, not independent ones.
constexpr size_t kPoolMask = (size_t(1) << 20) - 1;
const std::vector<uint16_t>& normal_pool() {
  static const std::vector<uint16_t> pool = [] {
    std::vector<uint16_t> v(kPoolMask + 1);
    std::mt19937_64 rng(12345);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (auto& x : v) x = ref::bf16_from_float(normal(rng));
    return v;
  }();
  return pool;
}

template <class T>
harness::DeviceBuffer upload_new(const std::vector<T>& v) {
  harness::DeviceBuffer b(v.size() * sizeof(T));
  b.upload_vec(v);
  return b;
}

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = size_t(std::ceil(q * double(v.size())));
  return v[std::min(v.size() - 1, rank > 0 ? rank - 1 : 0)];
}

BenchKernels::BenchKernels() : module_(helper_ptx()) {
  copy_ = module_.function("swapjit_bench_copy");
  copy_pdl_ = module_.function("swapjit_bench_copy_pdl");
  empty_ = module_.function("swapjit_bench_empty");
  spin_ = module_.function("swapjit_bench_spin");
}

void BenchKernels::launch_spin(uint64_t ns, CUstream s) const {
  void* args[] = {&ns};
  harness::launch_plain(spin_, 1, 32, args, s);
}

KernelHandle BenchKernels::empty_as_decode(int cluster) const {
  KernelHandle h;
  h.function = empty_;
  h.plan = LaunchPlan{128, cluster, cluster, 0};
  h.key_json = "{\"control\":\"the empty kernel launched as a decode step\"}";
  return h;
}

void BenchKernels::launch_empty_bare(CUstream s) const { harness::launch_plain(empty_, 1, 128, nullptr, s); }

void BenchKernels::launch_copy(CUdeviceptr src, CUdeviceptr dst, size_t bytes, CUstream s) const {
  SWAPJIT_REQUIRE(bytes % 16 == 0, ErrorCode::kInvalidArgument, "copy of a size not a multiple of 16");
  uint64_t n16 = bytes / 16;
  unsigned blocks = unsigned(std::min<uint64_t>((n16 + 255) / 256, 132 * 16));
  void* args[] = {&src, &dst, &n16};
  harness::launch_plain(q_writer_triggers_ ? copy_pdl_ : copy_, std::max(blocks, 1u), 256, args, s);
}

void BenchKernels::set_copy_carveout(int percent) {  // -1..100: the CLI's range check (--writer-carveout)
  for (CUfunction f : {copy_, copy_pdl_})
    SWAPJIT_CU(driver().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, percent));
}

void BenchKernels::launch_empty(unsigned grid, CUstream s) const {
  harness::launch_plain(empty_, std::max(grid, 1u), 128, nullptr, s);
}

double measure_copy_bandwidth(const BenchKernels& k, CUstream s) {
  const size_t bytes = size_t(512) << 20;
  harness::DeviceBuffer a(bytes), b(bytes);
  a.fill(1);
  harness::Event e0, e1;
  std::vector<double> ms;
  for (int i = 0; i < 12; ++i) {
    e0.record(s);
    k.launch_copy(a.dptr(), b.dptr(), bytes, s);
    e1.record(s);
    SWAPJIT_CU(driver().cuStreamSynchronize(s));
    if (i >= 2) ms.push_back(e1.since(e0));  // the first two warm the clocks and the TLB
  }
  return 2.0 * double(bytes) / (median(ms) * 1e-3);
}

const DevCache& CacheSet::get(bool swa_role, int format, int page, bool cold) {
  auto key = std::make_tuple(swa_role, format, page, cold);
  auto it = caches_.find(key);
  if (it != caches_.end()) return *it->second;
  // A block of 4096 valid random records (SPEC.md §2.3 writer), replicated on the device for a cold cache.
  const int block_pages = kWarmSlots / page;
  ref::PagedCache host = ref::PagedCache::make(format, page, block_pages);
  std::mt19937_64 rng(uint64_t(format) * 977 + uint64_t(page) + (swa_role ? 1 : 0));
  std::normal_distribution<float> normal(0.f, 1.f);
  float row[kHeadDim];
  for (int64_t slot = 0; slot < host.slots(); ++slot) {
    for (float& x : row) x = ref::bf16_round(normal(rng));
    host.write_row(slot, row);
  }
  auto c = std::make_unique<DevCache>();
  c->page = page;
  c->page_stride = host.page_stride;
  const int copies = cold ? kColdSlots / kWarmSlots : 1;
  c->pages = block_pages * copies;
  c->buf = harness::DeviceBuffer(size_t(c->pages) * size_t(c->page_stride));
  c->buf.upload_vec(host.bytes);
  for (int i = 1; i < copies; ++i)
    kernels_.launch_copy(c->buf.dptr(), c->buf.dptr() + CUdeviceptr(i) * host.bytes.size(), host.bytes.size(),
                         stream_);
  SWAPJIT_CU(driver().cuStreamSynchronize(stream_));
  return *caches_.emplace(key, std::move(c)).first->second;
}

BenchInputs::BenchInputs(const LayerConfig& lc, int T, bool cold, CacheSet& caches, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  const DevCache& swa = caches.get(true, lc.swa_format, lc.swa_page, cold);
  const DevCache* comp = lc.topk ? &caches.get(false, lc.comp_format, lc.comp_page, cold) : nullptr;

  std::vector<float> cs(size_t(kBenchMaxPos) * 64);
  for (int p = 0; p < kBenchMaxPos; ++p)
    for (int i = 0; i < kRopePairs; ++i) {
      double angle = p * std::pow(10000.0, -2.0 * i / kRopeDims);
      cs[size_t(p) * 64 + i] = float(std::cos(angle));
      cs[size_t(p) * 64 + 32 + i] = float(std::sin(angle));
    }
  cos_sin_ = upload_new(cs);
  sink_ = upload_new(std::vector<float>(size_t(lc.live_heads), 0.5f));

  const int h_pad = lc.live_heads > 64 ? 128 : 64;
  const int64_t q_stride = lc.q_layout == kQLayoutChunk16 ? int64_t(h_pad) * kHeadDim
                                                          : int64_t(lc.live_heads) * kHeadDim;
  const int groups = lc.live_heads / kHeadsPerGroup;
  const int n4 = (T + 3) / 4 * 4;
  auto random_slots = [&](int width, int64_t slots) {
    std::vector<int32_t> v(size_t(T) * width);
    for (auto& s : v) s = int32_t(rng() % uint64_t(slots));
    return v;
  };
  // The step's new SWA rows go to distinct slots of one stride (odd, so coprime with the power-of-two slot
  // count): token t writes slot (first + t * stride) mod slots.
  const int64_t stride = 2 * int64_t(rng() % 1024) + 1;
  sets.resize(kSetsPerGraph);
  for (Set& st : sets) {
    std::vector<uint16_t> q(size_t(T) * size_t(q_stride));
    const std::vector<uint16_t>& pool = normal_pool();
    const size_t off = size_t(rng());
    for (size_t i = 0; i < q.size(); ++i) q[i] = pool[(off + i) & kPoolMask];
    std::vector<int64_t> pos(static_cast<size_t>(T));
    for (auto& p : pos) p = int64_t(rng() % kBenchMaxPos);
    st.q_bytes = q.size() * 2;
    st.q_src = upload_new(q);
    st.q = harness::DeviceBuffer(st.q_bytes);
    st.positions = upload_new(pos);
    std::vector<int32_t> swa_list = random_slots(lc.window, swa.slots());
    std::vector<int64_t> new_slots(static_cast<size_t>(T));
    const int64_t first = int64_t(rng() % uint64_t(swa.slots()));
    for (int t = 0; t < T; ++t) {
      new_slots[size_t(t)] = (first + t * stride) % swa.slots();
      swa_list[size_t(t) * lc.window + size_t(lc.window - 1)] = int32_t(new_slots[size_t(t)]);
    }
    std::vector<uint16_t> rows(size_t(T) * kHeadDim);
    for (auto& x : rows) x = ref::bf16_from_float(normal(rng));
    st.swa_slots = upload_new(swa_list);
    st.new_slots = upload_new(new_slots);
    st.new_rows = upload_new(rows);
    st.swa_lens = upload_new(std::vector<int32_t>(size_t(T), lc.window));
    if (comp) {
      st.comp_slots = upload_new(random_slots(lc.topk, comp->slots()));
      st.comp_lens = upload_new(std::vector<int32_t>(size_t(T), lc.topk));
    }
    DecodeStep& d = st.step;
    d.num_tokens = T;
    d.q = st.q.ptr();
    d.q_token_stride = q_stride;
    d.q_h_pad = h_pad;
    d.positions = static_cast<const int64_t*>(st.positions.ptr());
    d.cos_sin = static_cast<const float*>(cos_sin_.ptr());
    d.max_pos = kBenchMaxPos;
    d.swa_slots = static_cast<const int32_t*>(st.swa_slots.ptr());
    d.swa_lens = static_cast<const int32_t*>(st.swa_lens.ptr());
    d.swa_width = lc.window;
    d.comp_slots = static_cast<const int32_t*>(st.comp_slots.ptr());
    d.comp_lens = static_cast<const int32_t*>(st.comp_lens.ptr());
    d.comp_width = lc.topk;
    d.sink = static_cast<const float*>(sink_.ptr());
    d.swa_cache = CacheRef{swa.buf.ptr(), swa.page_stride, swa.pages};
    if (comp) d.comp_cache = CacheRef{comp->buf.ptr(), comp->page_stride, comp->pages};
    InsertStep& ins = st.insert;
    ins.num_rows = T;
    ins.rows = st.new_rows.ptr();
    ins.row_stride = kHeadDim;
    ins.slots = static_cast<const int64_t*>(st.new_slots.ptr());
    ins.positions = d.positions;
    ins.cos_sin = d.cos_sin;
    ins.max_pos = kBenchMaxPos;
    ins.cache = d.swa_cache;
    if (lc.out_layout == kOutMxfp8Ofused) {
      st.out_data = harness::DeviceBuffer(size_t(T) * groups * kGroupDataBytes);
      st.out_scale = harness::DeviceBuffer(size_t(4) * 32 * n4 * groups);
      d.out_data = st.out_data.ptr();
      d.out_scale = st.out_scale.ptr();
      d.n_groups_alloc = groups;
      d.n_total = T;
    } else {
      st.out_data = harness::DeviceBuffer(size_t(T) * lc.live_heads * kHeadDim * 2);
      d.out_bf16 = st.out_data.ptr();
      d.out_token_stride = int64_t(lc.live_heads) * kHeadDim;
    }
  }
  const size_t entries = size_t(T) * size_t(lc.window + lc.topk);
  bytes_read_ = size_t(T) * lc.window * size_t(record_bytes(lc.swa_format)) +
                size_t(T) * lc.topk * size_t(record_bytes(lc.comp_format)) +
                size_t(T) * lc.live_heads * kHeadDim * 2 + entries * 4;
  SWAPJIT_CU(driver().cuCtxSynchronize());
}

double time_calls(BenchInputs& in, const BenchKernels& k, CUstream s, int replays,
                  const std::function<void(const DecodeStep&)>& call) {
  return time_sets(in, k, s, replays, [&](const BenchInputs::Set& st) { call(st.step); });
}

double time_sets(BenchInputs& in, const BenchKernels& k, CUstream s, int replays,
                 const std::function<void(const BenchInputs::Set&)>& call) {
  harness::Graph graph;
  harness::Graph::begin_capture(s);
  try {
    for (auto& st : in.sets) {
      k.launch_copy(st.q_src.dptr(), st.q.dptr(), st.q_bytes, s);  // the "Q projection" of this call
      call(st);
    }
  } catch (...) {
    harness::Graph::abort_capture(s);
    throw;
  }
  graph.end_capture(s);
  for (int i = 0; i < 3; ++i) graph.launch(s);
  SWAPJIT_CU(driver().cuStreamSynchronize(s));
  harness::Event e0, e1;
  std::vector<double> ms;
  for (int i = 0; i < std::max(replays, 1); ++i) {
    e0.record(s);
    graph.launch(s);
    e1.record(s);
    SWAPJIT_CU(driver().cuStreamSynchronize(s));
    ms.push_back(e1.since(e0));
  }
  return median(ms) / kSetsPerGraph;
}

OccupancyInfo swapab_occupancy(Service& service, const CompileKey& key) {
  CubinResult cr = service.store().get(key);
  harness::RawModule mod(std::string(cr.cubin.begin(), cr.cubin.end()));
  KernelHandle h;
  h.function = mod.function(cr.lowered_name.c_str());
  h.plan = launch_plan(key);
  h.key = key;
  h.key_json = key.canonical_json();
  resolve_shape_entries(h, mod.handle());  // as ModuleCache::load
  set_launch_attributes(h);
  OccupancyInfo o;
  o.cluster = h.plan.cluster;
  o.threads = h.plan.threads;
  o.smem_bytes = h.plan.smem_bytes;
  o.max_clusters = max_active_clusters(h.function, h.plan, h.plan.cluster, h.key_json);
  o.wide_cluster = h.plan.wide_cluster;
  o.wide_max_clusters = h.plan.wide_max_items;
  o.mid_cluster = h.plan.mid_cluster;
  o.mid_max_clusters = h.plan.mid_max_items;
  o.by_cluster.assign(17, 0);
  driver().cuFuncSetAttribute(h.function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
  for (int c = 2; c <= 16; ++c) o.by_cluster[c] = max_active_clusters_or_zero(h.function, h.plan, c, h.key_json);
  return o;
}

std::string device_name() {
  DeviceInfo d = query_device(0);
  return d.name + " (" + d.arch + ", " + std::to_string(d.sm_count) + " SMs)";
}

}  // namespace swapjit::bench

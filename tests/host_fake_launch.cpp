// host_fake_launch.cpp: launch validation of the host fake driver (tests/host_fake_driver.hpp): the
// config, and every pointer of a DecodeParams / InsertParams against the live fake allocations, sized from
// the params' shapes and (for a registered image) the key's; the bench's copy kernel is executed.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "jit/kernel_family.hpp"
#include "kernels_src/key_shape.cuh"
#include "tests/host_fake_state.hpp"

namespace swapjit::hostfake::detail {

State& S() {
  static State s;
  return s;
}

namespace {
thread_local bool t_in_launch = false;
}
InLaunch::InLaunch() { t_in_launch = true; }
InLaunch::~InLaunch() { t_in_launch = false; }

CUresult violate(CUresult rc, const std::string& what) {
  State& s = S();
  ++s.st.violations;
  if (s.st.violation_log.size() < 16) s.st.violation_log.push_back(what);
  return rc;
}

// The host bytes of [dptr, dptr + bytes), or null with `why` set.
uint8_t* host_of(CUdeviceptr dptr, size_t bytes, std::string* why) {
  State& s = S();
  auto it = s.allocs.upper_bound(uintptr_t(dptr));
  if (it == s.allocs.begin()) {
    *why = fmt::format("{:#x} is not inside any allocation", dptr);
    return nullptr;
  }
  --it;
  const size_t off = uintptr_t(dptr) - it->first;
  if (!it->second.host) {
    *why = fmt::format("{:#x} is inside a freed allocation", dptr);
    return nullptr;
  }
  if (off + bytes > it->second.size) {
    *why = fmt::format("[{:#x}, +{}) runs past its allocation ({} bytes, offset {})", dptr, bytes, it->second.size, off);
    return nullptr;
  }
  return it->second.host.get() + off;
}

// ---- launch validation ----

struct Checker {
  std::vector<std::string>& out;
  void range(const void* p, long long bytes, const char* what) {
    if (bytes <= 0) return;
    if (!p) {
      out.push_back(fmt::format("{} is null but {} bytes are read/written", what, bytes));
      return;
    }
    std::string why;
    if (!host_of(CUdeviceptr(uintptr_t(p)), size_t(bytes), &why))
      out.push_back(fmt::format("{} ({} bytes): {}", what, bytes, why));
  }
  void cache(const CacheView& c, int format, int page, const char* what) {
    if (c.pages < 1) out.push_back(fmt::format("{}.pages {} < 1", what, c.pages));
    if (format != kFormatNone && c.page_stride < (long long)page * record_bytes(format))
      out.push_back(fmt::format("{}.page_stride {} < {} * {}", what, c.page_stride, page, record_bytes(format)));
    range(c.base, (long long)c.pages * c.page_stride, what);
  }
  // Every used slot id of a [T, width] list (lens per token) lies inside the cache (the fake reads the
  // lists through its own copies, as the kernel would).
  void slots(const int32_t* list, const int32_t* lens, int T, int width, const CacheView& c, int page,
             const char* what) {
    std::string why;
    auto* l = reinterpret_cast<const int32_t*>(host_of(CUdeviceptr(uintptr_t(list)), size_t(T) * width * 4, &why));
    auto* n = reinterpret_cast<const int32_t*>(host_of(CUdeviceptr(uintptr_t(lens)), size_t(T) * 4, &why));
    if (!l || !n || page <= 0) return;  // already reported by range()
    const long long cap = (long long)c.pages * page;
    for (int t = 0; t < T; ++t) {
      if (n[t] < 0 || n[t] > width) out.push_back(fmt::format("{} len[{}] = {} not in 0..{}", what, t, n[t], width));
      for (int j = 0; j < std::min(n[t], width); ++j)
        if (l[size_t(t) * width + j] < -1 || l[size_t(t) * width + j] >= cap) {
          out.push_back(fmt::format("{}[{}][{}] = {} outside the cache's {} slots", what, t, j, l[size_t(t) * width + j], cap));
          return;
        }
    }
  }
};

void check_decode(const DecodeParams& p, const Module& m, std::vector<std::string>& out) {
  Checker c{out};
  const int T = p.num_tokens;
  if (T < 1) out.push_back(fmt::format("num_tokens {} < 1", T));
  const bool key = m.has_key;
  // The heads the launch reads and writes: the key's, times the clusters each token's heads are split over
  // (DecodeParams.head_groups: 1, or 2 / 4 on a decode key run for a layer of twice / four times its heads).
  const bool decode = key && (m.key.family == Family::kSwapabDecode || m.key.family == Family::kHeadpadDecode);
  const int groups = decode ? p.head_groups : 1;
  if (decode && groups != 1 && groups != 2 && groups != 4)
    out.push_back(fmt::format("head_groups {} is not 1, 2 or 4", groups));
  const int H = (key ? m.key.live_heads : 8) * groups;  // unknown image: the smallest legal head count
  const bool chunk16 = key && m.key.q_layout == kQLayoutChunk16;
  const long long q_row = chunk16 ? 496LL * p.q_h_pad + 16LL * H : (long long)H * kHeadDim;  // last index + 1
  c.range(p.q, ((T - 1LL) * p.q_token_stride + q_row) * 2, "q");
  c.range(p.positions, T * 8LL, "positions");
  c.range(p.cos_sin, (long long)p.max_pos * 64 * 4, "cos_sin");
  if (p.max_pos < 1) out.push_back("max_pos < 1");
  c.range(p.swa_slots, (long long)T * p.swa_width * 4, "swa_slots");
  c.range(p.swa_lens, T * 4LL, "swa_lens");
  c.cache(p.swa_cache, key ? m.key.swa_format : kFormatNone, key ? m.key.swa_page : 0, "swa_cache");
  if (key) c.slots(p.swa_slots, p.swa_lens, T, p.swa_width, p.swa_cache, m.key.swa_page, "swa_slots");
  const bool comp = key ? m.key.topk > 0 : p.comp_width > 0;
  if (comp) {
    c.range(p.comp_slots, (long long)T * p.comp_width * 4, "comp_slots");
    c.range(p.comp_lens, T * 4LL, "comp_lens");
    c.cache(p.comp_cache, key ? m.key.comp_format : kFormatNone, key ? m.key.comp_page : 0, "comp_cache");
    if (key) c.slots(p.comp_slots, p.comp_lens, T, p.comp_width, p.comp_cache, m.key.comp_page, "comp_slots");
  }
  if (p.sink) c.range(p.sink, H * 4LL, "sink");
  const bool mx = key ? m.key.out_layout == kOutMxfp8Ofused : p.out_data != nullptr;
  if (mx) {
    if (p.n_total < T) out.push_back(fmt::format("n_total {} < num_tokens {}", p.n_total, T));
    if (p.n_groups_alloc < H / kHeadsPerGroup) out.push_back(fmt::format("n_groups_alloc {} < {}", p.n_groups_alloc, H / 8));
    c.range(p.out_data, (long long)p.n_total * p.n_groups_alloc * kGroupDataBytes, "out_data");
    c.range(p.out_scale, 4LL * 32 * ((p.n_total + 3) / 4 * 4) * p.n_groups_alloc, "out_scale");
  } else {
    c.range(p.out_bf16, ((T - 1LL) * p.out_token_stride + (long long)H * kHeadDim) * 2, "out_bf16");
  }
}

void check_insert(const InsertParams& p, const Module& m, std::vector<std::string>& out) {
  Checker c{out};
  const int R = p.num_rows;
  if (R < 1) out.push_back(fmt::format("num_rows {} < 1 (an empty grid)", R));
  c.range(p.rows, ((R - 1LL) * p.row_stride + kHeadDim) * 2, "rows");
  c.range(p.slots, R * 8LL, "slots");
  if (p.positions) {
    c.range(p.positions, R * 8LL, "positions");
    c.range(p.cos_sin, (long long)p.max_pos * 64 * 4, "cos_sin");
  }
  const int page = m.has_key ? m.key.swa_page : 0;
  c.cache(p.cache, m.has_key ? m.key.swa_format : kFormatNone, page, "cache");
  std::string why;
  auto* sl = reinterpret_cast<const int64_t*>(host_of(CUdeviceptr(uintptr_t(p.slots)), size_t(R) * 8, &why));
  if (sl && page > 0)
    for (int r = 0; r < R; ++r)
      if (sl[r] < -1 || sl[r] >= (long long)p.cache.pages * page) {
        out.push_back(fmt::format("slots[{}] = {} outside the cache", r, sl[r]));
        break;
      }
}

// The argument's pointers against the live allocations, by the function's kind.
void check_params(const Pending& L, std::vector<std::string>& pr) {
  const Module& m = *L.f->module;
  switch (L.f->kind) {
    case Kind::kInsert: {
      InsertParams p;
      std::memcpy(&p, L.params, sizeof p);
      check_insert(p, m, pr);
      break;
    }
    case Kind::kDecode: {
      DecodeParams p;
      std::memcpy(&p, L.params, sizeof p);
      check_decode(p, m, pr);
      break;
    }
    case Kind::kCopy: {
      uint64_t a[3];  // src, dst, n16
      std::memcpy(a, L.params, sizeof a);
      Checker c{pr};
      c.range(reinterpret_cast<const void*>(a[0]), (long long)(a[2] * 16), "copy src");
      c.range(reinterpret_cast<const void*>(a[1]), (long long)(a[2] * 16), "copy dst");
      if (a[1] < a[0] + a[2] * 16 && a[0] < a[1] + a[2] * 16) pr.push_back("copy src and dst overlap");
      break;
    }
    case Kind::kEmpty:
      break;
  }
}

// Validates one launch (eager or replayed) and logs it. Returns the driver's answer.
CUresult run_launch(const Pending& L, bool from_graph) {
  State& s = S();
  Launch rec;
  rec.function = L.f->name;
  rec.grid = L.grid, rec.block = L.block, rec.cluster = L.cluster, rec.smem = L.smem, rec.pdl = L.pdl;
  rec.from_graph = from_graph;
  rec.keyed = L.f->module->has_key;
  if (rec.keyed) rec.key = L.f->module->key;
  rec.stream = L.stream, rec.num_attrs = L.num_attrs;
  std::memcpy(rec.params, L.params, sizeof rec.params);
  auto& pr = rec.problems;
  CUresult rc = CUDA_SUCCESS;
  if (!L.f->module->live) pr.push_back("function of an unloaded module");
  if (L.block < 1 || L.block > unsigned(kMaxThreads)) pr.push_back(fmt::format("block {} > {} threads", L.block, kMaxThreads));
  if (L.cluster > (L.f->non_portable ? 16u : 8u))
    pr.push_back(fmt::format("cluster {} > {}", L.cluster, L.f->non_portable ? 16 : 8));
  if (L.grid < 1 || L.grid % L.cluster) pr.push_back(fmt::format("grid {} not a positive multiple of cluster {}", L.grid, L.cluster));
  if (int(L.smem) > L.f->max_dyn_smem) pr.push_back(fmt::format("smem {} > the function's opt-in {}", L.smem, L.f->max_dyn_smem));
  const Module& m = *L.f->module;
  if (m.has_key) {  // the launch must be the key's plan
    const LaunchPlan plan = launch_plan(m.key);
    const unsigned cl = plan.cluster > 1 ? unsigned(plan.cluster) : 1;
    // The portable shape, or the wide or mid one (launch_shape() picks them for few items), each by its own
    // entry point (FamilyInfo::wide_entry, mid_entry): the tiling a CTA runs is its function's, not the cluster's.
    const FamilyInfo& info = family_info(m.key.family);
    const bool wide_fn = info.wide_entry && L.f->name == info.wide_entry;
    const bool mid_fn = info.mid_entry && L.f->name == info.mid_entry;
    const bool wide = plan.wide_cluster > 0 && L.cluster == unsigned(plan.wide_cluster);
    const bool mid = plan.mid_cluster > 0 && L.cluster == unsigned(plan.mid_cluster);
    if (wide != wide_fn || mid != mid_fn)
      pr.push_back(fmt::format("function {} launched in clusters of {}: not its tiling's (wide {}, mid {}, portable {})",
                               L.f->name, L.cluster, plan.wide_cluster, plan.mid_cluster, plan.cluster));
    const unsigned per_item = wide ? plan.wide_cluster : mid ? plan.mid_cluster : plan.ctas_per_item;
    if (L.block != unsigned(plan.threads) || (L.cluster != cl && !wide && !mid) ||
        L.smem != unsigned(plan.smem_bytes) || L.grid % per_item)
      pr.push_back(fmt::format("config grid {} block {} cluster {} smem {} is not the key's plan ({} ctas/item, {}, {}, {})",
                               L.grid, L.block, L.cluster, L.smem, plan.ctas_per_item, plan.threads, cl, plan.smem_bytes));
  }
  if (!pr.empty()) rc = CUDA_ERROR_INVALID_VALUE;
  check_params(L, pr);
  if (!pr.empty() && rc == CUDA_SUCCESS) rc = CUDA_ERROR_ILLEGAL_ADDRESS;  // the kernel would fault
  if (pr.empty() && L.f->kind == Kind::kCopy) {  // the one kernel the fake runs
    uint64_t a[3];
    std::memcpy(a, L.params, sizeof a);
    std::string why;
    std::memmove(host_of(a[1], a[2] * 16, &why), host_of(a[0], a[2] * 16, &why), a[2] * 16);
  }
  if (!pr.empty()) violate(rc, fmt::format("launch of {}: {}", L.f->name, pr.front()));
  ++(from_graph ? s.st.graph_launches : s.st.launches);
  if (s.st.launches_log.size() < 4096) s.st.launches_log.push_back(std::move(rec));
  return rc;
}

CUresult launch_entry(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  Pending p;
  p.f = reinterpret_cast<Func*>(f);
  const bool has_params = f && p.f->kind != Kind::kEmpty;
  if (!c || !f || (has_params && (!params || !params[0])) || extra)
    return violate(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernelEx: null config / function / params, or extra set");
  p.grid = c->gridDimX, p.block = c->blockDimX, p.smem = c->sharedMemBytes;
  p.stream = c->hStream, p.num_attrs = c->numAttrs;
  if (c->gridDimY != 1 || c->gridDimZ != 1 || c->blockDimY != 1 || c->blockDimZ != 1)
    return violate(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernelEx: y/z dimensions are not 1");
  for (unsigned i = 0; i < c->numAttrs; ++i) {
    if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) p.cluster = c->attrs[i].value.clusterDim.x;
    if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
      p.pdl = c->attrs[i].value.programmaticStreamSerializationAllowed != 0;
  }
  switch (p.f->kind) {
    case Kind::kInsert: std::memcpy(p.params, params[0], sizeof(InsertParams)); break;
    case Kind::kDecode: std::memcpy(p.params, params[0], sizeof(DecodeParams)); break;
    case Kind::kCopy:  // three 8-byte arguments, each through its own pointer
      for (int i = 0; i < 3; ++i) std::memcpy(p.params + 8 * i, params[i], 8);
      break;
    case Kind::kEmpty: break;
  }
  Stream* st = reinterpret_cast<Stream*>(c->hStream);
  if (st && st->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
    st->captured.push_back(p);
    // Validated now too (a capture records pointers that must be live when it replays).
    std::vector<std::string> pr;
    check_params(p, pr);
    if (!pr.empty()) return violate(CUDA_ERROR_ILLEGAL_ADDRESS, "captured launch: " + pr.front());
    return CUDA_SUCCESS;
  }
  const CUresult rc = run_launch(p, false);
  return rc == CUDA_SUCCESS ? S().fail_rc : rc;  // fail_launches(): a failure on purpose
}

}  // namespace swapjit::hostfake::detail

namespace swapjit::hostfake {

Stats stats() {
  std::lock_guard<std::mutex> lock(detail::S().mu);
  return detail::S().st;
}

void register_image(const std::string& cubin, const CompileKey& key) {
  std::lock_guard<std::mutex> lock(detail::S().mu);
  for (const auto& im : detail::S().images)
    if (im.first == cubin) return;
  detail::S().images.emplace_back(cubin, key);
}

void fail_launches(CUresult rc) {
  std::lock_guard<std::mutex> lock(detail::S().mu);
  detail::S().fail_rc = rc;
}

void refuse_non_portable_clusters(bool refuse) {
  std::lock_guard<std::mutex> lock(detail::S().mu);
  detail::S().refuse_non_portable = refuse;
}

bool in_launch() { return detail::t_in_launch; }

}  // namespace swapjit::hostfake

// decode_attention.cpp: DecodeAttention (include/swapjit/decode_attention.hpp): per-step host checks,
// dispatch, the warmed-handle lookup and the launch. forward() and insert() must not allocate once the
// layer is warm (tests/test_launch_path.cpp counts).
#include <fmt/format.h>

#include "jit/kernel_family.hpp"
#include "runtime/driver.hpp"
#include "runtime/launcher.hpp"
#include "runtime/service_impl.hpp"
#include "runtime/step_params.hpp"

namespace swapjit {

void DecodeAttention::Impl::fill(int slot, const KernelHandle& handle) {
  std::lock_guard<std::mutex> lock(mu);
  Slot& s = slots[slot];
  if (s.ready.load(std::memory_order_relaxed)) return;
  s.handle = handle;
  s.ready.store(true, std::memory_order_release);
}

const KernelHandle& DecodeAttention::Impl::handle_for(int slot, CUstream stream) {
  Slot& s = slots[slot];
  if (s.ready.load(std::memory_order_acquire)) return s.handle;  // the hot path: one load
  // Not warmed. The capture state comes first: a capture must never see a compile or a module load.
  const DriverApi& api = driver();
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  SWAPJIT_CU_KEY(api.cuStreamIsCapturing(stream, &capture), s.key_json);
  if (capture != CU_STREAM_CAPTURE_STATUS_NONE)
    throw Error(ErrorCode::kNotWarmed,
                fmt::format("{} not warmed and the stream is capturing: call Service::warmup() before capture",
                            lk.keys[slot].describe()),
                s.key_json);
  if (service->sealed.load(std::memory_order_acquire))
    throw Error(ErrorCode::kNotWarmed,
                fmt::format("{} not warmed and the service is sealed: register the layer before warmup()",
                            lk.keys[slot].describe()),
                s.key_json);
  // No layer lock while the service loads (the service takes its own lock, and warmup() takes the
  // service's lock before a layer's: never the other order).
  KernelHandle h = service->load_one(lk.keys[slot]);
  fill(slot, h);
  return s.handle;
}

DecodeAttention::DecodeAttention(Service& service, const LayerConfig& config) : impl_(std::make_unique<Impl>()) {
  Impl& L = *impl_;
  L.service = &service.impl();
  L.config = config;
  L.lk = build_layer_keys(config, service.arch());
  for (int s = 0; s < kSlotCount; ++s) {
    if (!L.lk.present[s]) continue;
    L.slots[s].key_json = L.lk.keys[s].canonical_json();
    if (std::find(L.keys.begin(), L.keys.end(), L.lk.keys[s]) == L.keys.end()) L.keys.push_back(L.lk.keys[s]);
  }
  L.dispatch.arch_has_swapab = !variants_for(Family::kSwapabDecode, service.arch()).empty();
  L.dispatch.live_heads = config.live_heads;
  L.dispatch.window = config.window;
  L.dispatch.topk = config.topk;
  L.dispatch.batch_invariant = config.batch_invariant;
  L.dispatch.swapab_max_tokens = swapab_max_tokens_for(service.options(), config.live_heads);
  L.dispatch.has_split = L.lk.present[kSlotSwapabSplit];
  L.dispatch.split_max_tokens =
      swapab_split_max_tokens_for(service.options(), config.live_heads, config.topk);
  L.dispatch.has_quarter = L.lk.present[kSlotSwapabQuarter];
  L.dispatch.split4_max_tokens =
      swapab_split4_max_tokens_for(service.options(), config.live_heads, config.topk);
  L.dispatch.split_also_at = swapab_split_also_at_for(service.options(), config.live_heads, config.topk);
  L.dispatch.split4_also_at = swapab_split4_also_at_for(service.options(), config.live_heads, config.topk);
  L.dispatch.has_headpad_split = L.lk.present[kSlotHeadpadSplit];
  L.dispatch.has_headpad_quarter = L.lk.present[kSlotHeadpadQuarter];
  L.dispatch.headpad_split_max_tokens = service.options().headpad_split_max_tokens;
  L.dispatch.headpad_split4_max_tokens = service.options().headpad_split4_max_tokens;
  L.service->register_layer(&L);
}

DecodeAttention::~DecodeAttention() { impl_->service->unregister_layer(impl_.get()); }

void DecodeAttention::forward(const DecodeStep& step, CUstream stream, KernelChoice choice) {
  forward(step, stream, choice, 0);
}

void DecodeAttention::forward(const DecodeStep& step, CUstream stream, KernelChoice choice, int head_groups) {
  Impl& L = *impl_;
  check_decode_step(L.config, step, L.slots[kSlotHeadpad].key_json);
  // A step splits each token's heads over `groups` clusters (two or four up to the layer's caps, forced or
  // not): the key of a half or a quarter of the heads, that many times the clusters.
  bool swapab = false;
  int groups = 1;
  if (choice == KernelChoice::kAuto) {
    const DispatchDecision d = dispatch_step(L.dispatch, step.num_tokens, step.swa_width);
    swapab = d.choice == KernelChoice::kSwapab;
    groups = d.head_groups;
  } else if (choice == KernelChoice::kSwapab) {
    if (!L.lk.present[kSlotSwapab])
      throw Error(ErrorCode::kUnsupported, fmt::format("forced swapab on a layer that has no swap-AB key: {}",
                                                       L.lk.no_swapab_reason),
                  L.slots[kSlotHeadpad].key_json);
    if (step.swa_width != L.config.window)
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("DecodeStep.swa_width: {} != window {} (the swap-AB kernel needs the full window)",
                              step.swa_width, L.config.window),
                  L.slots[kSlotSwapab].key_json);
    swapab = true;
    groups = swapab_head_groups(L.dispatch, step.num_tokens);
  } else {  // forced head-padded: its own split (1 below 64 heads)
    groups = headpad_head_groups(L.dispatch, step.num_tokens);
  }
  if (head_groups != 0) {  // forced (the public overload); 0 = the dispatch's
    const int slot = swapab ? swapab_slot(head_groups) : headpad_slot(head_groups);
    if ((head_groups != 1 && head_groups != 2 && head_groups != 4) || !L.lk.present[slot])
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("forward(head_groups = {}): the layer has no {} key of 1/{} of its {} heads", head_groups,
                              swapab ? "swap-AB" : "head-padded", head_groups, L.config.live_heads),
                  L.slots[kSlotHeadpad].key_json);
    groups = head_groups;
  }
  // The kernels take the token as cluster >> (head_groups / 2) (kernel_params.cuh): 1, 2 or 4 only.
  if (groups != 1 && groups != 2 && groups != 4)
    throw Error(ErrorCode::kInternal, fmt::format("forward: the dispatch chose {} head groups (1, 2 or 4)", groups),
                L.slots[kSlotHeadpad].key_json);
  const KernelHandle& h = L.handle_for(swapab ? swapab_slot(groups) : headpad_slot(groups), stream);
  DecodeParams params = make_decode_params(step);
  params.head_groups = groups;
  launch_kernel(h, step.num_tokens * groups, &params, stream);
}

void DecodeAttention::insert(const InsertStep& step, bool swa, CUstream stream) {
  Impl& L = *impl_;
  const int slot = swa ? kSlotInsertSwa : kSlotInsertComp;
  if (!L.lk.present[slot])
    throw Error(ErrorCode::kInvalidArgument, "insert(swa = false) on an SWA-only layer (topk 0): it has no compressed cache",
                L.slots[kSlotHeadpad].key_json);
  const int format = swa ? L.config.swa_format : L.config.comp_format;
  const int page = swa ? L.config.swa_page : L.config.comp_page;
  check_insert_step(step, format, page, L.slots[slot].key_json);
  if (step.num_rows == 0) return;  // nothing to write; an empty grid is not a valid launch
  const KernelHandle& h = L.handle_for(slot, stream);
  InsertParams params = make_insert_params(step);
  launch_kernel(h, step.num_rows, &params, stream);
}

KernelChoice DecodeAttention::choose(int num_tokens, int swa_width) const {
  return dispatch_step(impl_->dispatch, num_tokens, swa_width).choice;
}

const char* DecodeAttention::explain_choice(int num_tokens, int swa_width) const {
  return dispatch_step(impl_->dispatch, num_tokens, swa_width).reason;
}

const std::vector<CompileKey>& DecodeAttention::keys() const { return impl_->keys; }
const LayerConfig& DecodeAttention::config() const { return impl_->config; }

const CompileKey& DecodeAttention::key_for(KernelChoice choice) const {
  const Impl& L = *impl_;
  if (choice == KernelChoice::kAuto)
    throw Error(ErrorCode::kInvalidArgument, "key_for(kAuto): choose() the kernel for a step first");
  if (choice == KernelChoice::kSwapab) {
    if (!L.lk.present[kSlotSwapab])
      throw Error(ErrorCode::kUnsupported, fmt::format("the layer has no swap-AB key: {}", L.lk.no_swapab_reason),
                  L.slots[kSlotHeadpad].key_json);
    return L.lk.keys[kSlotSwapab];
  }
  return L.lk.keys[kSlotHeadpad];
}

const CompileKey& DecodeAttention::launch_key(int num_tokens, int swa_width) const {
  const Impl& L = *impl_;
  const DispatchDecision d = dispatch_step(L.dispatch, num_tokens, swa_width);
  if (d.choice != KernelChoice::kSwapab) return L.lk.keys[headpad_slot(d.head_groups)];
  return L.lk.keys[swapab_slot(d.head_groups)];
}

const CompileKey& DecodeAttention::insert_key(bool swa) const {
  const Impl& L = *impl_;
  const int slot = swa ? kSlotInsertSwa : kSlotInsertComp;
  if (!L.lk.present[slot])
    throw Error(ErrorCode::kInvalidArgument, "insert_key(false) on an SWA-only layer (topk 0)");
  return L.lk.keys[slot];
}

}  // namespace swapjit

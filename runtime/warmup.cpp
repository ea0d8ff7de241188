// warmup.cpp: layer keys and the parallel cubin fetch.
#include "runtime/warmup.hpp"

#include <atomic>
#include <cstdlib>
#include <exception>
#include <thread>

#include <fmt/format.h>

#include "jit/error.hpp"
#include "jit/kernel_family.hpp"
#include "runtime/dispatch.hpp"

namespace swapjit {

namespace {
[[noreturn]] void bad_config(const char* field, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, fmt::format("LayerConfig.{}: {}", field, why));
}
}  // namespace

LayerKeys build_layer_keys(const LayerConfig& c, const std::string& arch) {
  // The key's own validate() checks ranges too; these name the LayerConfig field a caller set.
  if (c.live_heads != 8 && c.live_heads != 16 && c.live_heads != 32 && c.live_heads != 64 && c.live_heads != 128)
    bad_config("live_heads", fmt::format("{} is not one of 8, 16, 32, 64, 128", c.live_heads));
  if (c.window < 1) bad_config("window", fmt::format("{} < 1", c.window));
  if (c.topk < 0) bad_config("topk", fmt::format("{} < 0", c.topk));
  if (record_bytes(c.swa_format) == 0) bad_config("swa_format", fmt::format("unknown record format {}", c.swa_format));
  if (c.topk > 0 && record_bytes(c.comp_format) == 0)
    bad_config("comp_format", fmt::format("unknown record format {} on a layer with topk {}", c.comp_format, c.topk));
  if (c.q_layout != kQLayoutPlain && c.q_layout != kQLayoutChunk16)
    bad_config("q_layout", fmt::format("unknown q layout {}", c.q_layout));
  if (c.out_layout != kOutMxfp8Ofused && c.out_layout != kOutBf16)
    bad_config("out_layout", fmt::format("unknown out layout {}", c.out_layout));

  LayerKeys lk;
  auto decode_key = [&](Family f,
                        int heads) {  // preferred_variant throws kUnsupported for an arch without one
    CompileKey k = make_decode_key(f, arch, heads, c.window, c.topk, c.swa_format, c.comp_format, c.swa_page,
                                   c.comp_page, c.q_layout, c.out_layout);
    k.validate();
    return k;
  };
  lk.keys[kSlotHeadpad] = decode_key(Family::kHeadpadDecode, c.live_heads);
  lk.present[kSlotHeadpad] = true;
  for (int groups : {2, 4}) {
    if (const int h = headpad_split_heads(c.live_heads, groups)) {
      lk.keys[headpad_slot(groups)] = decode_key(Family::kHeadpadDecode, h);
      lk.present[headpad_slot(groups)] = true;
    }
  }

  LayerDispatch ld;
  ld.arch_has_swapab = !variants_for(Family::kSwapabDecode, arch).empty();
  ld.live_heads = c.live_heads;
  ld.window = c.window;
  ld.topk = c.topk;
  ld.batch_invariant = c.batch_invariant;
  lk.no_swapab_reason = static_swapab_reason(ld);
  if (!lk.no_swapab_reason) {
    lk.keys[kSlotSwapab] = decode_key(Family::kSwapabDecode, c.live_heads);
    lk.present[kSlotSwapab] = true;
    for (int groups : {2, 4}) {
      if (const int h = swapab_split_heads(c.live_heads, groups)) {
        lk.keys[swapab_slot(groups)] = decode_key(Family::kSwapabDecode, h);
        lk.present[swapab_slot(groups)] = true;
      }
    }
  }

  auto insert_key = [&](int format, int page) {
    CompileKey k = make_kv_insert_key(arch, format, page);
    k.validate();
    return k;
  };
  lk.keys[kSlotInsertSwa] = insert_key(c.swa_format, c.swa_page);
  lk.present[kSlotInsertSwa] = true;
  if (c.topk > 0) {
    lk.keys[kSlotInsertComp] = insert_key(c.comp_format, c.comp_page);
    lk.present[kSlotInsertComp] = true;
  }
  return lk;
}

std::vector<CubinResult> fetch_cubins(const std::vector<CompileKey>& keys, int jobs, const CubinSource& source) {
  std::vector<CubinResult> results(keys.size());
  std::vector<std::exception_ptr> errors(keys.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < keys.size(); i = next++) {
      try {
        results[i] = source(keys[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const int n = std::max(1, std::min<int>(jobs, static_cast<int>(keys.size())));
  std::vector<std::thread> threads;
  for (int t = 1; t < n; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!errors[i]) continue;
    try {
      std::rethrow_exception(errors[i]);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(ErrorCode::kInternal, fmt::format("warmup of {} failed: {}", keys[i].describe(), e.what()),
                  keys[i].canonical_json());
    }
  }
  return results;
}

int resolve_jobs(int requested) {
  if (requested > 0) return requested;
  if (const char* env = std::getenv("SWAPJIT_JOBS")) {
    const int v = std::atoi(env);
    if (v > 0) return v;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace swapjit

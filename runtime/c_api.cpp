// c_api.cpp: include/swapjit/swapjit_c.h over the C++ API. Every entry point catches everything: an
// exception never crosses the C boundary; its text goes to a thread-local last-error string.
#include "swapjit/swapjit_c.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <new>
#include <sstream>
#include <string>

#include "jit/error.hpp"
#include "runtime/driver.hpp"
#include "swapjit/decode_attention.hpp"

#ifndef SWAPJIT_VERSION
#define SWAPJIT_VERSION "0.0.0"
#endif

struct swapjit_service {
  std::unique_ptr<swapjit::Service> service;
};
struct swapjit_layer {
  std::unique_ptr<swapjit::DecodeAttention> layer;
};

// The C enums are the C++ values, so conversions are casts.
static_assert(SWAPJIT_CHOICE_SWAPAB == static_cast<int>(swapjit::KernelChoice::kSwapab));
static_assert(SWAPJIT_CHOICE_HEADPAD == static_cast<int>(swapjit::KernelChoice::kHeadpad));
static_assert(SWAPJIT_CHOICE_AUTO == static_cast<int>(swapjit::KernelChoice::kAuto));
static_assert(int(SWAPJIT_FORMAT_V4_FP8) == int(swapjit::kFormatV4Fp8) &&
              int(SWAPJIT_FORMAT_V41_FP4) == int(swapjit::kFormatV41Fp4) &&
              int(SWAPJIT_FORMAT_V41_FP8) == int(swapjit::kFormatV41Fp8));
static_assert(int(SWAPJIT_Q_CHUNK16) == int(swapjit::kQLayoutChunk16) && int(SWAPJIT_Q_PLAIN) == int(swapjit::kQLayoutPlain));
static_assert(int(SWAPJIT_OUT_BF16) == int(swapjit::kOutBf16) && int(SWAPJIT_OUT_MXFP8_OFUSED) == int(swapjit::kOutMxfp8Ofused));
static_assert(SWAPJIT_INTERNAL == static_cast<int>(swapjit::ErrorCode::kInternal) + 1);

namespace {

thread_local std::string t_last_error;

swapjit_status status_of(swapjit::ErrorCode c) {
  using swapjit::ErrorCode;
  switch (c) {
    case ErrorCode::kInvalidArgument: return SWAPJIT_INVALID_ARGUMENT;
    case ErrorCode::kNotFound: return SWAPJIT_NOT_FOUND;
    case ErrorCode::kCompileFailed: return SWAPJIT_COMPILE_FAILED;
    case ErrorCode::kCacheIo: return SWAPJIT_CACHE_IO;
    case ErrorCode::kNoDriver: return SWAPJIT_NO_DRIVER;
    case ErrorCode::kDriver: return SWAPJIT_DRIVER;
    case ErrorCode::kNotWarmed: return SWAPJIT_NOT_WARMED;
    case ErrorCode::kUnsupported: return SWAPJIT_UNSUPPORTED;
    case ErrorCode::kInternal: return SWAPJIT_INTERNAL;
  }
  return SWAPJIT_INTERNAL;
}

// Runs `f`, mapping exceptions to a status and the thread's last-error text.
template <class F>
swapjit_status guarded(F&& f) {
  try {
    f();
    return SWAPJIT_OK;
  } catch (const swapjit::Error& e) {
    t_last_error = e.what();
    return status_of(e.code());
  } catch (const std::bad_alloc&) {
    t_last_error = "swapjit internal: out of memory";
    return SWAPJIT_INTERNAL;
  } catch (const std::exception& e) {
    t_last_error = std::string("swapjit internal: ") + e.what();
    return SWAPJIT_INTERNAL;
  } catch (...) {
    t_last_error = "swapjit internal: unknown exception";
    return SWAPJIT_INTERNAL;
  }
}

swapjit_status null_arg(const char* what) {
  t_last_error = std::string("swapjit invalid_argument: ") + what + " is NULL";
  return SWAPJIT_INVALID_ARGUMENT;
}

swapjit::CacheRef cache_of(const swapjit_cache_ref& c) { return swapjit::CacheRef{c.base, c.page_stride, c.pages}; }

}  // namespace

extern "C" {

void swapjit_service_options_init(swapjit_service_options* o) {
  if (!o) return;
  *o = swapjit_service_options{nullptr, 0, 0, nullptr, 0, 0, 0, 0, 0};  // every cap and table: the measured default
}

void swapjit_layer_config_init(swapjit_layer_config* c) {
  if (!c) return;
  const swapjit::LayerConfig d;
  *c = swapjit_layer_config{d.live_heads, d.window,    d.topk,       d.swa_format,     d.comp_format,
                            d.swa_page,   d.comp_page, d.q_layout,   d.out_layout,     d.batch_invariant ? 1 : 0};
}

void swapjit_decode_step_init(swapjit_decode_step* s) {
  if (!s) return;
  *s = swapjit_decode_step{};
  const swapjit::DecodeStep d;
  s->q_h_pad = d.q_h_pad;
  s->sm_scale = d.sm_scale;
}

void swapjit_insert_step_init(swapjit_insert_step* s) {
  if (!s) return;
  *s = swapjit_insert_step{};
  s->row_stride = swapjit::InsertStep{}.row_stride;
}

const char* swapjit_version(void) { return SWAPJIT_VERSION; }

int swapjit_has_driver(void) {
  if (swapjit::has_driver()) return 1;
  t_last_error = "swapjit no_driver: " + swapjit::no_driver_reason();
  return 0;
}

const char* swapjit_last_error(void) { return t_last_error.c_str(); }

const char* swapjit_status_name(swapjit_status s) {
  if (s == SWAPJIT_OK) return "ok";
  if (s < SWAPJIT_INVALID_ARGUMENT || s > SWAPJIT_INTERNAL) return "unknown";
  return swapjit::error_code_name(static_cast<swapjit::ErrorCode>(static_cast<int>(s) - 1));
}

swapjit_status swapjit_service_create(const swapjit_service_options* options, swapjit_service_t* out) {
  if (!out) return null_arg("out");
  *out = nullptr;
  return guarded([&] {
    swapjit::ServiceOptions o;
    if (options) {
      if (options->cache_dirs && *options->cache_dirs) {
        o.store.roots.clear();
        std::stringstream ss(options->cache_dirs);
        for (std::string root; std::getline(ss, root, ':');)
          if (!root.empty()) o.store.roots.push_back(root);
      }
      o.jobs = options->jobs;
      o.device = options->device;
      if (options->arch) o.arch = options->arch;
      if (options->swapab_max_tokens > 0) o.swapab_max_tokens = options->swapab_max_tokens;
      // C: 0 = default, -1 = never; ServiceOptions: -1 = default, 0 = never.
      auto split_cap = [](int c) { return c == 0 ? -1 : c < 0 ? 0 : c; };
      o.swapab_split_max_tokens = split_cap(options->swapab_split_max_tokens);
      o.swapab_split4_max_tokens = split_cap(options->swapab_split4_max_tokens);
      // The head-padded caps: both 0 keep the table (ServiceOptions: both -1); set, one replaces it and the
      // other, still 0, then means never (as both ServiceOptions fields at >= 0 with -1 read as 0).
      if (options->headpad_split_max_tokens != 0 || options->headpad_split4_max_tokens != 0) {
        o.headpad_split_max_tokens = std::max(0, options->headpad_split_max_tokens);
        o.headpad_split4_max_tokens = std::max(0, options->headpad_split4_max_tokens);
      }
    }
    auto h = std::make_unique<swapjit_service>();
    h->service = std::make_unique<swapjit::Service>(std::move(o));
    *out = h.release();
  });
}

void swapjit_service_destroy(swapjit_service_t s) { delete s; }

swapjit_status swapjit_service_warmup(swapjit_service_t s) {
  if (!s) return null_arg("service");
  return guarded([&] { s->service->warmup(); });
}

swapjit_status swapjit_service_seal(swapjit_service_t s) {
  if (!s) return null_arg("service");
  return guarded([&] { s->service->seal(); });
}

swapjit_status swapjit_service_arch(swapjit_service_t s, char* buf, int cap) {
  if (!s) return null_arg("service");
  if (!buf || cap < 1) return null_arg("buf");
  return guarded([&] {
    const std::string a = s->service->arch();
    const size_t n = std::min(a.size(), static_cast<size_t>(cap - 1));
    a.copy(buf, n);
    buf[n] = '\0';
  });
}

swapjit_status swapjit_layer_create(swapjit_service_t s, const swapjit_layer_config* c, swapjit_layer_t* out) {
  if (!out) return null_arg("out");
  *out = nullptr;
  if (!s) return null_arg("service");
  if (!c) return null_arg("config");
  return guarded([&] {
    swapjit::LayerConfig lc;
    lc.live_heads = c->live_heads;
    lc.window = c->window;
    lc.topk = c->topk;
    lc.swa_format = c->swa_format;
    lc.comp_format = c->comp_format;
    lc.swa_page = c->swa_page;
    lc.comp_page = c->comp_page;
    lc.q_layout = c->q_layout;
    lc.out_layout = c->out_layout;
    lc.batch_invariant = c->batch_invariant != 0;
    auto h = std::make_unique<swapjit_layer>();
    h->layer = std::make_unique<swapjit::DecodeAttention>(*s->service, lc);
    *out = h.release();
  });
}

void swapjit_layer_destroy(swapjit_layer_t layer) { delete layer; }

namespace {
// Writes `j` NUL-terminated into buf (truncated to cap); *needed = its full length + 1.
void write_json(const std::string& j, char* buf, int cap, int* needed) {
  if (needed) *needed = static_cast<int>(j.size() + 1);
  if (buf && cap > 0) {
    const size_t n = std::min(j.size(), static_cast<size_t>(cap - 1));
    j.copy(buf, n);
    buf[n] = '\0';
  }
}
}  // namespace

swapjit_status swapjit_layer_keys_json(swapjit_layer_t layer, char* buf, int cap, int* needed) {
  if (!layer) return null_arg("layer");
  return guarded([&] {
    std::string j = "[";
    for (const auto& k : layer->layer->keys()) j += (j.size() > 1 ? "," : "") + k.canonical_json();
    j += "]";
    write_json(j, buf, cap, needed);
  });
}

swapjit_status swapjit_layer_launch_key_json(swapjit_layer_t layer, int num_tokens, int swa_width, char* buf,
                                             int cap, int* needed) {
  if (!layer) return null_arg("layer");
  return guarded([&] {
    write_json(layer->layer->launch_key(num_tokens, swa_width).canonical_json(), buf, cap, needed);
  });
}

int swapjit_layer_choose(swapjit_layer_t layer, int num_tokens, int swa_width) {
  if (!layer) return SWAPJIT_CHOICE_HEADPAD;
  return layer->layer->choose(num_tokens, swa_width) == swapjit::KernelChoice::kSwapab ? SWAPJIT_CHOICE_SWAPAB
                                                                                       : SWAPJIT_CHOICE_HEADPAD;
}

swapjit_status swapjit_forward(swapjit_layer_t layer, const swapjit_decode_step* st, void* stream, int choice) {
  if (!layer) return null_arg("layer");
  if (!st) return null_arg("step");
  if (choice < SWAPJIT_CHOICE_AUTO || choice > SWAPJIT_CHOICE_HEADPAD) {
    t_last_error = "swapjit invalid_argument: choice is not SWAPJIT_CHOICE_AUTO/SWAPAB/HEADPAD";
    return SWAPJIT_INVALID_ARGUMENT;
  }
  return guarded([&] {
    swapjit::DecodeStep d;
    d.num_tokens = st->num_tokens;
    d.q = st->q;
    d.q_token_stride = st->q_token_stride;
    d.q_h_pad = st->q_h_pad;
    d.positions = st->positions;
    d.cos_sin = st->cos_sin;
    d.max_pos = st->max_pos;
    d.swa_slots = st->swa_slots;
    d.swa_lens = st->swa_lens;
    d.swa_width = st->swa_width;
    d.comp_slots = st->comp_slots;
    d.comp_lens = st->comp_lens;
    d.comp_width = st->comp_width;
    d.sink = st->sink;
    d.sm_scale = st->sm_scale;
    d.swa_cache = cache_of(st->swa_cache);
    d.comp_cache = cache_of(st->comp_cache);
    d.out_data = st->out_data;
    d.out_scale = st->out_scale;
    d.n_groups_alloc = st->n_groups_alloc;
    d.n_total = st->n_total;
    d.out_bf16 = st->out_bf16;
    d.out_token_stride = st->out_token_stride;
    layer->layer->forward(d, static_cast<CUstream>(stream), static_cast<swapjit::KernelChoice>(choice));
  });
}

swapjit_status swapjit_insert(swapjit_layer_t layer, const swapjit_insert_step* st, int swa, void* stream) {
  if (!layer) return null_arg("layer");
  if (!st) return null_arg("step");
  return guarded([&] {
    swapjit::InsertStep d;
    d.num_rows = st->num_rows;
    d.rows = st->rows;
    d.row_stride = st->row_stride;
    d.slots = st->slots;
    d.positions = st->positions;
    d.cos_sin = st->cos_sin;
    d.max_pos = st->max_pos;
    d.cache = cache_of(st->cache);
    layer->layer->insert(d, swa != 0, static_cast<CUstream>(stream));
  });
}

}  // extern "C"

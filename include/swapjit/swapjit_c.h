/* swapjit_c.h: the C API of swapjit, for callers that cannot use the C++ API (Python through ctypes, other
 * languages). Opaque handles; every function returns a status; the last error's text is kept per thread.
 * Mirrors include/swapjit/decode_attention.hpp: see there for the meaning of every field. */
#ifndef SWAPJIT_C_H_
#define SWAPJIT_C_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Mirrors swapjit::ErrorCode, plus OK. */
typedef enum swapjit_status {
  SWAPJIT_OK = 0,
  SWAPJIT_INVALID_ARGUMENT = 1,
  SWAPJIT_NOT_FOUND = 2,
  SWAPJIT_COMPILE_FAILED = 3,
  SWAPJIT_CACHE_IO = 4,
  SWAPJIT_NO_DRIVER = 5,
  SWAPJIT_DRIVER = 6,
  SWAPJIT_NOT_WARMED = 7,
  SWAPJIT_UNSUPPORTED = 8,
  SWAPJIT_INTERNAL = 9
} swapjit_status;

/* Record formats, layouts and kernel choices: the values of kernels_src/key_shape.cuh. */
enum { SWAPJIT_FORMAT_NONE = 0, SWAPJIT_FORMAT_V41_FP8 = 1, SWAPJIT_FORMAT_V41_FP4 = 2, SWAPJIT_FORMAT_V4_FP8 = 3 };
enum { SWAPJIT_Q_PLAIN = 1, SWAPJIT_Q_CHUNK16 = 2 };
enum { SWAPJIT_OUT_MXFP8_OFUSED = 1, SWAPJIT_OUT_BF16 = 2 };
enum { SWAPJIT_CHOICE_AUTO = 0, SWAPJIT_CHOICE_SWAPAB = 1, SWAPJIT_CHOICE_HEADPAD = 2 };

typedef struct swapjit_service* swapjit_service_t;
typedef struct swapjit_layer* swapjit_layer_t;

typedef struct swapjit_service_options {
  const char* cache_dirs;  /* colon list of cache roots, NULL = SWAPJIT_CACHE_DIR or the default */
  int jobs;                /* 0 = SWAPJIT_JOBS or hardware threads */
  int device;              /* CUDA ordinal */
  const char* arch;        /* NULL or "" = from the device */
  int swapab_max_tokens;   /* 0 = per head count: 64 for 16 and 32 heads (SPEC.md §5 cap, measured) */
  /* Steps of at most this many tokens split each token's heads over two (four) clusters on the swap-AB key of
     half (a quarter of) the heads: 0 = the measured default per layer, -1 = never, > 0 = that cap. */
  int swapab_split_max_tokens;
  int swapab_split4_max_tokens;
  /* The head-padded kernel's head splits on layers of 64 or more heads: steps of at most this many tokens
     split each token's heads over two (four, checked first) clusters. Both 0 = the measured table per layer
     (default_headpad_head_groups); otherwise these caps replace it (either at 0 or -1 = never). */
  int headpad_split_max_tokens;
  int headpad_split4_max_tokens;
} swapjit_service_options;

typedef struct swapjit_layer_config {
  int live_heads, window, topk;
  int swa_format, comp_format, swa_page, comp_page;
  int q_layout, out_layout;
  int batch_invariant;
} swapjit_layer_config;

typedef struct swapjit_cache_ref {
  const void* base; /* device pointer, 16-byte aligned */
  int64_t page_stride;
  int32_t pages;
} swapjit_cache_ref;

typedef struct swapjit_decode_step {
  int32_t num_tokens;
  const void* q; /* bf16 per q_layout */
  int64_t q_token_stride;
  int32_t q_h_pad;
  const int64_t* positions; /* [T] */
  const float* cos_sin;     /* [max_pos, 64] */
  int32_t max_pos;
  const int32_t* swa_slots; /* [T, swa_width] */
  const int32_t* swa_lens;  /* [T] */
  int32_t swa_width;
  const int32_t* comp_slots; /* [T, comp_width] or NULL */
  const int32_t* comp_lens;  /* [T] or NULL */
  int32_t comp_width;
  const float* sink; /* [live heads] or NULL */
  float sm_scale;
  swapjit_cache_ref swa_cache, comp_cache;
  void* out_data;  /* fp8 [n_total, n_groups_alloc, 4096] */
  void* out_scale; /* int32 view, SPEC §3.2 */
  int32_t n_groups_alloc, n_total;
  void* out_bf16; /* bf16 [T, out_token_stride] */
  int64_t out_token_stride;
} swapjit_decode_step;

typedef struct swapjit_insert_step {
  int32_t num_rows;
  const void* rows; /* bf16 [num_rows, row_stride] */
  int64_t row_stride;
  const int64_t* slots;     /* [num_rows], -1 = skip */
  const int64_t* positions; /* [num_rows] or NULL */
  const float* cos_sin;
  int32_t max_pos;
  swapjit_cache_ref cache;
} swapjit_insert_step;

/* Defaults as the C++ structs have them (V4-Flash-like TP4 layer; sm_scale 512^-0.5, q_h_pad 64, row_stride 512). */
void swapjit_service_options_init(swapjit_service_options* o);
void swapjit_layer_config_init(swapjit_layer_config* c);
void swapjit_decode_step_init(swapjit_decode_step* s);
void swapjit_insert_step_init(swapjit_insert_step* s);

const char* swapjit_version(void);
/* 1 when libcuda.so.1 loads and a device exists, else 0 (the reason in swapjit_last_error()). */
int swapjit_has_driver(void);
/* The text of this thread's last failed call ("" if none). Valid until the next call on this thread. */
const char* swapjit_last_error(void);
const char* swapjit_status_name(swapjit_status s);

swapjit_status swapjit_service_create(const swapjit_service_options* options, swapjit_service_t* out);
void swapjit_service_destroy(swapjit_service_t s); /* REQUIRES: its layers destroyed first */
swapjit_status swapjit_service_warmup(swapjit_service_t s);
swapjit_status swapjit_service_seal(swapjit_service_t s);
/* Writes the arch the service compiles for (NUL-terminated, truncated to cap). */
swapjit_status swapjit_service_arch(swapjit_service_t s, char* buf, int cap);

swapjit_status swapjit_layer_create(swapjit_service_t s, const swapjit_layer_config* config, swapjit_layer_t* out);
void swapjit_layer_destroy(swapjit_layer_t layer);
/* The layer's keys as a JSON array of canonical keys (truncated to cap; *needed = full length + 1). */
swapjit_status swapjit_layer_keys_json(swapjit_layer_t layer, char* buf, int cap, int* needed);
/* The canonical key swapjit_forward(..., SWAPJIT_CHOICE_AUTO) launches for a step of this shape (a head
   split's smaller key on small steps), as swapjit_layer_keys_json writes one. */
swapjit_status swapjit_layer_launch_key_json(swapjit_layer_t layer, int num_tokens, int swa_width, char* buf,
                                             int cap, int* needed);
/* SWAPJIT_CHOICE_SWAPAB or SWAPJIT_CHOICE_HEADPAD for a step shape. */
int swapjit_layer_choose(swapjit_layer_t layer, int num_tokens, int swa_width);

/* stream: a CUstream (NULL = the legacy default stream). choice: SWAPJIT_CHOICE_*. */
swapjit_status swapjit_forward(swapjit_layer_t layer, const swapjit_decode_step* step, void* stream, int choice);
swapjit_status swapjit_insert(swapjit_layer_t layer, const swapjit_insert_step* step, int swa, void* stream);

#ifdef __cplusplus
}
#endif
#endif /* SWAPJIT_C_H_ */

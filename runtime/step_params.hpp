// step_params.hpp: host checks of a step from its shapes alone (no device reads), and the kernel
// parameter structs built from the public step structs. On the hot path: nothing here allocates unless it
// throws.
#pragma once
#include <string>

#include "kernels_src/kernel_params.cuh"
#include "swapjit/decode_attention.hpp"

namespace swapjit {

// Throws Error(kInvalidArgument) naming the DecodeStep field and the layer's key (`key_json`).
void check_decode_step(const LayerConfig& layer, const DecodeStep& step, const std::string& key_json);
// Throws Error(kInvalidArgument) naming the InsertStep field. `format` / `page` are the target cache's.
void check_insert_step(const InsertStep& step, int format, int page, const std::string& key_json);

DecodeParams make_decode_params(const DecodeStep& step);
InsertParams make_insert_params(const InsertStep& step);

}  // namespace swapjit

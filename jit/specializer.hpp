// specializer.hpp: turns a compile key into the NVRTC translation unit (SPEC.md §6, DESIGN.md
// "Specialisation by named constants"): a prelude that declares the key's values as named constexprs,
// then `#include "<family source>"`. Every kernels_src/ file is handed to NVRTC as a header by file name,
// so kernel files include each other as `#include "key_shape.cuh"`.
#pragma once
#include <string>
#include <vector>

#include "jit/compile_key.hpp"

namespace swapjit {

// The rendered translation unit of `key`:
//   #include "key_shape.cuh"
//   #include "kernel_params.cuh"
//   namespace swapjit { constexpr KeyShape kKey{...}; constexpr int kVariant = <VariantId>; }
//   #include "<family source file>"
// REQUIRES: key.validate() passes (the variant name must parse).
std::string render_source(const CompileKey& key);

// The development timeline build of `key` (`swapjit timeline`; never cached): render_source with
// SWAPJIT_TIMELINE defined first, and SWAPJIT_TIMELINE_LEAN too when `lean` (no per-warp points:
// kernels_src/timeline_stamps.cuh).
std::string render_timeline_source(const CompileKey& key, bool lean);

// The header set for nvrtcCreateProgram: names and contents of every embedded kernels_src/ file. The
// pointers stay valid for the life of the process (they point into the embedded tables).
struct HeaderSet {
  std::vector<const char*> names;
  std::vector<const char*> contents;
  int count() const { return static_cast<int>(names.size()); }
};
const HeaderSet& nvrtc_headers();

// True when the embedded sources hold `file_name` (e.g. "swapab_decode.cuh").
bool has_embedded_source(const std::string& file_name);

}  // namespace swapjit

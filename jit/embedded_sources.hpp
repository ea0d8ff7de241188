// embedded_sources.hpp: the kernels_src/ files, embedded into the library at build time by CMake
// (cmake/embed_sources.cmake generates the definition). NVRTC sees them as headers by these names.
#pragma once
#include <span>
#include <string_view>

namespace swapjit {

struct EmbeddedSource {
  std::string_view name;     // file name relative to kernels_src/, e.g. "swapab_decode.cuh"
  std::string_view content;  // the file's bytes
};

std::span<const EmbeddedSource> embedded_sources();

}  // namespace swapjit

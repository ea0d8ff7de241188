// specializer.cpp: the prelude text is a fixed convention shared with the kernel sources (preamble of the
// project); change it only together with them, since every kernel reads kKey / kVariant from it.
#include "jit/specializer.hpp"

#include <fmt/format.h>

#include <string_view>

#include "jit/embedded_sources.hpp"
#include "jit/kernel_family.hpp"

namespace swapjit {

std::string render_source(const CompileKey& key) {
  const KeyShape s = key.shape();
  const int variant = parse_variant(key.variant);
  std::string src;
  src += "#include \"key_shape.cuh\"\n";
  src += "#include \"kernel_params.cuh\"\n";
  src += fmt::format(
      "namespace swapjit {{ constexpr KeyShape kKey{{{}, {}, {}, {}, {}, {}, {}, {}, {}}}; "
      "constexpr int kVariant = {}; }}\n",
      s.live_heads, s.window, s.topk, s.swa_format, s.comp_format, s.swa_page, s.comp_page, s.q_layout,
      s.out_layout, variant);
  src += fmt::format("#include \"{}\"\n", family_info(key.family).source_file);
  return src;
}

std::string render_timeline_source(const CompileKey& key, bool lean) {
  return std::string("#define SWAPJIT_TIMELINE 1\n") + (lean ? "#define SWAPJIT_TIMELINE_LEAN 1\n" : "") +
         render_source(key);
}

namespace {

// The embedded table has static storage, but NVRTC wants NUL-terminated strings and a string_view does
// not promise one; keep owned copies built once.
struct OwnedHeaders {
  std::vector<std::string> names, contents;
  HeaderSet set;
  OwnedHeaders() {
    for (const auto& e : embedded_sources()) {
      names.emplace_back(e.name);
      contents.emplace_back(e.content);
    }
    for (size_t i = 0; i < names.size(); ++i) {
      set.names.push_back(names[i].c_str());
      set.contents.push_back(contents[i].c_str());
    }
  }
};

}  // namespace

const HeaderSet& nvrtc_headers() {
  static const OwnedHeaders owned;  // magic static: thread-safe one-time init, off the launch path
  return owned.set;
}

bool has_embedded_source(const std::string& file_name) {
  for (const auto& e : embedded_sources())
    if (e.name == file_name) return true;
  return false;
}

}  // namespace swapjit

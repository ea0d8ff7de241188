// digest.cpp: toolchain identity and key digests (DESIGN.md "The key is typed and canonical"). Only
// content enters a digest (versions, file hashes, canonical key, options): never a path, so a cache built in
// one image serves another with the same toolkit.
#include "jit/digest.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <link.h>
#include <nvrtc.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "jit/embedded_sources.hpp"
#include "jit/error.hpp"
#include "jit/nvrtc_compiler.hpp"

namespace swapjit {
namespace {

// Incremental sha256 over OpenSSL EVP (the one-shot SHA256() is deprecated in OpenSSL 3).
class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1)
      throw Error(ErrorCode::kInternal, "sha256: EVP_DigestInit_ex failed");
  }
  void update(const void* data, size_t size) {
    if (size && EVP_DigestUpdate(ctx_.get(), data, size) != 1)
      throw Error(ErrorCode::kInternal, "sha256: EVP_DigestUpdate failed");
  }
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), md, &len) != 1)
      throw Error(ErrorCode::kInternal, "sha256: EVP_DigestFinal_ex failed");
    std::string out;
    out.reserve(2 * len);
    for (unsigned i = 0; i < len; ++i) out += fmt::format("{:02x}", md[i]);
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kInternal, fmt::format("toolchain: cannot read {}", path));
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  return h.hex();
}

int find_nvrtc_object(struct dl_phdr_info* info, size_t, void* data) {
  if (info->dlpi_name && std::strstr(info->dlpi_name, "libnvrtc.so") &&
      !std::strstr(info->dlpi_name, "builtins")) {
    *static_cast<std::string*>(data) = info->dlpi_name;
    return 1;
  }
  return 0;
}

// The file the loaded nvrtcVersion lives in. dladdr gives it directly; if that lands elsewhere (a
// canonical PLT entry in a non-PIE executable), scan the loaded objects for libnvrtc.
std::string nvrtc_library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) && info.dli_fname &&
      std::strstr(info.dli_fname, "nvrtc"))
    return info.dli_fname;
  std::string path;
  dl_iterate_phdr(&find_nvrtc_object, &path);
  if (path.empty()) throw Error(ErrorCode::kInternal, "toolchain: cannot locate the loaded libnvrtc");
  return path;
}

// CCCL_VERSION from the headers NVRTC will compile against (the include dir in use, not the build's).
int cccl_version(const std::string& include_dir) {
  std::ifstream in(include_dir + "/cccl/cuda/std/__cccl/version.h");
  std::string line;
  while (std::getline(in, line)) {
    const std::string_view tag = "#define CCCL_VERSION ";
    if (line.rfind(tag, 0) == 0) return std::atoi(line.c_str() + tag.size());
  }
  return 0;  // headers absent: a compile would fail anyway; the digest still differs from a real toolkit's
}

Toolchain compute_current() {
  Toolchain t;
  if (nvrtcVersion(&t.nvrtc_major, &t.nvrtc_minor) != NVRTC_SUCCESS)
    throw Error(ErrorCode::kInternal, "toolchain: nvrtcVersion failed");
  t.nvrtc_library_sha256 = sha256_file(nvrtc_library_path());
  t.cccl_version = cccl_version(cuda_include_dir());
  t.sources_sha256 = embedded_sources_sha256();
  return t;
}

}  // namespace

std::string sha256_hex(const void* data, size_t size) {
  Sha256 h;
  h.update(data, size);
  return h.hex();
}

std::string embedded_sources_sha256() {
  std::vector<EmbeddedSource> files(embedded_sources().begin(), embedded_sources().end());
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  // Length-prefixed name and bytes, so no two different file sets can hash the same stream.
  Sha256 h;
  for (const auto& f : files) {
    h.update(fmt::format("{}:{}\n", f.name.size(), f.name));
    h.update(fmt::format("{}:", f.content.size()));
    h.update(f.content);
    h.update("\n");
  }
  return h.hex();
}

std::string Toolchain::fingerprint() const {
  nlohmann::json j = {{"nvrtc_major", nvrtc_major},
                      {"nvrtc_minor", nvrtc_minor},
                      {"nvrtc_library_sha256", nvrtc_library_sha256},
                      {"cccl_version", cccl_version},
                      {"sources_sha256", sources_sha256}};
  return j.dump();
}

const Toolchain& Toolchain::current() {
  static const Toolchain t = compute_current();  // magic static: computed once, thread-safe
  return t;
}

std::string key_digest(const CompileKey& key, const Toolchain& toolchain) {
  // One length-prefixed field per line, versioned, so a future layout change cannot collide with this one.
  std::string text = "swapjit-key-digest-v1\n";
  auto add = [&](std::string_view name, std::string_view value) {
    text += fmt::format("{}={}:{}\n", name, value.size(), value);
  };
  add("key", key.canonical_json());
  add("toolchain", toolchain.fingerprint());
  for (const auto& opt : digest_compile_options(key)) add("option", opt);
  add("arch", key.arch);
  return sha256_hex(text);
}

}  // namespace swapjit

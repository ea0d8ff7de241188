// digest.hpp: the toolchain identity and the sha256 digest of a compile key (DESIGN.md "The key is typed and
// canonical"). The digest covers the canonical key JSON, the hash of every embedded kernel source, the
// toolkit identity and the digest compile options; never an install path.
#pragma once
#include <string>
#include <vector>

#include "jit/compile_key.hpp"

namespace swapjit {

struct Toolchain {
  int nvrtc_major = 0, nvrtc_minor = 0;
  std::string nvrtc_library_sha256;  // of the loaded libnvrtc file (nvrtcVersion gives only major.minor)
  int cccl_version = 0;              // CCCL_VERSION its headers report
  std::string sources_sha256;        // over every embedded kernel source (name and bytes), sorted by name
  std::string fingerprint() const;   // canonical JSON of the fields above
  // The toolkit this process uses; computed once and cached (thread-safe).
  static const Toolchain& current();
};

// Lowercase hex sha256 of bytes.
std::string sha256_hex(const void* data, size_t size);
inline std::string sha256_hex(const std::string& s) { return sha256_hex(s.data(), s.size()); }

// sha256 over every embedded kernel source (length-prefixed name and bytes, sorted by name).
std::string embedded_sources_sha256();

// The digest of `key` under `toolchain` (injectable for tests).
std::string key_digest(const CompileKey& key, const Toolchain& toolchain);
inline std::string key_digest(const CompileKey& key) { return key_digest(key, Toolchain::current()); }

}  // namespace swapjit

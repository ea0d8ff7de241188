// nvrtc_compiler.cpp: one NVRTC compile per key. The options are a fixed convention (project preamble);
// only the non-path ones enter the digest (digest_compile_options), so include directories may differ
// between the image that built a cache and the one that reads it.
#include "jit/nvrtc_compiler.hpp"

#include <fmt/format.h>
#include <nvrtc.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>

#include "jit/digest.hpp"
#include "jit/error.hpp"
#include "jit/kernel_family.hpp"
#include "jit/specializer.hpp"

#ifndef SWAPJIT_CUDA_INCLUDE_DIR
#define SWAPJIT_CUDA_INCLUDE_DIR "/usr/local/cuda/include"
#endif

namespace swapjit {
namespace {

std::string resolve_include_dir() {
  for (const char* var : {"SWAPJIT_CUDA_HOME", "CUDA_HOME"}) {
    const char* v = std::getenv(var);
    if (v && *v) return std::string(v) + "/include";
  }
  // CMake's CUDAToolkit_INCLUDE_DIRS may be a ;-list (the include dir, then its cccl/): the first is it.
  std::string dirs = SWAPJIT_CUDA_INCLUDE_DIR;
  return dirs.substr(0, dirs.find(';'));
}

// RAII for an nvrtcProgram, so every throw below destroys it.
struct Program {
  nvrtcProgram p = nullptr;
  ~Program() {
    if (p) nvrtcDestroyProgram(&p);
  }
};

void nvrtc_check(nvrtcResult r, const char* call, const CompileKey& key) {
  if (r != NVRTC_SUCCESS)
    throw Error(ErrorCode::kInternal, fmt::format("{} failed: {}", call, nvrtcGetErrorString(r)),
                key.canonical_json());
}

std::string program_log(nvrtcProgram p) {
  size_t n = 0;
  if (nvrtcGetProgramLogSize(p, &n) != NVRTC_SUCCESS || n == 0) return {};
  std::string log(n, '\0');
  if (nvrtcGetProgramLog(p, log.data()) != NVRTC_SUCCESS) return {};
  while (!log.empty() && log.back() == '\0') log.pop_back();
  return log;
}

// Keeps the failing translation unit for a human: the prelude alone says little without the key.
std::string write_failed_source(const CompileKey& key, const std::string& source) {
  std::string tag;
  try {
    tag = key_digest(key).substr(0, 8);
  } catch (const Error&) {
    tag = sha256_hex(source).substr(0, 8);
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string path = fmt::format("{}/swapjit-failed-{}.cu", (tmp && *tmp) ? tmp : "/tmp", tag);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return fmt::format("(could not write {})", path);
  out << "// swapjit: failed compile of " << key.canonical_json() << "\n" << source;
  return path;
}

// The decimal number that ends just before position `at` of `line`, skipping spaces; -1 when none.
int number_ending_at(const std::string& line, size_t at) {
  if (at == std::string::npos) return -1;
  size_t end = at;
  while (end > 0 && line[end - 1] == ' ') --end;
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
  if (begin == end) return -1;
  return std::atoi(line.substr(begin, end - begin).c_str());
}

// Number just before `unit` in `line` ("72 registers" -> 72); -1 when absent.
int number_before(const std::string& line, const std::string& unit) {
  return number_ending_at(line, line.find(unit));
}

// ptxas -v opens each entry function's report with this line; the entry's name follows, up to a quote.
constexpr std::string_view kEntryTag = "Compiling entry function '";

// The entry name of the kEntryTag found at `at` in `text`.
std::string entry_name_at(const std::string& text, size_t at) {
  const size_t b = at + kEntryTag.size(), e = text.find('\'', b);
  return text.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

}  // namespace

const std::string& cuda_include_dir() {
  static const std::string dir = resolve_include_dir();  // environment read once per process
  return dir;
}

std::vector<std::string> digest_compile_options(const CompileKey& key) {
  return {"--std=c++20",     "--gpu-architecture=" + key.arch,
          "-default-device", "--ptxas-options=-v",
          "-lineinfo",       "-DNDEBUG"};
}

ResourceUsage parse_ptxas_report(const std::string& log, const std::string& entry) {
  ResourceUsage r;
  std::istringstream in(log);
  std::string line, section;  // section: the entry function whose lines we are reading
  bool in_wanted = false, done = false, props_of_entry = false;
  while (!done && std::getline(in, line)) {
    if (size_t at = line.find(kEntryTag); at != std::string::npos) {
      if (in_wanted) break;  // the next entry's report starts: ours is complete
      section = entry_name_at(line, at);
      in_wanted = entry.empty() || section == entry;
      continue;
    }
    if (!in_wanted) continue;
    if (line.find("Function properties for ") != std::string::npos) {
      // Non-inlined callees get their own properties block; the entry's stack frame is the one we report.
      props_of_entry = line.substr(line.find("Function properties for ") + 24) == section;
      continue;
    }
    if (props_of_entry && line.find("stack frame") != std::string::npos) {
      r.stack_frame_bytes = std::max(0, number_before(line, "bytes stack frame"));
      r.spill_store_bytes = std::max(0, number_before(line, "bytes spill stores"));
      r.spill_load_bytes = std::max(0, number_before(line, "bytes spill loads"));
      props_of_entry = false;
      r.parsed = true;
      continue;
    }
    if (line.find("Used ") != std::string::npos && line.find(" registers") != std::string::npos) {
      r.registers = number_before(line, "registers");
      r.static_smem_bytes = std::max(0, number_before(line, "bytes smem"));
      // Sum every constant bank the entry uses ("360 bytes cmem[0], 8 bytes cmem[2]").
      int cmem = 0;
      for (size_t at = line.find("bytes cmem["); at != std::string::npos;
           at = line.find("bytes cmem[", at + 1))
        cmem += std::max(0, number_ending_at(line, at));
      r.constant_bytes = cmem;
      r.parsed = true;
    }
  }
  return r;
}

ResourceUsage worst_entry_report(const std::string& log, const std::string& entry) {
  ResourceUsage worst = parse_ptxas_report(log, entry);
  for (size_t at = log.find(kEntryTag); at != std::string::npos; at = log.find(kEntryTag, at + 1)) {
    const std::string other = entry_name_at(log, at);
    if (other == entry) continue;
    const ResourceUsage r = parse_ptxas_report(log, other);
    if (!r.parsed) continue;
    worst.registers = std::max(worst.registers, r.registers);
    worst.spill_store_bytes = std::max(worst.spill_store_bytes, r.spill_store_bytes);
    worst.spill_load_bytes = std::max(worst.spill_load_bytes, r.spill_load_bytes);
    worst.stack_frame_bytes = std::max(worst.stack_frame_bytes, r.stack_frame_bytes);
    worst.static_smem_bytes = std::max(worst.static_smem_bytes, r.static_smem_bytes);
    worst.constant_bytes = std::max(worst.constant_bytes, r.constant_bytes);
  }
  return worst;
}

CompiledKernel compile_source(const CompileKey& key, const std::string& source,
                              const std::string& name_expression) {
  const std::string inc = cuda_include_dir();
  std::vector<std::string> options = digest_compile_options(key);
  options.push_back("-I" + inc);
  options.push_back("-I" + inc + "/cccl");
  // NVRTC 12.9+ keeps its own compile cache (with a driver present it is on by default) and a hit there
  // returns the cubin WITHOUT ptxas's -v report: the manifest's resources and the release checks would
  // be lost. We cache cubins ourselves, so NVRTC's cache is off. Like the include paths, it does not
  // change the cubin, so it is not part of the digest's options.
  options.push_back("--no-cache");
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());

  const HeaderSet& headers = nvrtc_headers();
  const std::string file_name = fmt::format("swapjit_{}.cu", family_name(key.family));
  Program prog;
  auto t0 = std::chrono::steady_clock::now();
  nvrtc_check(nvrtcCreateProgram(&prog.p, source.c_str(), file_name.c_str(), headers.count(),
                                 headers.contents.data(), headers.names.data()),
              "nvrtcCreateProgram", key);
  nvrtc_check(nvrtcAddNameExpression(prog.p, name_expression.c_str()), "nvrtcAddNameExpression", key);
  nvrtcResult rc = nvrtcCompileProgram(prog.p, static_cast<int>(argv.size()), argv.data());
  CompiledKernel out;
  out.log = program_log(prog.p);
  if (rc != NVRTC_SUCCESS) {
    std::string path = write_failed_source(key, source);
    throw Error(ErrorCode::kCompileFailed,
                fmt::format("NVRTC failed ({}) for {}; source kept at {}", nvrtcGetErrorString(rc),
                            key.describe(), path),
                key.canonical_json(), out.log);
  }
  const char* lowered = nullptr;
  if (nvrtcGetLoweredName(prog.p, name_expression.c_str(), &lowered) != NVRTC_SUCCESS || !lowered) {
    std::string path = write_failed_source(key, source);
    throw Error(ErrorCode::kCompileFailed,
                fmt::format("entry point {} not found in the compiled program; source kept at {}",
                            name_expression, path),
                key.canonical_json(), out.log);
  }
  out.lowered_name = lowered;
  size_t size = 0;
  nvrtc_check(nvrtcGetCUBINSize(prog.p, &size), "nvrtcGetCUBINSize", key);
  if (size == 0)
    throw Error(ErrorCode::kCompileFailed, fmt::format("NVRTC produced no cubin for arch {}", key.arch),
                key.canonical_json(), out.log);
  out.cubin.resize(size);
  nvrtc_check(nvrtcGetCUBIN(prog.p, out.cubin.data()), "nvrtcGetCUBIN", key);
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out.resources = worst_entry_report(out.log, out.lowered_name);
  return out;
}

CompiledKernel compile_key(const CompileKey& key) {
  key.validate();
  const FamilyInfo& info = family_info(key.family);
  if (!has_embedded_source(info.source_file))
    throw Error(ErrorCode::kUnsupported,
                fmt::format("kernels_src/{} is not part of this build: family {} cannot compile",
                            info.source_file, info.name),
                key.canonical_json());
  return compile_source(key, render_source(key), info.entry_expression);
}

}  // namespace swapjit

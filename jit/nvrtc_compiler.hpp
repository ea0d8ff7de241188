// nvrtc_compiler.hpp: compiles a specialised source with NVRTC into a cubin, keeping the log, the lowered
// entry name, the compile time and ptxas's resource report (from -Xptxas=-v, the only place NVRTC gives it).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "jit/compile_key.hpp"

namespace swapjit {

struct ResourceUsage {
  int registers = -1;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
  int stack_frame_bytes = 0;
  int static_smem_bytes = 0;
  int constant_bytes = 0;
  bool parsed = false;  // false when the log held no ptxas report
};

struct CompiledKernel {
  std::vector<char> cubin;
  std::string lowered_name;  // mangled entry point, from nvrtcGetLoweredName
  std::string log;           // the full NVRTC / ptxas log
  double compile_ms = 0;
  ResourceUsage resources;  // worst_entry_report: the worst of the module's entry points
};

// Compile options that enter the digest (no include directories: install paths never enter it).
std::vector<std::string> digest_compile_options(const CompileKey& key);

// Compiles `key`. Throws Error(kCompileFailed) with the key, the log and the path of the rendered source
// (written under $TMPDIR for inspection) when NVRTC fails.
CompiledKernel compile_key(const CompileKey& key);

// Compiles a complete translation unit (already rendered; no prelude is added) through the same path as
// compile_key(): same options, the embedded kernels_src/ headers, `name_expression` registered and lowered.
// Tests use it to push a small kernel (or a broken one) through the real pipeline.
CompiledKernel compile_source(const CompileKey& key, const std::string& source,
                              const std::string& name_expression);

// The CUDA include directory NVRTC compiles against: $SWAPJIT_CUDA_HOME/include, else $CUDA_HOME/include,
// else the toolkit the library was built with. Read once per process. Its cccl/ subfolder is on the path too.
const std::string& cuda_include_dir();

// Parses the ptxas -v lines of an NVRTC log: the section of entry function `entry` (a mangled name), or the
// first entry function when `entry` is empty.
ResourceUsage parse_ptxas_report(const std::string& log, const std::string& entry = {});
// The report of `entry` with every other entry function of the log folded in, field by field the worst (most
// registers, spills, stack, static smem): a module whose tilings are separate entries (swapab_decode) is held to
// the release rules in each of them. CompiledKernel::resources is this.
ResourceUsage worst_entry_report(const std::string& log, const std::string& entry);

}  // namespace swapjit

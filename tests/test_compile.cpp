// test_compile.cpp: NVRTC end to end on the CPU machine (no GPU needed to compile): the prelude text, a
// small kernel through the real path (embedded headers, options, name expression, ptxas report), broken
// sources and options, and every family that exists for a small preset set.
#include <fstream>
#include <string>

#include "jit/error.hpp"
#include "jit/kernel_family.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "jit/presets.hpp"
#include "jit/specializer.hpp"
#include "tests/catch.hpp"
#include "tests/sample_keys.hpp"

using namespace swapjit;

namespace {

PresetOptions opts(const char* preset, std::vector<int> tp, const char* kv = "", const char* arch = "sm_90a") {
  return testing::preset_options(preset, std::move(tp), kv, arch);
}

CompileKey insert_key() { return make_kv_insert_key("sm_90a", kFormatV41Fp8, 64); }

// A tiny kernel that uses the embedded headers the way the real ones do.
const char* kProbeSource = R"(#include "key_shape.cuh"
#include "kernel_params.cuh"
namespace swapjit {
__global__ void probe_kernel(const __grid_constant__ InsertParams p) {
  __shared__ float tile[128];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x & 127] = static_cast<float>(p.rows[i % 512]) * record_bytes(kFormatV41Fp8);
  __syncthreads();
  if (i < p.num_rows) const_cast<u8*>(p.cache.base)[i] = static_cast<u8>(tile[(threadIdx.x + 1) & 127]);
}
}  // namespace swapjit
)";

}  // namespace

TEST_CASE("the prelude is rendered exactly", "[jit]") {
  CompileKey k = testing::sample_swapab_key(16, kFormatV41Fp8, kFormatV41Fp4, 128);
  CHECK(render_source(k) ==
        "#include \"key_shape.cuh\"\n"
        "#include \"kernel_params.cuh\"\n"
        "namespace swapjit { constexpr KeyShape kKey{16, 128, 512, 1, 2, 64, 128, 2, 1}; "
        "constexpr int kVariant = 1; }\n"
        "#include \"swapab_decode.cuh\"\n");
  const HeaderSet& h = nvrtc_headers();
  CHECK(h.count() >= 2);
  CHECK(has_embedded_source("key_shape.cuh"));
  CHECK(has_embedded_source("kernel_params.cuh"));
  CHECK_FALSE(has_embedded_source("no_such_file.cuh"));
}

TEST_CASE("parse_ptxas_report reads the entry function's section", "[jit]") {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function '_ZN7swapjit5otherEv' for 'sm_90a'\n"
      "ptxas info    : Function properties for _ZN7swapjit5otherEv\n"
      "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 0 barriers, 16 bytes smem, 360 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function '_ZN7swapjit6targetEv' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z6calleev\n"
      "ptxas         .     96 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Function properties for _ZN7swapjit6targetEv\n"
      "ptxas         .     0 bytes stack frame, 12 bytes spill stores, 20 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 1 barriers, 1024 bytes smem, 528 bytes cmem[0], 8 bytes "
      "cmem[2]\n"
      "ptxas info    : Compile time = 22.352 ms\n";
  ResourceUsage r = parse_ptxas_report(log, "_ZN7swapjit6targetEv");
  CHECK(r.parsed);
  CHECK(r.registers == 168);
  CHECK(r.stack_frame_bytes == 0);
  CHECK(r.spill_store_bytes == 12);
  CHECK(r.spill_load_bytes == 20);
  CHECK(r.static_smem_bytes == 1024);
  CHECK(r.constant_bytes == 536);
  ResourceUsage first = parse_ptxas_report(log);
  CHECK(first.registers == 40);
  CHECK(first.stack_frame_bytes == 8);
  CHECK(first.constant_bytes == 360);
  CHECK_FALSE(parse_ptxas_report(log, "_Z7missingv").parsed);
  CHECK_FALSE(parse_ptxas_report("").parsed);
}

TEST_CASE("worst_entry_report holds every entry of a module to the rules", "[jit]") {
  // Two entries (a key's tilings): the other one spills and has the stack frame, the named one more registers.
  const std::string log =
      "ptxas info    : Compiling entry function 'swapjit_swapab_decode_kernel_wide' for 'sm_90a'\n"
      "ptxas info    : Function properties for swapjit_swapab_decode_kernel_wide\n"
      "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 100 registers, used 1 barriers, 32 bytes smem, 360 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function '_ZN7swapjit6targetEv' for 'sm_90a'\n"
      "ptxas info    : Function properties for _ZN7swapjit6targetEv\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 128 registers, used 1 barriers, 16 bytes smem, 400 bytes cmem[0]\n";
  const ResourceUsage own = parse_ptxas_report(log, "_ZN7swapjit6targetEv");
  CHECK(own.spill_store_bytes == 0);
  const ResourceUsage w = worst_entry_report(log, "_ZN7swapjit6targetEv");
  CHECK(w.parsed);
  CHECK(w.registers == 128);
  CHECK(w.stack_frame_bytes == 16);
  CHECK(w.spill_store_bytes == 8);
  CHECK(w.spill_load_bytes == 4);
  CHECK(w.static_smem_bytes == 32);
  CHECK(w.constant_bytes == 400);
  // One entry alone: the same as its own report.
  const std::string one = log.substr(log.find("ptxas info    : Compiling entry function '_ZN7"));
  CHECK(worst_entry_report(one, "_ZN7swapjit6targetEv").spill_store_bytes == 0);
  CHECK(worst_entry_report(one, "_ZN7swapjit6targetEv").registers == 128);
}

TEST_CASE("a small kernel goes through the real NVRTC path", "[jit][nvrtc]") {
  CompiledKernel ck = compile_source(insert_key(), kProbeSource, "&swapjit::probe_kernel");
  CHECK(ck.cubin.size() > 4);
  CHECK(std::string(ck.cubin.data(), 4) ==
        "\x7f"
        "ELF");
  CHECK(ck.lowered_name.rfind("_ZN7swapjit12probe_kernel", 0) == 0);
  CHECK(ck.compile_ms > 0);
  CHECK(ck.log.find("Compiling entry function") != std::string::npos);
  INFO(ck.log);
  CHECK(ck.resources.parsed);
  CHECK(ck.resources.registers > 0);
  CHECK(ck.resources.static_smem_bytes == 512);
  CHECK(ck.resources.spill_store_bytes == 0);
  CHECK(ck.resources.stack_frame_bytes == 0);
}

TEST_CASE("a broken source or option gives kCompileFailed with the log", "[jit][nvrtc]") {
  try {
    compile_source(insert_key(), std::string(kProbeSource) + "\nint broken = undefined_name;\n",
                   "&swapjit::probe_kernel");
    FAIL("a broken source compiled");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kCompileFailed);
    CHECK(e.log().find("undefined_name") != std::string::npos);
    CHECK(e.key_json() == insert_key().canonical_json());
    // The message names the kept source file; it must hold the broken line.
    std::string what = e.what();
    size_t at = what.find("source kept at ");
    REQUIRE(at != std::string::npos);
    std::string path = what.substr(at + 15, what.find_first_of(" \n", at + 15) - (at + 15));
    std::ifstream kept(path);
    std::string text((std::istreambuf_iterator<char>(kept)), std::istreambuf_iterator<char>());
    CHECK(text.find("undefined_name") != std::string::npos);
  }
  CompileKey bad_arch = insert_key();
  bad_arch.arch = "sm_999";  // NVRTC rejects the option itself
  try {
    compile_source(bad_arch, kProbeSource, "&swapjit::probe_kernel");
    FAIL("an impossible arch compiled");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kCompileFailed);
  }
  // A name expression that names nothing is a failure too, never a silent empty entry point.
  CHECK_THROWS_AS(compile_source(insert_key(), kProbeSource, "&swapjit::no_such_kernel"), Error);
}

TEST_CASE("every family that exists compiles for sm_90a within budget", "[jit][nvrtc][kernels]") {
  auto keys = preset_keys(opts("v4.1-flash", {4}, "v41_fp8+v41_fp4"));
  int compiled = 0;
  for (const auto& k : keys) {
    if (!has_embedded_source(family_info(k.family).source_file)) {
      WARN("skipping " << k.describe() << ": " << family_info(k.family).source_file << " not in this build");
      continue;
    }
    INFO(k.describe());
    CompiledKernel ck;
    try {
      ck = compile_key(k);
    } catch (const Error& e) {
      FAIL(e.what());
    }
    ++compiled;
    INFO(ck.log);
    CHECK(ck.resources.parsed);
    CHECK(ck.resources.spill_store_bytes == 0);
    CHECK(ck.resources.spill_load_bytes == 0);
    CHECK(ck.resources.stack_frame_bytes == 0);
    LaunchPlan plan = launch_plan(k);
    CHECK(ck.resources.static_smem_bytes + plan.smem_bytes <= 227 * 1024);
  }
  // kv_insert.cuh ships with the tree; if no family compiled, this test proved nothing.
  CHECK(compiled > 0);
}

TEST_CASE("compile_key refuses a family whose source is not in this build", "[jit]") {
  for (Family f : {Family::kSwapabDecode, Family::kHeadpadDecode, Family::kKvInsert}) {
    if (has_embedded_source(family_info(f).source_file)) continue;
    CompileKey k = insert_key();
    if (f != Family::kKvInsert) k = preset_keys(opts("v4-flash", {4})).front();
    k.family = f;
    try {
      compile_key(k);
      FAIL("compiled a family without a source");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kUnsupported);
    }
  }
}

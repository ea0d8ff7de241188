// compile_checks.hpp: compiles one key through NVRTC and holds ptxas's report to the release rules (no
// spills, no local memory, registers within the cap, shared memory within the opt-in limit). Shared by
// the kernel-family compile tests.
#pragma once
#include "jit/error.hpp"
#include "jit/kernel_family.hpp"
#include "jit/nvrtc_compiler.hpp"
#include "tests/catch.hpp"

namespace swapjit::testing {

constexpr int kSmemOptinLimit = 232448;  // H200 sharedMemPerBlockOptin (HOPPER_NOTES §7)

inline CompiledKernel compile_clean(const CompileKey& k) {
  INFO(k.describe() << "\n" << k.canonical_json());
  CompiledKernel ck;
  try {
    ck = compile_key(k);
  } catch (const Error& e) {
    FAIL(e.what());
  }
  INFO(ck.log);
  CHECK(!ck.cubin.empty());
  CHECK(!ck.lowered_name.empty());
  REQUIRE(ck.resources.parsed);
  CHECK(ck.resources.spill_store_bytes == 0);
  CHECK(ck.resources.spill_load_bytes == 0);
  CHECK(ck.resources.stack_frame_bytes == 0);
  CHECK(ck.resources.registers > 0);
  // ptxas serialises wgmmas it cannot keep asynchronous (registers, divergence, calls): a large slowdown.
  CHECK(ck.log.find("Potential Performance Loss") == std::string::npos);
  CHECK(ck.resources.registers <= 255);  // the per-thread cap
  // One CTA per SM: its threads share the 64K-register file (ptxas caps by __launch_bounds__).
  CHECK(ck.resources.registers * launch_plan(k).threads <= 65536);
  CHECK(ck.resources.static_smem_bytes + launch_plan(k).smem_bytes <= kSmemOptinLimit);
  return ck;
}

}  // namespace swapjit::testing

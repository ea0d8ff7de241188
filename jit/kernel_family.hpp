// kernel_family.hpp: what each kernel family is (source file, entry point, which keys exist) and what a
// launch of one key needs. The launch numbers come from the family's traits header in kernels_src/,
// compiled into the host too, so they are never written twice.
#pragma once
#include <string>

#include "jit/compile_key.hpp"

namespace swapjit {

struct FamilyInfo {
  Family family;
  const char* name;              // "swapab_decode"
  const char* source_file;       // the embedded source the prelude includes, e.g. "swapab_decode.cuh"
  const char* entry_expression;  // NVRTC name expression of the __global__ entry point
};

const FamilyInfo& family_info(Family f);

// The launch plan of a key (block threads, CTAs per token or row, cluster size, dynamic shared memory).
LaunchPlan launch_plan(const CompileKey& key);

// Variant names that exist for a family on an arch ("wgmma" needs sm_90a; "mma" runs on any sm_90+).
std::vector<std::string> variants_for(Family f, const std::string& arch);

}  // namespace swapjit

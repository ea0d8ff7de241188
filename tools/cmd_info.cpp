// cmd_info.cpp: `swapjit info`: versions, the driver and GPUs if any, and the cache roots.
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "cache/disk_cache.hpp"
#include "jit/digest.hpp"
#include "runtime/device_info.hpp"
#include "runtime/driver.hpp"
#include "tools/commands.hpp"

namespace swapjit::cli {
namespace {

void print_driver() {
  if (!has_driver()) {
    std::printf("driver:      not available (%s): compile and cache work, launches do not\n",
                no_driver_reason().c_str());
    return;
  }
  try {
    const DriverApi& api = driver();
    int count = 0;
    SWAPJIT_CU(api.cuDeviceGetCount(&count));
    std::printf("driver:      libcuda.so.1 loaded, CUDA driver %d.%d, %d GPU(s)\n", api.driver_version / 1000,
                (api.driver_version % 1000) / 10, count);
    for (int i = 0; i < count; ++i) {
      DeviceInfo d = query_device(i);
      std::printf("  gpu %d:     %s, sm_%d%d -> keys for %s, %d SMs, %d KiB smem/block opt-in\n", i,
                  d.name.c_str(), d.cc_major, d.cc_minor, d.arch.c_str(), d.sm_count,
                  d.max_smem_per_block_optin / 1024);
    }
  } catch (const std::exception& e) {
    std::printf("driver:      error: %s\n", e.what());
  }
}

void run_info(const std::vector<std::string>& dirs) {
  std::printf("swapjit:     %s\n", cache::library_version());
  const Toolchain& tc = Toolchain::current();
  std::printf("nvrtc:       %d.%d (library sha256 %.16s..., CCCL %d)\n", tc.nvrtc_major, tc.nvrtc_minor,
              tc.nvrtc_library_sha256.c_str(), tc.cccl_version);
  std::printf("sources:     sha256 %.16s...\n", tc.sources_sha256.c_str());
  print_driver();
  cache::DiskCache disk(resolve_roots(dirs));
  auto entries = disk.list();
  for (size_t i = 0; i < disk.roots().size(); ++i) {
    const std::string& root = disk.roots()[i];
    int n = 0, bad = 0;
    for (const auto& e : entries)
      if (e.root == root) {
        ++n;
        bad += e.ok ? 0 : 1;
      }
    bool exists = std::filesystem::exists(root);
    std::printf("cache root:  %s (%s)%s: %d entries%s, %s\n", root.c_str(), i == 0 ? "writable" : "read-only",
                exists ? "" : " [does not exist yet]", n, bad ? fmt::format(" ({} BAD)", bad).c_str() : "",
                human_bytes(cache::tree_bytes(root + "/" + cache::kLayoutVersion)).c_str());
  }
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto dirs = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand("info", "versions, driver and GPUs, cache roots with sizes and entry counts");
  add_cache_dir_option(cmd, dirs.get());
  cmd->callback([dirs]() { run_info(*dirs); });
}

}  // namespace swapjit::cli

// main.cpp: the smallest user of an installed swapjit: a Service, one layer (V4.1-Flash at TP4), its keys,
// the kernel each step size gets, and warmup (which, without a GPU driver, compiles and then says so).
#include <cstdio>
#include <exception>

#include "swapjit/decode_attention.hpp"
#include "swapjit/swapjit_c.h"

int main() {
  try {
    swapjit::Service service;
    swapjit::LayerConfig config;
    config.live_heads = 16;
    config.swa_format = swapjit::kFormatV41Fp8;
    config.comp_format = swapjit::kFormatV41Fp4;
    swapjit::DecodeAttention layer(service, config);
    std::printf("swapjit %s, arch %s, driver: %s\n", swapjit_version(), service.arch().c_str(),
                service.has_driver() ? "yes" : "no");
    for (const auto& key : layer.keys()) std::printf("key %s\n", key.describe().c_str());
    for (int tokens : {1, 16, 17})
      std::printf("%d token(s): %s\n", tokens,
                  layer.choose(tokens, config.window) == swapjit::KernelChoice::kSwapab ? "swapab" : "headpad");
    service.warmup();
    std::printf("warmup: %zu key(s) loaded\n", layer.keys().size());
    return 0;
  } catch (const swapjit::Error& e) {
    std::printf("warmup reports: %s\n", e.what());
    return e.code() == swapjit::ErrorCode::kNoDriver ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}

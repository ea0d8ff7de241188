// prmt_host.hpp: PTX prmt.b32 (default mode) on the host, for the tests that replay the kernels' byte permutes
// from their own selector constants (test_e2m1_prmt.cpp, test_export_pack24.cpp).
#pragma once
#include <cstdint>

namespace swapjit::test {

// Byte i of the result is byte (sel >> 4i) & 7 of {b, a} (a = bytes 0..3); with bit 3 of the nibble set, that
// byte's sign bit replicated.
inline uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  const uint64_t src = (uint64_t(b) << 32) | a;
  uint32_t d = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t nib = (sel >> (4 * i)) & 0xF;
    uint32_t byte = uint32_t(src >> (8 * (nib & 7))) & 0xFF;
    if (nib & 8) byte = (byte & 0x80) ? 0xFF : 0x00;
    d |= byte << (8 * i);
  }
  return d;
}

}  // namespace swapjit::test

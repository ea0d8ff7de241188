// paged_cache.hpp: a host copy of one paged KV cache (SPEC.md §2.1) with the writer of §2.3 and the exact
// decoder of §2.2 for each record format.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels_src/key_shape.cuh"

namespace swapjit::ref {

struct PagedCache {
  int format = kFormatNone;  // RecordFormatId
  int page = 64;             // P, slots per page
  int64_t page_stride = 0;   // bytes, >= P * (D + S), multiple of 16
  int pages = 0;
  std::vector<uint8_t> bytes;  // pages * page_stride

  // REQUIRES: page_stride >= page * record_bytes(format) and page_stride % 16 == 0 (throws otherwise).
  static PagedCache make(int format, int page, int pages, int64_t extra_page_bytes = 0);
  int64_t slots() const { return int64_t(pages) * page; }
  // Byte offsets of a slot's data row and scale row within `bytes`. Throws on a slot outside [0, slots()).
  int64_t data_offset(int64_t slot) const;
  int64_t scale_offset(int64_t slot) const;
  // Encodes one 512-dim row (values already bf16-representable floats) into a slot (SPEC.md §2.3).
  void write_row(int64_t slot, const float* row512);
  // Decodes a slot exactly (every format decodes exactly to bf16; returned as float).
  void read_row(int64_t slot, float* out512) const;
};

// Encode / decode of one record, independent of pages: data is D bytes, scale is S bytes.
void encode_record(int format, const float* row512, uint8_t* data, uint8_t* scale);
void decode_record(int format, const uint8_t* data, const uint8_t* scale, float* out512);

// Byte comparison of two records that skips what SPEC.md §2.3 leaves unspecified (the data bytes of a
// tile whose scale is NaN). For checking the kv_insert kernel against encode_record. `why` (optional)
// receives the first difference.
bool records_equal(int format, const uint8_t* data_a, const uint8_t* scale_a, const uint8_t* data_b,
                   const uint8_t* scale_b, std::string* why = nullptr);

}  // namespace swapjit::ref

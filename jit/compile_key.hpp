// compile_key.hpp: the typed compile key of SPEC.md §6. Every field that changes generated code, and
// nothing else. Its canonical JSON (sorted keys, no whitespace) is stable across versions and is what the
// digest hashes (jit/digest.hpp).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kernels_src/key_shape.cuh"

namespace swapjit {

enum class Family { kSwapabDecode, kHeadpadDecode, kKvInsert };

struct CompileKey {
  Family family = Family::kSwapabDecode;
  std::string variant;            // "wgmma" | "mma" (decode families), "simt" (kv_insert)
  std::string arch;               // "sm_90a", "sm_100a"
  int live_heads = 0;             // decode: 8, 16, 32, 64, 128; kv_insert: 0
  int window = 0;                 // SWA list width; kv_insert: 0
  int topk = 0;                   // compressed list width, 0 = SWA-only; kv_insert: 0
  int swa_format = kFormatNone;   // RecordFormatId; for kv_insert: the format it writes
  int comp_format = kFormatNone;  // kFormatNone on SWA-only layers and for kv_insert
  int swa_page = 0;               // for kv_insert: the page size it writes
  int comp_page = 0;
  int q_layout = kQLayoutNone;  // kQLayoutNone for kv_insert
  int out_layout = kOutNone;    // kOutNone for kv_insert

  KeyShape shape() const;
  // Canonical JSON text: sorted keys, enum fields by name, no whitespace. Byte-stable.
  std::string canonical_json() const;
  nlohmann::json to_json() const;
  // Throws Error(kInvalidArgument) naming the field on an unknown or missing field, a wrong type or an
  // out-of-range value (heads, page size not a power of two, unknown format...).
  static CompileKey from_json(const nlohmann::json& j);
  static CompileKey parse(std::string_view json_text);
  // Throws Error(kInvalidArgument) naming the field when the key is inconsistent for its family.
  void validate() const;
  // Short human name, e.g. "swapab_decode/wgmma sm_90a h16 w128 k512 v41_fp8/v41_fp4 p64/64 chunk16->mxfp8".
  std::string describe() const;

  bool operator==(const CompileKey&) const = default;
};

const char* family_name(Family f);
const char* format_name(int record_format_id);
const char* q_layout_name(int q_layout_id);
const char* out_layout_name(int out_layout_id);
// Parsers throw Error(kInvalidArgument) naming `field` on an unknown value.
Family parse_family(std::string_view s, std::string_view field = "family");
int parse_format(std::string_view s, std::string_view field);
int parse_q_layout(std::string_view s, std::string_view field = "q_layout");
int parse_out_layout(std::string_view s, std::string_view field = "out_layout");
// Variant names <-> VariantId ("wgmma", "mma", "simt"); the prelude renders the id.
const char* variant_name(int variant_id);
int parse_variant(std::string_view s, std::string_view field = "variant");
// "sm_90a" -> 90, "sm_100a" -> 100; -1 when `arch` is not of the form sm_<digits>[a|f].
int arch_sm(std::string_view arch);

// Reads a key file: a JSON object (one key) or an array of keys. Errors name the file and the index.
std::vector<CompileKey> read_key_file(const std::string& path);

}  // namespace swapjit

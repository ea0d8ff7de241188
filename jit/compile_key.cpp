// compile_key.cpp: canonical JSON of a compile key, strict parsing and per-family validation (SPEC.md §6).
// The canonical form is what the digest hashes, so it must never depend on the input's field order or
// spacing: nlohmann::json objects are std::map-backed (sorted keys) and dump() without indent emits no
// whitespace.
#include "jit/compile_key.hpp"

#include <fmt/format.h>

#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "jit/error.hpp"
#include "jit/kernel_family.hpp"

namespace swapjit {
namespace {

[[noreturn]] void bad(const std::string& what, const std::string& key_json = {}) {
  throw Error(ErrorCode::kInvalidArgument, what, key_json);
}

constexpr std::array<const char*, 12> kFields = {"arch",       "comp_format", "comp_page", "family",
                                                 "live_heads", "out_layout",  "q_layout",  "swa_format",
                                                 "swa_page",   "topk",        "variant",   "window"};

bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

const nlohmann::json& field(const nlohmann::json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) bad(fmt::format("compile key: missing field \"{}\"", name));
  return *it;
}

std::string get_string(const nlohmann::json& j, const char* name) {
  const auto& v = field(j, name);
  if (!v.is_string())
    bad(fmt::format("compile key field \"{}\": expected a string, got {} ({})", name, v.type_name(),
                    v.dump()));
  return v.get<std::string>();
}

// Integers only: 16.0, true and "16" are rejected, so a key file cannot silently mean something else.
int get_int(const nlohmann::json& j, const char* name, int lo, int hi) {
  const auto& v = field(j, name);
  if (!v.is_number_integer())
    bad(fmt::format("compile key field \"{}\": expected an integer, got {} ({})", name, v.type_name(),
                    v.dump()));
  long long x =
      v.is_number_unsigned()
          ? static_cast<long long>(std::min<unsigned long long>(v.get<unsigned long long>(), 1ull << 40))
          : v.get<long long>();
  if (x < lo || x > hi)
    bad(fmt::format("compile key field \"{}\": {} is out of range [{}, {}]", name, x, lo, hi));
  return static_cast<int>(x);
}

int get_page(const nlohmann::json& j, const char* name) {
  int p = get_int(j, name, 0, 1024);
  if (p != 0 && !is_pow2(p))
    bad(fmt::format("compile key field \"{}\": {} is not a power of two (or 0 for none)", name, p));
  return p;
}

// "sm_90a" -> 90, "sm_100a" -> 100; -1 when malformed. Suffix: none, 'a' (arch-specific) or 'f'.
int arch_number(std::string_view arch) {
  if (arch.size() < 5 || arch.substr(0, 3) != "sm_") return -1;
  std::string_view rest = arch.substr(3);
  if (rest.back() == 'a' || rest.back() == 'f') rest.remove_suffix(1);
  if (rest.empty() || rest.size() > 3) return -1;
  int n = 0;
  for (char c : rest) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

}  // namespace

const char* family_name(Family f) {
  switch (f) {
    case Family::kSwapabDecode:
      return "swapab_decode";
    case Family::kHeadpadDecode:
      return "headpad_decode";
    case Family::kKvInsert:
      return "kv_insert";
  }
  return "unknown";
}

const char* format_name(int id) {
  switch (id) {
    case kFormatNone:
      return "none";
    case kFormatV41Fp8:
      return "v41_fp8";
    case kFormatV41Fp4:
      return "v41_fp4";
    case kFormatV4Fp8:
      return "v4_fp8";
  }
  return "unknown";
}

const char* q_layout_name(int id) {
  switch (id) {
    case kQLayoutNone:
      return "none";
    case kQLayoutPlain:
      return "plain";
    case kQLayoutChunk16:
      return "chunk16";
  }
  return "unknown";
}

const char* out_layout_name(int id) {
  switch (id) {
    case kOutNone:
      return "none";
    case kOutMxfp8Ofused:
      return "mxfp8_ofused";
    case kOutBf16:
      return "bf16";
  }
  return "unknown";
}

const char* variant_name(int id) {
  switch (id) {
    case kVariantWgmma:
      return "wgmma";
    case kVariantMma:
      return "mma";
    case kVariantSimt:
      return "simt";
  }
  return "unknown";
}

Family parse_family(std::string_view s, std::string_view field_name) {
  for (Family f : {Family::kSwapabDecode, Family::kHeadpadDecode, Family::kKvInsert})
    if (s == family_name(f)) return f;
  bad(fmt::format(
      "compile key field \"{}\": unknown family \"{}\" (swapab_decode, headpad_decode, kv_insert)",
      field_name, s));
}

int parse_format(std::string_view s, std::string_view field_name) {
  for (int id : {kFormatNone, kFormatV41Fp8, kFormatV41Fp4, kFormatV4Fp8})
    if (s == format_name(id)) return id;
  bad(fmt::format("compile key field \"{}\": unknown record format \"{}\" (v41_fp8, v41_fp4, v4_fp8, none)",
                  field_name, s));
}

int parse_q_layout(std::string_view s, std::string_view field_name) {
  for (int id : {kQLayoutNone, kQLayoutPlain, kQLayoutChunk16})
    if (s == q_layout_name(id)) return id;
  bad(fmt::format("compile key field \"{}\": unknown q layout \"{}\" (plain, chunk16, none)", field_name, s));
}

int parse_out_layout(std::string_view s, std::string_view field_name) {
  for (int id : {kOutNone, kOutMxfp8Ofused, kOutBf16})
    if (s == out_layout_name(id)) return id;
  bad(fmt::format("compile key field \"{}\": unknown out layout \"{}\" (mxfp8_ofused, bf16, none)",
                  field_name, s));
}

int parse_variant(std::string_view s, std::string_view field_name) {
  for (int id : {kVariantWgmma, kVariantMma, kVariantSimt})
    if (s == variant_name(id)) return id;
  bad(fmt::format("compile key field \"{}\": unknown variant \"{}\" (wgmma, mma, simt)", field_name, s));
}

int arch_sm(std::string_view arch) { return arch_number(arch); }

KeyShape CompileKey::shape() const {
  return KeyShape{live_heads, window,    topk,     swa_format, comp_format,
                  swa_page,   comp_page, q_layout, out_layout};
}

nlohmann::json CompileKey::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  j["family"] = family_name(family);
  j["variant"] = variant;
  j["arch"] = arch;
  j["live_heads"] = live_heads;
  j["window"] = window;
  j["topk"] = topk;
  j["swa_format"] = format_name(swa_format);
  j["comp_format"] = format_name(comp_format);
  j["swa_page"] = swa_page;
  j["comp_page"] = comp_page;
  j["q_layout"] = q_layout_name(q_layout);
  j["out_layout"] = out_layout_name(out_layout);
  return j;
}

std::string CompileKey::canonical_json() const { return to_json().dump(); }

CompileKey CompileKey::from_json(const nlohmann::json& j) {
  if (!j.is_object()) bad(fmt::format("compile key: expected a JSON object, got {}", j.type_name()));
  for (const auto& [name, value] : j.items()) {
    bool known = false;
    for (const char* f : kFields) known = known || name == f;
    if (!known) bad(fmt::format("compile key: unknown field \"{}\"", name));
  }
  CompileKey k;
  k.family = parse_family(get_string(j, "family"), "family");
  k.variant = get_string(j, "variant");
  parse_variant(k.variant, "variant");  // name check only; validate() checks it against the family
  k.arch = get_string(j, "arch");
  if (arch_number(k.arch) < 0)
    bad(fmt::format("compile key field \"arch\": \"{}\" is not an arch name like sm_90a", k.arch));
  k.live_heads = get_int(j, "live_heads", 0, 128);
  k.window = get_int(j, "window", 0, 1024);
  k.topk = get_int(j, "topk", 0, 2048);
  k.swa_format = parse_format(get_string(j, "swa_format"), "swa_format");
  k.comp_format = parse_format(get_string(j, "comp_format"), "comp_format");
  k.swa_page = get_page(j, "swa_page");
  k.comp_page = get_page(j, "comp_page");
  k.q_layout = parse_q_layout(get_string(j, "q_layout"), "q_layout");
  k.out_layout = parse_out_layout(get_string(j, "out_layout"), "out_layout");
  k.validate();
  return k;
}

CompileKey CompileKey::parse(std::string_view text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    bad(fmt::format("compile key: malformed JSON: {}", e.what()));
  }
  return from_json(j);
}

void CompileKey::validate() const {
  const std::string kj = canonical_json();
  auto fail = [&](const char* name, const std::string& why) {
    bad(fmt::format("compile key field \"{}\": {} for family {}", name, why, family_name(family)), kj);
  };
  const int sm = arch_number(arch);
  if (sm < 0) fail("arch", fmt::format("\"{}\" is not an arch name like sm_90a", arch));
  int vid = kVariantMma;
  try {
    vid = parse_variant(variant, "variant");
  } catch (const Error&) {
    fail("variant", fmt::format("unknown variant \"{}\"", variant));
  }
  if (family == Family::kKvInsert) {
    if (vid != kVariantSimt) fail("variant", "must be \"simt\"");
    if (live_heads != 0) fail("live_heads", "must be 0");
    if (window != 0) fail("window", "must be 0");
    if (topk != 0) fail("topk", "must be 0");
    if (swa_format == kFormatNone) fail("swa_format", "must name the format written (not none)");
    // Page 1 is legal: V4 ratio-128 compressed caches are viewed in pages of 128/128 = 1 slot.
    if (!is_pow2(swa_page) || swa_page > 1024) fail("swa_page", "must be a power of two in 1..1024");
    if (comp_format != kFormatNone) fail("comp_format", "must be none");
    if (comp_page != 0) fail("comp_page", "must be 0");
    if (q_layout != kQLayoutNone) fail("q_layout", "must be none");
    if (out_layout != kOutNone) fail("out_layout", "must be none");
    return;
  }
  // Decode families: clusters, DSMEM and PDL need sm_90 or newer; wgmma exists only on sm_90a.
  if (sm < 90) fail("arch", fmt::format("\"{}\" is older than sm_90", arch));
  if (vid == kVariantSimt) fail("variant", "\"simt\" is not a decode variant");
  if (vid == kVariantWgmma && arch != "sm_90a") fail("variant", "\"wgmma\" needs arch sm_90a");
  if (live_heads != 8 && live_heads != 16 && live_heads != 32 && live_heads != 64 && live_heads != 128)
    fail("live_heads", fmt::format("{} is not one of 8, 16, 32, 64, 128", live_heads));
  if (window < 1 || window > 1024) fail("window", fmt::format("{} is not in 1..1024", window));
  if (topk < 0 || topk > 2048) fail("topk", fmt::format("{} is not 0 or in 1..2048", topk));
  if (swa_format == kFormatNone) fail("swa_format", "must not be none");
  if (!is_pow2(swa_page) || swa_page < 16 || swa_page > 1024)
    fail("swa_page", fmt::format("{} is not a power of two in 16..1024", swa_page));
  if (topk == 0) {
    if (comp_format != kFormatNone) fail("comp_format", "must be none on an SWA-only key (topk 0)");
    if (comp_page != 0) fail("comp_page", "must be 0 on an SWA-only key (topk 0)");
  } else {
    if (comp_format == kFormatNone) fail("comp_format", "must not be none when topk > 0");
    // 1..1024: compressed caches are viewed in pages of 128/ratio slots, 1 for ratio 128 (SPEC §1).
    if (!is_pow2(comp_page) || comp_page > 1024)
      fail("comp_page", fmt::format("{} is not a power of two in 1..1024", comp_page));
  }
  if (q_layout == kQLayoutNone) fail("q_layout", "must not be none");
  if (out_layout == kOutNone) fail("out_layout", "must not be none");
  if (family == Family::kSwapabDecode) {
    if (!swapab_heads_supported(live_heads))
      fail("live_heads", fmt::format("{} is not one of 8, 16, 32", live_heads));
    // SPEC §5: one CTA per 64 SWA slots or 128 compressed slots, all in one portable cluster.
    if (swapab_tiles(window, topk) > kPortableClusterMax)
      fail(topk > 0 ? "topk" : "window",
           fmt::format("ceil({}/64) + ceil({}/128) = {} tiles exceed the portable cluster size {}", window,
                       topk, swapab_tiles(window, topk), kPortableClusterMax));
  }
}

std::string CompileKey::describe() const {
  std::string s = fmt::format("{}/{} {}", family_name(family), variant, arch);
  if (family == Family::kKvInsert) return s + fmt::format(" {} p{}", format_name(swa_format), swa_page);
  s += fmt::format(" h{} w{} k{} {}", live_heads, window, topk, format_name(swa_format));
  if (topk > 0)
    s += fmt::format("/{} p{}/{}", format_name(comp_format), swa_page, comp_page);
  else
    s += fmt::format(" p{}", swa_page);
  return s + fmt::format(" {}->{}", q_layout_name(q_layout), out_layout_name(out_layout));
}

std::vector<CompileKey> read_key_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kInvalidArgument, fmt::format("key file {}: cannot open", path));
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    bad(fmt::format("key file {}: malformed JSON: {}", path, e.what()));
  }
  std::vector<CompileKey> keys;
  auto one = [&](const nlohmann::json& item, const std::string& where) {
    try {
      keys.push_back(CompileKey::from_json(item));
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("key file {}{}: {}", path, where, e.message()), e.key_json());
    }
  };
  if (j.is_object()) {
    one(j, "");
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) one(j[i], fmt::format(" [index {}]", i));
  } else {
    bad(fmt::format("key file {}: expected a key object or an array of keys, got {}", path, j.type_name()));
  }
  return keys;
}

}  // namespace swapjit

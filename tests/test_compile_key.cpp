// test_compile_key.cpp: the canonical JSON is pinned byte for byte (it feeds every digest), parsing is
// strict and every rejection names its field.
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "jit/compile_key.hpp"
#include "jit/error.hpp"
#include "tests/catch.hpp"
#include "tests/sample_keys.hpp"

using namespace swapjit;

namespace {

CompileKey sample_key() { return testing::sample_swapab_key(); }

const char* kSampleJson =
    R"({"arch":"sm_90a","comp_format":"v41_fp4","comp_page":64,"family":"swapab_decode","live_heads":16,)"
    R"("out_layout":"mxfp8_ofused","q_layout":"chunk16","swa_format":"v41_fp8","swa_page":64,"topk":512,)"
    R"("variant":"wgmma","window":128})";

// The message of the Error that `fn` throws; fails the test when it throws nothing or something else.
std::string rejection(const std::function<void()>& fn, ErrorCode code = ErrorCode::kInvalidArgument) {
  try {
    fn();
  } catch (const Error& e) {
    CHECK(e.code() == code);
    return e.what();
  }
  FAIL("expected a swapjit::Error");
  return {};
}

std::string with(const char* field, nlohmann::json value) {
  auto j = nlohmann::json::parse(kSampleJson);
  j[field] = value;
  return j.dump();
}

bool names(const std::string& msg, const char* field) {
  return msg.find(std::string("\"") + field + "\"") != std::string::npos;
}

}  // namespace

TEST_CASE("canonical JSON is pinned byte for byte", "[jit]") {
  CHECK(sample_key().canonical_json() == kSampleJson);
  // Field order and whitespace of the input do not matter.
  auto k = CompileKey::parse(R"({ "window": 128, "variant": "wgmma", "topk": 512, "swa_page": 64,
      "swa_format": "v41_fp8", "q_layout": "chunk16", "out_layout": "mxfp8_ofused", "live_heads": 16,
      "family": "swapab_decode", "comp_page": 64, "comp_format": "v41_fp4", "arch": "sm_90a" })");
  CHECK(k == sample_key());
  CHECK(k.canonical_json() == kSampleJson);
}

TEST_CASE("round trip through JSON keeps every field", "[jit]") {
  CompileKey insert;
  insert.family = Family::kKvInsert;
  insert.variant = "simt";
  insert.arch = "sm_90a";
  insert.swa_format = kFormatV4Fp8;
  insert.swa_page = 1;
  CompileKey swa_only = sample_key();
  swa_only.family = Family::kHeadpadDecode;
  swa_only.live_heads = 128;
  swa_only.topk = 0;
  swa_only.comp_format = kFormatNone;
  swa_only.comp_page = 0;
  swa_only.q_layout = kQLayoutPlain;
  swa_only.out_layout = kOutBf16;
  for (const CompileKey& k : {sample_key(), insert, swa_only}) {
    CompileKey back = CompileKey::parse(k.canonical_json());
    CHECK(back == k);
    CHECK(back.canonical_json() == k.canonical_json());
    CHECK(CompileKey::from_json(k.to_json()) == k);
  }
  CHECK(insert.canonical_json() ==
        R"({"arch":"sm_90a","comp_format":"none","comp_page":0,"family":"kv_insert","live_heads":0,)"
        R"("out_layout":"none","q_layout":"none","swa_format":"v4_fp8","swa_page":1,"topk":0,)"
        R"("variant":"simt","window":0})");
  CHECK(sample_key().describe() ==
        "swapab_decode/wgmma sm_90a h16 w128 k512 v41_fp8/v41_fp4 p64/64 chunk16->mxfp8_ofused");
}

TEST_CASE("parse rejects bad input and names the field", "[jit]") {
  CHECK(rejection([] { CompileKey::parse("{\"arch\": "); }).find("malformed JSON") != std::string::npos);
  CHECK(rejection([] { CompileKey::parse("[1,2]"); }).find("expected a JSON object") != std::string::npos);
  CHECK(names(rejection([] { CompileKey::parse(with("colour", "red")); }), "colour"));
  {
    auto j = nlohmann::json::parse(kSampleJson);
    j.erase("window");
    CHECK(names(rejection([&] { CompileKey::from_json(j); }), "window"));
  }
  CHECK(names(rejection([] { CompileKey::parse(with("live_heads", 0)); }), "live_heads"));
  CHECK(names(rejection([] { CompileKey::parse(with("live_heads", 24)); }), "live_heads"));
  CHECK(
      names(rejection([] { CompileKey::parse(with("live_heads", 64)); }), "live_heads"));  // swap-AB: 8/16/32
  CHECK(names(rejection([] { CompileKey::parse(with("swa_page", 48)); }), "swa_page"));
  CHECK(names(rejection([] { CompileKey::parse(with("comp_page", 96)); }), "comp_page"));
  CHECK(names(rejection([] { CompileKey::parse(with("swa_page", 8)); }), "swa_page"));  // SWA pages >= 16
  CHECK(names(rejection([] { CompileKey::parse(with("swa_format", "v5_fp8")); }), "swa_format"));
  CHECK(names(rejection([] { CompileKey::parse(with("comp_format", "none")); }), "comp_format"));
  CHECK(names(rejection([] { CompileKey::parse(with("window", "128")); }), "window"));
  CHECK(names(rejection([] { CompileKey::parse(with("window", 128.0)); }), "window"));
  CHECK(names(rejection([] { CompileKey::parse(with("window", true)); }), "window"));
  CHECK(names(rejection([] { CompileKey::parse(with("window", -1)); }), "window"));
  CHECK(names(rejection([] { CompileKey::parse(with("topk", 4096)); }), "topk"));
  CHECK(names(rejection([] { CompileKey::parse(with("topk", 1024)); }), "topk"));  // 2 + 8 CTAs > cluster 8
  CHECK(names(rejection([] { CompileKey::parse(with("family", "mega")); }), "family"));
  CHECK(names(rejection([] { CompileKey::parse(with("variant", "tcgen05")); }), "variant"));
  CHECK(names(rejection([] { CompileKey::parse(with("variant", "simt")); }), "variant"));
  CHECK(names(rejection([] { CompileKey::parse(with("arch", "hopper")); }), "arch"));
  CHECK(names(rejection([] { CompileKey::parse(with("arch", "sm_80")); }), "arch"));
  CHECK(names(rejection([] { CompileKey::parse(with("q_layout", "none")); }), "q_layout"));
  CHECK(names(rejection([] { CompileKey::parse(with("out_layout", "fp8")); }), "out_layout"));
  CHECK(names(rejection([] { CompileKey::parse(with("arch", 90)); }), "arch"));
  {
    auto j = nlohmann::json::parse(kSampleJson);
    j["variant"] = "wgmma";
    j["arch"] = "sm_100a";  // wgmma is sm_90a only
    CHECK(names(rejection([&] { CompileKey::from_json(j); }), "variant"));
  }
  {
    auto j = nlohmann::json::parse(kSampleJson);
    j["topk"] = 0;  // an SWA-only key must not carry compressed fields
    CHECK(names(rejection([&] { CompileKey::from_json(j); }), "comp_format"));
  }
}

TEST_CASE("kv_insert keys have only a format and a page", "[jit]") {
  CompileKey k;
  k.family = Family::kKvInsert;
  k.variant = "simt";
  k.arch = "sm_90a";
  k.swa_format = kFormatV41Fp4;
  k.swa_page = 64;
  CHECK_NOTHROW(k.validate());
  auto bad = k;
  bad.live_heads = 16;
  CHECK(names(rejection([&] { bad.validate(); }), "live_heads"));
  bad = k;
  bad.variant = "mma";
  CHECK(names(rejection([&] { bad.validate(); }), "variant"));
  bad = k;
  bad.swa_format = kFormatNone;
  CHECK(names(rejection([&] { bad.validate(); }), "swa_format"));
  bad = k;
  bad.q_layout = kQLayoutPlain;
  CHECK(names(rejection([&] { bad.validate(); }), "q_layout"));
  bad = k;
  bad.swa_page = 0;
  CHECK(names(rejection([&] { bad.validate(); }), "swa_page"));
}

TEST_CASE("read_key_file reads an object or an array and names file and index", "[jit]") {
  const std::string dir = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp";
  const std::string one = dir + "/swapjit_test_keys_one.json", many = dir + "/swapjit_test_keys_many.json";
  std::ofstream(one) << kSampleJson;
  auto keys = read_key_file(one);
  REQUIRE(keys.size() == 1);
  CHECK(keys[0] == sample_key());

  std::ofstream(many) << "[" << kSampleJson << "," << with("swa_page", 100) << "]";
  std::string msg = rejection([&] { read_key_file(many); });
  CHECK(msg.find(many) != std::string::npos);
  CHECK(msg.find("index 1") != std::string::npos);
  CHECK(names(msg, "swa_page"));

  std::ofstream(many) << "[" << kSampleJson << "," << kSampleJson << "]";
  CHECK(read_key_file(many).size() == 2);
  std::ofstream(many) << "42";
  CHECK(rejection([&] { read_key_file(many); }).find(many) != std::string::npos);
  CHECK(rejection([&] { read_key_file(dir + "/swapjit_no_such_file.json"); }).find("cannot open") !=
        std::string::npos);
  std::remove(one.c_str());
  std::remove(many.c_str());
}

// test_harness_fake_driver.cpp: the GPU harness of `swapjit check` / the GPU tests (tools/gpu_harness*.cpp)
// and the runtime end to end over the host-memory fake driver (tests/host_fake_driver.hpp): real keys
// compiled by NVRTC into a private cache, a real Service, device copies of reference cases, launches whose
// every pointer the fake checks against the live allocations, downloads and the comparator. No kernel runs,
// so every comparison must FAIL with unwritten bytes and nothing else: that proves the outputs were
// downloaded whole, the guards and poison were honoured, and nothing on the host crashed or went out of
// bounds. Also: graph capture and replay, kNotWarmed inside a capture and after seal(), the check runner
// itself (tools/gpu_harness_check.hpp), and the driver symbol versions that crashed the H200 run.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/driver.hpp"
#include "runtime/service_impl.hpp"
#include <thread>

#include "tests/catch.hpp"
#include "tests/host_fake_driver.hpp"
#include "tools/gpu_harness.hpp"
#include "tools/gpu_harness_bench.hpp"
#include "tools/gpu_harness_check.hpp"

using namespace swapjit;

namespace {

std::string cache_dir() { return std::string(SWAPJIT_TEST_BINARY_DIR) + "/test-cache-harness"; }

ServiceOptions service_options() {
  ServiceOptions o;
  o.store.roots = {cache_dir()};
  o.jobs = 2;
  return o;
}

// Routes the Service's cubins through the fake's image registry, so its launch checks know each key.
void register_images(Service& service) {
  auto inner = service.impl().cubin_source;
  service.impl().cubin_source = [inner](const CompileKey& key) {
    CubinResult r = inner(key);
    hostfake::register_image(std::string(r.cubin.begin(), r.cubin.end()), key);
    return r;
  };
}

std::string violations_text() {
  std::string s;
  for (const auto& v : hostfake::stats().violation_log) s += v + "\n";
  return s;
}

// The cases: the first two of `swapjit check` (a compressed chunk16 -> mxfp8 one with determinism, a
// plain -> bf16 one) and its first SWA-only case with a null sink (comp pointers and sink null).
std::vector<harness::CheckCase> cases() {
  auto list = harness::check_case_list();
  REQUIRE(list.size() > 24);
  std::vector<harness::CheckCase> out = {list[0], list[1], list[24]};
  REQUIRE(out[2].shape.topk == 0);
  out[2].options.no_sink = true;
  return out;
}

constexpr uint8_t kPoison = 0xFF;

}  // namespace

TEST_CASE("driver symbols are requested at the ABI their DriverApi field has", "[harness][driver]") {
  // cuda.h 13 declares cuCtxSynchronize(void); a 13.x driver serves cuCtxSynchronize_v2(CUcontext) under
  // that name at 13000. Asking for it there crashed the harness on the H200.
  DriverSymbolRequest r = driver_symbol_request("cuCtxSynchronize", 13000);
  CHECK(std::string(r.symbol) == "cuCtxSynchronize");
  CHECK(r.version < 13000);
  CHECK(driver_symbol_request("cuCtxSynchronize", 12080).version == 12080);
  // The field cuGraphInstantiate is cuGraphInstantiateWithFlags (cuda.h's macro): resolve that symbol.
  CHECK(std::string(driver_symbol_request("cuGraphInstantiate", 13000).symbol) == "cuGraphInstantiateWithFlags");
  CHECK(std::string(driver_symbol_request("cuMemAlloc", 13000).symbol) == "cuMemAlloc");
  CHECK(driver_symbol_request("cuMemAlloc", 13000).version == 13000);
}

TEST_CASE("harness flows run end to end over the host fake driver", "[harness]") {
  hostfake::Scope fake;  // outlives the Service below (its ModuleCache unloads through the fake)
  Service service(service_options());
  REQUIRE(service.has_driver());
  REQUIRE(service.arch() == "sm_90a");
  register_images(service);
  harness::make_context_current(service.options().device);
  harness::LayerPool pool(service);
  harness::Stream stream;
  auto list = cases();
  for (auto& cc : list) pool.get(harness::layer_config_for(cc.shape));
  service.warmup();
  INFO(violations_text());
  REQUIRE(hostfake::stats().violations == 0);
  const long loads_after_warmup = hostfake::stats().module_loads;
  REQUIRE(loads_after_warmup > 0);

  uint64_t seed = 5;
  for (auto& cc : list) {
    cc.options.seed = seed++;
    ref::StepCase c = ref::make_case(cc.shape, cc.options);
    harness::DeviceStep dev(c);
    DecodeAttention& layer = pool.get(harness::layer_config_for(cc.shape));
    for (KernelChoice k : {KernelChoice::kSwapab, KernelChoice::kHeadpad}) {
      if (k == KernelChoice::kSwapab &&
          !harness::swapab_eligible(cc.shape, swapab_max_tokens_for(service.options(), cc.shape.heads)))
        continue;
      INFO(cc.name << (k == KernelChoice::kSwapab ? " swapab" : " headpad"));
      const long launches = hostfake::stats().launches;
      harness::KernelRun run = harness::run_kernel(layer, dev, c, k, stream.get(), kPoison);
      INFO(run.cmp.detail << "\n" << violations_text());
      CHECK(hostfake::stats().launches == launches + 1);
      CHECK(hostfake::stats().violations == 0);
      CHECK(hostfake::stats().launches_log.back().problems.empty());
      CHECK(hostfake::stats().launches_log.back().keyed);  // checked against the key's shapes
      // No kernel ran: every live byte still holds the poison, nothing outside it changed.
      CHECK_FALSE(run.pass);
      CHECK(run.cmp.unwritten > 0);
      CHECK(run.cmp.poison_violations == 0);
      CHECK(run.out.guard_violations == 0);
      CHECK(run.out.data.size() == ref::out_data_bytes(c));
      CHECK(run.out.scale.size() == ref::out_scale_bytes(c));
    }

    // Graph capture and replays (what `swapjit check` does for determinism): the capture records the
    // launch, sees no synchronous call, and each replay launches it again with pointers still live.
    dev.poison_outputs(kPoison);
    harness::Graph graph;
    harness::Graph::begin_capture(stream.get());
    CHECK(harness::Graph::capturing(stream.get()));
    layer.forward(dev.step(), stream.get(), KernelChoice::kHeadpad);
    graph.end_capture(stream.get());
    CHECK_FALSE(harness::Graph::capturing(stream.get()));
    const long replays = hostfake::stats().graph_launches;
    for (int rep = 0; rep < 2; ++rep) {
      graph.launch(stream.get());
      stream.sync();
    }
    CHECK(hostfake::stats().graph_launches == replays + 2);
    harness::DeviceOutput out = dev.download_outputs();
    CHECK(out.guard_violations == 0);
    dev.upload_inputs(c);  // same sizes: accepted
    CHECK(hostfake::stats().violations == 0);
  }

  CHECK(hostfake::stats().module_loads == loads_after_warmup);  // warm: nothing loaded on the launch path
  CHECK(hostfake::stats().captures_invalidated == 0);

  // kv_insert through the harness: the cache keeps its poison, so the check fails on mismatched bytes.
  harness::InsertCheck ic = harness::check_insert(pool, kFormatV41Fp8, 64, true, 3, stream.get());
  INFO(ic.detail << "\n" << violations_text());
  CHECK_FALSE(ic.pass);
  CHECK(ic.mismatched_bytes > 0);
  CHECK(hostfake::stats().violations == 0);

  // A layer whose keys were never warmed: inside a capture it is kNotWarmed before any compile or load,
  // and the capture stays valid (the abort returns success).
  {
    harness::CheckCase cc = list[1];
    cc.shape.out_layout = cc.shape.out_layout == kOutBf16 ? kOutMxfp8Ofused : kOutBf16;
    ref::StepCase c = ref::make_case(cc.shape, cc.options);
    harness::DeviceStep dev(c);
    DecodeAttention& cold = pool.get(harness::layer_config_for(cc.shape));
    const long loads = hostfake::stats().module_loads;
    harness::Graph::begin_capture(stream.get());
    try {
      cold.forward(dev.step(), stream.get(), KernelChoice::kHeadpad);
      FAIL("forward of a cold layer inside a capture did not throw");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kNotWarmed);
    }
    CHECK(harness::Graph::abort_capture(stream.get()) == CUDA_SUCCESS);
    CHECK(hostfake::stats().module_loads == loads);
    service.seal();
    try {
      cold.forward(dev.step(), stream.get(), KernelChoice::kHeadpad);
      FAIL("forward of a cold layer after seal() did not throw");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::kNotWarmed);
    }
  }
  INFO(violations_text());
  CHECK(hostfake::stats().violations == 0);

  // A serving thread that never touched CUDA has no current context: the first launch is refused by the
  // driver (one recorded violation), the launcher makes the module's context current and launches again.
  {
    ref::StepCase c = ref::make_case(list.front().shape, list.front().options);
    harness::DeviceStep dev(c);
    DecodeAttention& layer = pool.get(harness::layer_config_for(list.front().shape));
    const long launches = hostfake::stats().launches;
    const long violations = hostfake::stats().violations;
    std::string error;
    std::thread t([&] {
      try {
        layer.forward(dev.step(), stream.get(), KernelChoice::kHeadpad);
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    t.join();
    CHECK(error.empty());
    CHECK(hostfake::stats().launches == launches + 1);
    CHECK(hostfake::stats().violations == violations + 1);
  }
}

TEST_CASE("the fake driver catches an out-of-bounds step and a call outside a context", "[harness]") {
  hostfake::Scope fake;
  Service service(service_options());
  register_images(service);
  harness::LayerPool pool(service);
  // No context yet: memory calls fail as on a real driver (the harness must make one current first).
  CHECK_THROWS_AS(harness::DeviceBuffer(64), Error);
  CHECK(hostfake::stats().violations == 1);
  harness::make_context_current(0);
  harness::Stream stream;
  harness::CheckCase cc = cases()[1];  // 2 tokens: the token stride matters
  REQUIRE(cc.shape.tokens > 1);
  DecodeAttention& layer = pool.get(harness::layer_config_for(cc.shape));
  service.warmup();
  ref::StepCase c = ref::make_case(cc.shape, cc.options);
  harness::DeviceStep dev(c);
  DecodeStep bad = dev.step();
  bad.q_token_stride += 4096;  // legal on the host, but q's buffer was sized for the tight stride
  try {
    layer.forward(bad, stream.get(), KernelChoice::kHeadpad);
    FAIL("the fake accepted a q read past its buffer");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::kDriver);
  }
  REQUIRE(hostfake::stats().violations == 2);
  CHECK(hostfake::stats().violation_log.back().find("q (") != std::string::npos);
}

TEST_CASE("the check runner runs over the fake driver and reports every case as failing", "[harness]") {
  hostfake::Scope fake;
  const std::string json = cache_dir() + "/check-rows.json";
  std::filesystem::create_directories(cache_dir());
  std::filesystem::remove(json);
  harness::CheckOptions o;
  o.cases = 2;  // the first two cases (the keys of the flows test above, already in the cache)
  o.seed = 3;
  o.skip_insert = true;
  o.roots = {cache_dir()};
  o.json = json;
  const int rc = harness::run_check(o);
  INFO(violations_text());
  CHECK(rc == 1);  // no kernel ran: every comparison fails
  CHECK(hostfake::stats().violations == 0);
  CHECK(hostfake::stats().graph_launches > 0);  // case 0 runs the determinism graph replays
  std::ifstream f(json);
  REQUIRE(f);
  nlohmann::json rows = nlohmann::json::parse(f);
  REQUIRE(rows.size() >= 4);
  for (const auto& r : rows) {
    INFO(r.dump());
    CHECK_FALSE(r["pass"].get<bool>());
    // A kernel row fails on the untouched poison (0xFF: NaN in every output format, so the comparator
    // names NaN positions or unwritten bytes first), never on a setup error or a driver failure.
    const std::string detail = r["detail"].get<std::string>();
    CHECK(detail.find("failed:") == std::string::npos);
    if (r["kernel"] == "swapab" || r["kernel"] == "headpad")
      CHECK((detail.find("NaN/Inf position mismatches") != std::string::npos ||
             detail.find("never written") != std::string::npos));
  }

  // The command that exited silently on the H200: `swapjit check --kernel headpad`.
  hostfake::reset();
  harness::CheckOptions h = o;
  h.kernel = "headpad";
  h.json.clear();
  CHECK(harness::run_check(h) == 1);
  CHECK(hostfake::stats().violations == 0);
  for (const auto& l : hostfake::stats().launches_log) CHECK(l.function.find("headpad") != std::string::npos);

  // --list builds every case and layer on the host.
  hostfake::reset();
  harness::CheckOptions l;
  l.list = true;
  l.roots = {cache_dir()};
  CHECK(harness::run_check(l) == 0);
  // --only narrows the list by name (the mid-shape cases for the sanitizers); an unknown name is an error.
  l.only = {"sw3", "c0"};
  CHECK(harness::run_check(l) == 0);
  l.only = {"sw9"};
  try {
    harness::run_check(l);
    FAIL("an unknown case name was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("\"sw9\"") != std::string::npos);
  }
}

TEST_CASE("the bench pieces run over the fake driver", "[harness][bench]") {
  hostfake::Scope fake;
  Service service(service_options());
  register_images(service);
  harness::make_context_current(0);
  harness::LayerPool pool(service);
  harness::Stream stream;
  bench::BenchKernels kernels;  // the PTX helpers
  const LayerConfig lc = harness::layer_config_for(cases()[0].shape);  // chunk16 -> mxfp8, cached keys
  DecodeAttention& layer = pool.get(lc);
  service.warmup();
  bench::CacheSet caches(kernels, stream.get());
  bench::BenchInputs in(lc, 4, /*cold=*/false, caches, 1);
  REQUIRE(in.sets.size() == size_t(bench::kSetsPerGraph));
  const long before = hostfake::stats().graph_launches;
  double ms = bench::time_calls(in, kernels, stream.get(), 2, [&](const DecodeStep& st) {
    layer.forward(st, stream.get(), KernelChoice::kHeadpad);
  });
  INFO(violations_text());
  CHECK(ms > 0);
  CHECK(hostfake::stats().violations == 0);
  // 3 warm-up + 2 timed replays, each a copy and a decode launch per input set.
  CHECK(hostfake::stats().graph_launches - before == 5 * 2 * bench::kSetsPerGraph);
  for (const auto& l : hostfake::stats().launches_log) CHECK(l.problems.empty());
  // The captured "Q projection" copies ran: each set's q equals its source.
  for (const auto& st : in.sets) CHECK(st.q.download_all() == st.q_src.download_all());
  bench::OccupancyInfo oc = bench::swapab_occupancy(service, layer.key_for(KernelChoice::kSwapab));
  CHECK(oc.max_clusters == 17);
  // The scan over cluster sizes 2..16 (the fake driver's guesses: 17 up to 7 CTAs, 16 at 8, 7 past 8, the
  // non-portable sizes allowed because the scan opts in).
  REQUIRE(oc.by_cluster.size() == 17);
  CHECK(oc.by_cluster[2] == 17);
  CHECK(oc.by_cluster[8] == 16);
  CHECK(oc.by_cluster[16] == 7);
  CHECK(hostfake::stats().violations == 0);
}

TEST_CASE("the bench runner, its JIT numbers, summary and compare run over the fake driver", "[harness][bench]") {
  hostfake::Scope fake;
  std::filesystem::create_directories(cache_dir());
  const std::string json_a = cache_dir() + "/bench-a.json", json_b = cache_dir() + "/bench-b.json";
  std::filesystem::remove(json_a);
  bench::BenchOptions o;
  o.tokens = {1, 4, 32};
  o.heads = {16};
  o.pairs = {0};  // the keys of cases() above: usually in the cache already
  o.replays = 1;
  o.no_cold = true;
  o.roots = {cache_dir()};
  o.json = json_a;
  o.jit_options.cold_layers = 1;  // the cold warmup compiles one layer's 3 keys into a fresh temp dir
  o.jit_options.calls = 50;
  o.jit_options.calls_per_spin = 20;
  o.jit_options.spin_ms = 1;
  const int rc = bench::run_bench(o);
  INFO(violations_text());
  CHECK(rc == 0);
  CHECK(hostfake::stats().violations == 0);
  long spins = 0, graph_inserts = 0;
  for (const auto& l : hostfake::stats().launches_log) {
    CHECK(l.problems.empty());
    spins += l.function == "swapjit_bench_spin";
    graph_inserts += l.from_graph && l.function.find("kv_insert") != std::string::npos;
  }
  CHECK(spins == 5 * 3);  // 5 host-overhead measurements (3 + 2 controls) of 50 calls, 20 per spin
  CHECK(graph_inserts > 0);  // the whole-step graphs insert the step's rows

  std::ifstream f(json_a);
  REQUIRE(f);
  const nlohmann::json j = nlohmann::json::parse(f);
  CHECK(j["failures"] == 0);
  // Rows: (compressed, SWA-only) x 3 token counts, all with both kernels per call and per step.
  REQUIRE(j["results"].size() == 6);
  for (const auto& r : j["results"]) {
    INFO(r.dump());
    CHECK_FALSE(r.contains("error"));
    for (const char* field : {"swapab_us", "headpad_us", "ratio", "step_swapab_us", "step_headpad_us", "step_ratio"})
      CHECK(r[field].is_number());
  }
  // One row per measurement (issue 6's schema): 6 result rows x 2 kernels x (call, step).
  REQUIRE(j["rows"].size() == 24);
  for (const auto& m : j["rows"]) {
    INFO(m.dump());
    for (const char* field : {"kernel", "measure", "layer", "swa_format", "comp_format", "l2"}) CHECK(m[field].is_string());
    for (const char* field : {"heads", "tokens"}) CHECK(m[field].is_number_integer());
    for (const char* field : {"us_per_call", "empty_floor_us", "bandwidth_floor_us"}) CHECK(m[field].is_number());
    CHECK(m["swa_format"] == "v41_fp8");
    CHECK(m["comp_format"] == (m["layer"] == "compressed" ? "v41_fp8" : "none"));
    CHECK(m["l2"] == "warm");
  }
  CHECK(j["device"].is_string());
  // The fake's events all read the same time: every ratio is 1, so head-padded is "as fast" from T = 1.
  REQUIRE(j["summary"]["groups"].size() == 2);
  for (const auto& g : j["summary"]["groups"]) {
    CHECK(g["ratios"].size() == 3);
    CHECK(g["crossover_tokens"] == 1);
    CHECK(g["step_crossover_tokens"] == 1);
  }
  CHECK(j["summary"]["suggested_swapab_max_tokens"]["16"]["value"] == 0);
  CHECK(j["summary"]["suggested_swapab_max_tokens"]["16"]["measured_tokens"] == nlohmann::json({1, 4, 32}));
  // Occupancy rows carry the scan over cluster sizes 2..16.
  REQUIRE(j["occupancy"].is_array());
  REQUIRE_FALSE(j["occupancy"].empty());
  CHECK(j["occupancy"][0]["max_active_clusters_by_size"].size() == 15);
  CHECK(j["occupancy"][0]["max_active_clusters_by_size"]["6"] == 17);
  // JIT: three host-overhead rows and two launch controls, a load per registered key, a cold then warm
  // warmup of the same keys.
  const auto& jit = j["jit"];
  INFO(jit.dump(1).substr(0, 2000));
  REQUIRE(jit["host_overhead"].size() == 5);
  for (const auto& h : jit["host_overhead"]) CHECK(h["calls"] == 50);
  CHECK(jit["host_overhead"][3]["what"].get<std::string>().find("control: launch_kernel") == 0);
  CHECK(jit["host_overhead"][4]["what"].get<std::string>().find("control: bare cuLaunchKernelEx") == 0);
  // The decode-shaped control launches the empty kernel as the layer's swap-AB step: one cluster of 6 CTAs.
  long control_launches = 0;
  for (const auto& l : hostfake::stats().launches_log)
    control_launches += l.function == "swapjit_bench_empty" && l.cluster == 6 && l.grid == 6;
  CHECK(control_launches >= 50);
  CHECK(jit["module_load"]["keys"].get<int>() >= 5);
  const auto& cold = jit["warmup"]["cold"];
  const auto& warm = jit["warmup"]["warm"];
  CHECK(cold["keys"] == 4);  // swapab, its split key (half the heads), headpad, kv_insert
  CHECK(warm["keys"] == 4);
  for (const auto& k : cold["per_key"]) CHECK(k["compiled"] == true);
  for (const auto& k : warm["per_key"]) CHECK(k["compiled"] == false);
  CHECK_FALSE(std::filesystem::exists(jit["warmup"]["cache_dir"].get<std::string>()));  // temp dir removed

  // Compare: a run with itself agrees on every ratio; a 20% slower swap-AB at one row disagrees.
  int matched = 0;
  CHECK(bench::compare_runs(j, j, 0.10, &matched) == 0);
  CHECK(matched == 12);
  nlohmann::json b = j;
  b["results"][0]["swapab_us"] = b["results"][0]["swapab_us"].get<double>() * 1.2;
  CHECK(bench::compare_runs(j, b, 0.10) == 1);
  CHECK(bench::compare_runs(j, b, 0.25) == 0);
  // The CLI's --compare: exit 0 when the ratios agree, non-zero when one disagrees.
  std::ofstream(json_b) << b.dump();
  const std::string cli = std::string(SWAPJIT_CLI_PATH) + " bench --compare ";
  CHECK(std::system((cli + json_a + " " + json_a + " > /dev/null").c_str()) == 0);
  CHECK(std::system((cli + json_a + " " + json_b + " > /dev/null").c_str()) != 0);
}

TEST_CASE("bench measurement rows: one per kernel and measure, none for what was not measured", "[bench]") {
  const nlohmann::json results = nlohmann::json::parse(R"([
    {"layer": "compressed", "kv": "v41_fp8+v41_fp4", "heads": 32, "tokens": 16, "cache": "cold",
     "swapab_us": 14.9, "headpad_us": 20.7, "step_swapab_us": null, "step_headpad_us": null,
     "empty_floor_us": 2.1, "bandwidth_floor_us": 1.5},
    {"layer": "swa_only", "kv": "v4_fp8", "heads": 64, "tokens": 1, "cache": "warm",
     "swapab_us": null, "headpad_us": 24.5, "step_swapab_us": null, "step_headpad_us": 25.5,
     "empty_floor_us": 1.7, "bandwidth_floor_us": 0.04},
    {"layer": "compressed", "kv": "v41_fp8+v41_fp8", "heads": 16, "tokens": 4, "cache": "warm", "error": "boom"}
  ])");
  const nlohmann::json rows = bench::measurement_rows(results);
  REQUIRE(rows.size() == 4);
  CHECK(rows[0] == nlohmann::json::parse(R"({"kernel": "swapab", "measure": "call", "heads": 32, "tokens": 16,
    "layer": "compressed", "swa_format": "v41_fp8", "comp_format": "v41_fp4", "l2": "cold", "us_per_call": 14.9,
    "empty_floor_us": 2.1, "bandwidth_floor_us": 1.5})"));
  CHECK(rows[1]["kernel"] == "headpad");
  CHECK(rows[1]["us_per_call"] == 20.7);
  CHECK(rows[2]["kernel"] == "headpad");  // the SWA-only 64-head row: head-padded only, call and step
  CHECK(rows[2]["measure"] == "call");
  CHECK(rows[2]["comp_format"] == "none");
  CHECK(rows[3]["measure"] == "step");
  CHECK(rows[3]["us_per_call"] == 25.5);
}

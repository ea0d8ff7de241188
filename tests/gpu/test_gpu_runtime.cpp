// test_gpu_runtime.cpp: graph behaviour of the runtime on a GPU: 1000 graph replays bit-identical to the
// eager launch, and a key not warmed met inside a capture gives kNotWarmed with the capture ended cleanly
// (DESIGN.md "Warm before capture, sealed after"). Without a driver each test prints
// "SKIPPED: no GPU driver" and returns.
#include <cstdio>
#include <string>

#include "jit/error.hpp"
#include "runtime/driver.hpp"
#include "tests/catch.hpp"
#include "tests/gpu/skip_without_gpu.hpp"
#include "tools/gpu_harness.hpp"

using namespace swapjit;

namespace {

using testing::no_gpu;

// Runs `fn` and returns the ErrorCode it threw; fails the test when it threw nothing or something else.
template <class Fn>
ErrorCode thrown_code(Fn&& fn, std::string* what) {
  try {
    fn();
  } catch (const Error& e) {
    *what = std::string(e.what()) + " key: " + e.key_json();
    return e.code();
  }
  *what = "(nothing thrown)";
  return ErrorCode::kInternal;
}

}  // namespace

TEST_CASE("1000 graph replays are bit-identical to the eager launch", "[gpu][graph]") {
  if (no_gpu("graph replays")) return;
  Service service;
  harness::make_context_current(service.options().device);
  harness::LayerPool pool(service);
  harness::Stream stream;
  harness::CheckCase cc = harness::small_case_list().at(1);  // 32 heads, 5 tokens, mxfp8 output
  cc.options.seed = 5;
  ref::StepCase c = ref::make_case(cc.shape, cc.options);
  harness::DeviceStep dev(c);
  DecodeAttention& layer = pool.get(harness::layer_config_for(cc.shape));
  service.warmup();
  for (KernelChoice k : {KernelChoice::kSwapab, KernelChoice::kHeadpad}) {
    INFO((k == KernelChoice::kSwapab ? "swapab" : "headpad"));
    harness::KernelRun eager = harness::run_kernel(layer, dev, c, k, stream.get(), 0xFF);
    REQUIRE(eager.pass);
    dev.poison_outputs(0xFF);
    harness::Graph graph;
    harness::Graph::begin_capture(stream.get());
    try {
      layer.forward(dev.step(), stream.get(), k);
    } catch (...) {
      harness::Graph::abort_capture(stream.get());
      throw;
    }
    graph.end_capture(stream.get());
    int differing = 0;
    for (int rep = 0; rep < 1000; ++rep) {
      graph.launch(stream.get());
      // Compare every 100th replay in full (a download per replay would dominate the test's time);
      // the output buffer is not re-poisoned, so a replay that wrote different bytes would still show.
      if (rep % 100 == 99) {
        stream.sync();
        differing += !(dev.download_outputs() == eager.out);
      }
    }
    stream.sync();
    CHECK(differing == 0);
    // Poisoned once more: one replay must rewrite every byte the eager launch wrote.
    dev.poison_outputs(0xFF);
    graph.launch(stream.get());
    stream.sync();
    CHECK(dev.download_outputs() == eager.out);
  }
}

TEST_CASE("a key not warmed inside a capture is kNotWarmed and the capture ends cleanly", "[gpu][graph]") {
  if (no_gpu("not warmed in capture")) return;
  Service service;  // fresh: none of its keys is loaded
  harness::make_context_current(service.options().device);
  harness::Stream stream;
  harness::CheckCase cc = harness::small_case_list().front();
  cc.options.seed = 9;
  ref::StepCase c = ref::make_case(cc.shape, cc.options);
  harness::DeviceStep dev(c);
  DecodeAttention layer(service, harness::layer_config_for(cc.shape));

  harness::Graph::begin_capture(stream.get());
  std::string what;
  ErrorCode code = thrown_code([&] { layer.forward(dev.step(), stream.get(), KernelChoice::kHeadpad); }, &what);
  CUresult end_rc = harness::Graph::abort_capture(stream.get());
  INFO("forward inside the capture threw: " << what << "; cuStreamEndCapture: " << cu_error_text(end_rc));
  CHECK(code == ErrorCode::kNotWarmed);
  // The message names the key, so the user can add it to the layer's warmup.
  CHECK(what.find("headpad") != std::string::npos);
  CHECK_FALSE(harness::Graph::capturing(stream.get()));
  CHECK(end_rc == CUDA_SUCCESS);  // nothing illegal reached the stream: the capture ends normally

  // The stream and the layer are usable afterwards: not capturing and not sealed, the miss compiles now.
  harness::KernelRun run = harness::run_kernel(layer, dev, c, KernelChoice::kHeadpad, stream.get(), 0xFF);
  INFO(run.cmp.detail);
  CHECK(run.pass);

  // After seal(), a layer built later misses even outside a capture.
  service.seal();
  harness::CheckCase other = harness::small_case_list().at(2);  // SWA-only layer: different keys
  other.options.seed = 10;
  ref::StepCase c2 = ref::make_case(other.shape, other.options);
  harness::DeviceStep dev2(c2);
  code = thrown_code(
      [&] {
        DecodeAttention late(service, harness::layer_config_for(other.shape));
        late.forward(dev2.step(), stream.get(), KernelChoice::kHeadpad);
      },
      &what);
  INFO("forward after seal threw: " << what);
  CHECK(code == ErrorCode::kNotWarmed);
}

// gpu_harness_check.cpp: the runner of `swapjit check` (tools/cmd_check.cpp parses the options): both
// decode kernels against the fp64 reference on random cases (SPEC.md §4), the swap-AB vs head-padded rules
// on bf16 output, poisoned outputs, kv_insert against the host encoder byte for byte, and determinism
// (eager repeats, graph replays, also after an in-place input change). Prints a table, optionally writes
// JSON, returns the exit code. A function (not inside the CLI) so that the CPU tests run it over the
// host fake driver (tests/test_harness_fake_driver.cpp).
#include "tools/gpu_harness_check.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "jit/compile_key.hpp"
#include "jit/error.hpp"
#include "runtime/driver.hpp"

namespace swapjit::harness {
namespace {

struct Row {
  std::string case_name, kernel;
  ref::CaseShape shape;
  double max_abs = 0, rel = 0, bound = 0;
  bool pass = false;
  std::string detail;
};

constexpr uint8_t kPoison = 0xFF;  // NaN in bf16, e4m3 and UE8M0: a byte left unwritten can never pass

nlohmann::json row_json(const Row& r) {
  const auto& s = r.shape;
  return {{"case", r.case_name},          {"kernel", r.kernel},
          {"heads", s.heads},             {"tokens", s.tokens},
          {"swa_format", format_name(s.swa_format)},
          {"comp_format", s.topk ? format_name(s.comp_format) : "none"},
          {"swa_page", s.swa_page},       {"comp_page", s.topk ? s.comp_page : 0},
          {"q_layout", q_layout_name(s.q_layout)},
          {"out_layout", out_layout_name(s.out_layout)},
          {"max_abs_err", r.max_abs},     {"rel_err", r.rel},
          {"bound", r.bound},             {"pass", r.pass},
          {"detail", r.detail}};
}

void print_row(const Row& r) {
  std::printf("%-62.62s %-18s %11.3e %11.3e %11.3e %s%s%s\n", r.case_name.c_str(), r.kernel.c_str(), r.max_abs,
              r.rel, r.bound, r.pass ? "pass" : "FAIL", r.detail.empty() ? "" : "  ", r.detail.c_str());
  std::fflush(stdout);
}

Row from_run(const CheckCase& cc, const char* kernel, const KernelRun& run) {
  Row r{cc.name, kernel, cc.shape, run.cmp.max_abs_err, run.cmp.rel_err, run.cmp.bound, run.pass, {}};
  if (!run.pass) r.detail = run.cmp.detail;
  return r;
}

const char* kernel_label(KernelChoice k) { return k == KernelChoice::kSwapab ? "swapab" : "headpad"; }

// Eager repeats and graph replays bit-identical, then the same after the inputs change in place.
Row check_determinism(DecodeAttention& layer, DeviceStep& dev, const CheckCase& cc,
                      const ref::StepCase& c, const KernelRun& first, KernelChoice k, CUstream s) {
  Row r{cc.name, std::string(kernel_label(k)) + " determinism", cc.shape, 0, 0, 0, true, {}};
  auto fail = [&](const std::string& why) {
    if (r.pass) r.detail = why;
    r.pass = false;
  };
  for (int rep = 0; rep < 3; ++rep)
    if (!(run_kernel(layer, dev, c, k, s, kPoison).out == first.out))
      fail(fmt::format("eager repeat {} differs", rep + 1));
  dev.poison_outputs(kPoison);
  Graph graph;
  Graph::begin_capture(s);
  try {
    layer.forward(dev.step(), s, k);
  } catch (...) {
    Graph::abort_capture(s);
    throw;
  }
  graph.end_capture(s);
  auto replay = [&] {
    dev.poison_outputs(kPoison);
    graph.launch(s);
    SWAPJIT_CU(driver().cuStreamSynchronize(s));
    return dev.download_outputs();
  };
  for (int rep = 0; rep < 5; ++rep)
    if (!(replay() == first.out)) fail(fmt::format("graph replay {} differs from the eager launch", rep));
  // New inputs of the same shape, uploaded into the same buffers: the graph must follow them.
  ref::CaseOptions o2 = cc.options;
  o2.seed = cc.options.seed ^ 0x9E3779B97F4A7C15ull;
  ref::StepCase c2 = ref::make_case(cc.shape, o2);
  dev.upload_inputs(c2);
  KernelRun eager2 = run_kernel(layer, dev, c2, k, s, kPoison);
  if (!eager2.pass) fail("after the in-place change the eager output fails: " + eager2.cmp.detail);
  for (int rep = 0; rep < 3; ++rep)
    if (!(replay() == eager2.out)) fail(fmt::format("after the in-place change, replay {} differs", rep));
  if (eager2.out == first.out) fail("the output did not change with the inputs");
  dev.upload_inputs(c);  // restore for the caller
  return r;
}

// A case's tag: the first word of its name ("sw3" of "sw3 h32 T8 ...").
std::string case_tag(const CheckCase& c) { return c.name.substr(0, c.name.find(' ')); }

// check_case_list() narrowed to the tags in a.only (in list order; all when empty). An unknown tag is an
// error that names it (a typo must not check nothing and pass).
std::vector<CheckCase> selected_cases(const CheckOptions& a) {
  auto list = check_case_list();
  if (a.only.empty()) return list;
  for (const std::string& tag : a.only)
    if (std::none_of(list.begin(), list.end(), [&](const CheckCase& c) { return case_tag(c) == tag; }))
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("check --only: no case tagged \"{}\" (swapjit check --list names them)", tag));
  std::vector<CheckCase> out;
  for (const CheckCase& c : list)
    if (std::find(a.only.begin(), a.only.end(), case_tag(c)) != a.only.end()) out.push_back(c);
  return out;
}

// The service's options from the command's (cache roots, split caps).
ServiceOptions service_options(const CheckOptions& a) {
  ServiceOptions so;
  if (!a.roots.empty()) so.store.roots = a.roots;
  so.swapab_split_max_tokens = a.split_max_tokens;
  so.swapab_split4_max_tokens = a.split4_max_tokens;
  so.headpad_split_max_tokens = a.headpad_split_max_tokens;
  so.headpad_split4_max_tokens = a.headpad_split4_max_tokens;
  return so;
}

// --list: builds every case on the host (the reference accepts it) and every layer (the library accepts
// its config), prints the list with the kernels each case runs. Needs no GPU.
int list_cases(const CheckOptions& a) {
  const ServiceOptions so = service_options(a);
  Service service(so);
  LayerPool pool(service);
  auto list = selected_cases(a);
  const int n = a.cases > 0 ? a.cases : int(list.size());
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    CheckCase cc = list[size_t(i) % list.size()];
    cc.options.seed = a.seed * 1000003ull + uint64_t(i);
    try {
      DecodeAttention& layer = pool.get(layer_config_for(cc.shape));
      ref::StepCase c = ref::make_case(cc.shape, cc.options);
      bool sw = swapab_eligible(cc.shape, kNoTokenCap);  // as the check runs it
      std::printf("%-62s %-16s dispatch=%s%s\n", cc.name.c_str(), sw ? "swapab+headpad" : "headpad",
                  layer.choose(cc.shape.tokens, cc.shape.window) == KernelChoice::kSwapab ? "swapab" : "headpad",
                  cc.determinism ? " +determinism" : "");
    } catch (const Error& e) {
      std::printf("%-62s INVALID: %s\n", cc.name.c_str(), e.what());
      ++bad;
    }
  }
  return bad ? 1 : 0;
}

}  // namespace

int run_check(const CheckOptions& a) {
  if (a.list) return list_cases(a);
  if (int rc = exit_code_without_gpu("check", a.allow_no_gpu); rc >= 0) return rc;
  const ServiceOptions so = service_options(a);
  Service service(so);
  make_context_current(so.device);
  LayerPool pool(service);
  const bool want_swapab = a.kernel != "headpad", want_headpad = a.kernel != "swapab";

  auto list = selected_cases(a);
  const int n = a.cases > 0 ? a.cases : int(list.size());
  // Every layer first, so that warmup() compiles all keys in parallel. A failed warmup is reported and
  // the cases still run: each then fails (or compiles) on its own, naming its key.
  for (int i = 0; i < n; ++i) pool.get(layer_config_for(list[size_t(i) % list.size()].shape));
  auto t0 = std::chrono::steady_clock::now();
  try {
    service.warmup();
  } catch (const Error& e) {
    std::printf("warmup failed (cases continue): %s\n", e.what());
  }
  std::printf("warmup: %.1f s, arch %s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
              service.arch().c_str());
  std::printf("%-62s %-18s %11s %11s %11s %s\n", "case", "kernel", "max_abs", "rel_err", "bound", "result");

  std::vector<Row> rows;
  auto add = [&](Row r) {
    print_row(r);
    rows.push_back(std::move(r));
  };
  Stream stream;
  for (int i = 0; i < n; ++i) {
    CheckCase cc = list[size_t(i) % list.size()];
    cc.options.seed = a.seed * 1000003ull + uint64_t(i);  // fresh inputs per case, reproducible by seed
    if (i >= int(list.size())) cc.name += fmt::format(" #{}", i / list.size());
    std::vector<KernelChoice> kernels;
    if (want_swapab && swapab_eligible(cc.shape, kNoTokenCap)) kernels.push_back(KernelChoice::kSwapab);
    if (want_headpad) kernels.push_back(KernelChoice::kHeadpad);
    if (kernels.empty()) continue;
    try {
      ref::StepCase c = ref::make_case(cc.shape, cc.options);
      DeviceStep dev(c);
      DecodeAttention& layer = pool.get(layer_config_for(cc.shape));
      std::vector<KernelRun> runs;
      for (KernelChoice k : kernels) {
        try {
          runs.push_back(run_kernel(layer, dev, c, k, stream.get(), kPoison));
          add(from_run(cc, kernel_label(k), runs.back()));
        } catch (const Error& e) {
          add(Row{cc.name, kernel_label(k), cc.shape, 0, 0, 0, false, e.what()});
          runs.emplace_back();  // keep runs aligned with kernels (pass = false)
          continue;
        }
        if (!cc.determinism) continue;
        try {
          add(check_determinism(layer, dev, cc, c, runs.back(), k, stream.get()));
        } catch (const Error& e) {
          add(Row{cc.name, std::string(kernel_label(k)) + " determinism", cc.shape, 0, 0, 0, false, e.what()});
        }
      }
      // SPEC.md §4: on bf16 output, swap-AB's max-abs error at most 1.1x the head-padded one, and the two
      // outputs within 2% of each other (per head, relative L2).
      if (kernels.size() == 2 && cc.shape.out_layout == kOutBf16 && runs[0].pass && runs[1].pass) {
        double sw = runs[0].cmp.max_abs_err, hp = runs[1].cmp.max_abs_err;
        double diff = bf16_relative_difference(c, runs[0].out, runs[1].out);
        Row r{cc.name, "swapab-vs-headpad", cc.shape, sw, diff, 1.1 * hp, true, {}};
        if (!(sw <= 1.1 * hp + 1e-12)) r.detail = fmt::format("swapab max-abs {:.3e} > 1.1 x {:.3e}", sw, hp);
        if (!(diff <= 0.02)) r.detail += fmt::format(" relative difference {:.3e} > 2%", diff);
        r.pass = r.detail.empty();
        add(r);
      }
    } catch (const Error& e) {
      add(Row{cc.name, "setup", cc.shape, 0, 0, 0, false, e.what()});
    }
  }

  if (!a.skip_insert) {
    const int formats[3] = {kFormatV41Fp8, kFormatV41Fp4, kFormatV4Fp8};
    int j = 0;
    for (int fmt_id : formats)
      for (int page : {64, 32})
        for (bool rope : {false, true}) {
          ref::CaseShape s;
          s.tokens = 37;
          s.heads = 0;
          s.topk = 0;
          s.swa_format = fmt_id;
          s.swa_page = page;
          Row r{"", "kv_insert", s, 0, 0, 0, false, {}};
          try {
            auto ic = check_insert(pool, fmt_id, page, rope, a.seed * 7919ull + uint64_t(j++),
                                            stream.get());
            r.case_name = ic.name;
            r.max_abs = double(ic.mismatched_bytes);  // bytes that differ from the host encoder
            r.pass = ic.pass;
            r.detail = ic.detail;
          } catch (const Error& e) {
            r.case_name = fmt::format("insert {} p{}{}", format_name(fmt_id), page, rope ? " rope" : "");
            r.detail = e.what();
          }
          add(r);
        }
  }

  int failed = 0;
  for (const Row& r : rows) failed += !r.pass;
  std::printf("\n%zu checks, %d failed\n", rows.size(), failed);
  if (!a.json.empty()) {
    nlohmann::json j = nlohmann::json::array();
    for (const Row& r : rows) j.push_back(row_json(r));
    std::ofstream f(a.json);
    if (!f) throw Error(ErrorCode::kInvalidArgument, "cannot write --json file " + a.json);
    f << j.dump(1) << "\n";
  }
  return failed ? 1 : 0;
}


}  // namespace swapjit::harness

// cmd_precompile.cpp: `swapjit precompile`: compile a preset's or a key file's keys into the cache, in
// parallel, with a progress bar on a terminal and plain lines otherwise. Non-zero exit if any key failed.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "jit/compile_key.hpp"
#include "jit/error.hpp"
#include "jit/presets.hpp"
#include "tools/commands.hpp"

namespace swapjit::cli {
namespace {

struct PrecompileArgs {
  std::string preset, arch = "sm_90a", kv, keys_file;
  std::vector<int> tp;
  int jobs = 0;
  bool list_only = false;
  std::vector<std::string> cache_dirs;
};

std::vector<CompileKey> collect_keys(const PrecompileArgs& a) {
  if (!a.keys_file.empty()) {
    // read_key_file validates every key and names the file and index of a bad one: all keys are
    // checked before anything is compiled, so a bad file changes nothing on disk.
    auto keys = read_key_file(a.keys_file);
    for (auto& k : keys) k.validate();
    return keys;
  }
  PresetOptions po;
  po.preset = a.preset;
  if (!a.tp.empty()) po.tp = a.tp;
  po.arch = a.arch;
  po.kv = a.kv;
  return preset_keys(po);
}

class Progress {
 public:
  Progress(size_t total) : total_(total), tty_(::isatty(STDERR_FILENO) == 1) {}
  void done(const CompileKey& key, const char* what, double ms) {
    std::lock_guard<std::mutex> lk(mu_);
    ++n_;
    if (tty_) {
      const int width = 30;
      int filled = static_cast<int>(width * n_ / std::max<size_t>(total_, 1));
      std::fprintf(stderr, "\r[%s%s] %zu/%zu %-8s %-60.60s", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), n_, total_, what, key.describe().c_str());
      if (n_ == total_) std::fprintf(stderr, "\n");
    } else {
      std::fprintf(stderr, "[%zu/%zu] %s %.2f ms %s\n", n_, total_, what, ms, key.describe().c_str());
    }
    std::fflush(stderr);
  }
  void message(const std::string& text) {
    std::lock_guard<std::mutex> lk(mu_);
    std::fprintf(stderr, "%s%s\n", tty_ ? "\n" : "", text.c_str());
  }

 private:
  std::mutex mu_;
  size_t total_, n_ = 0;
  bool tty_;
};

void run_precompile(const PrecompileArgs& a) {
  if (a.keys_file.empty() == a.preset.empty())
    throw Error(ErrorCode::kInvalidArgument, "precompile needs exactly one of --preset or --keys");
  std::vector<CompileKey> keys = collect_keys(a);
  if (a.list_only) {
    // The key set as a key file (feeds `precompile --keys`, `explain --key`), touching no cache.
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& k : keys) arr.push_back(k.to_json());
    std::printf("%s\n", arr.dump(1).c_str());
    return;
  }
  StoreOptions opts = StoreOptions::from_env();
  opts.roots = resolve_roots(a.cache_dirs);
  CubinStore store(opts);
  const int jobs = std::max(1, std::min<int>(a.jobs > 0 ? a.jobs : default_jobs(), static_cast<int>(keys.size())));
  auto t0 = std::chrono::steady_clock::now();
  Progress progress(keys.size());
  // An unusable writable root fails every miss the same way: said once, here, and then only the keys some
  // root already holds are looked up (a read-only bundle's hits still count).
  const std::string root_problem = store.prepare_writable_root();
  if (!root_problem.empty())
    progress.message(fmt::format("error: {}; nothing can be compiled, keys not already cached fail", root_problem));
  std::atomic<size_t> next{0};
  std::atomic<int> hits{0}, compiled{0}, failed{0};
  // Each process starts at its own offset into the list: concurrent precompiles of one key set (a
  // fleet warming a shared cache) then compile different keys instead of queueing on one key's lock.
  // (Scattered by a multiplicative hash: launched together, processes get consecutive pids.)
  const size_t offset = static_cast<size_t>((static_cast<unsigned long long>(::getpid()) * 0x9E3779B97F4A7C15ull) >> 32) %
                        std::max<size_t>(keys.size(), 1);
  auto worker = [&]() {
    for (size_t j; (j = next.fetch_add(1)) < keys.size();) {
      const size_t i = (j + offset) % keys.size();
      if (!root_problem.empty()) {
        CubinResult r;
        const bool hit = store.lookup(keys[i], &r);
        (hit ? hits : failed).fetch_add(1);
        progress.done(keys[i], hit ? "hit" : "FAILED", r.ms);
        continue;
      }
      try {
        CubinResult r = store.get(keys[i]);
        (r.compiled ? compiled : hits).fetch_add(1);
        progress.done(keys[i], r.compiled ? "compiled" : "hit", r.ms);
      } catch (const std::exception& e) {
        failed.fetch_add(1);
        progress.done(keys[i], "FAILED", 0);
        progress.message(fmt::format("error: {}: {}", keys[i].describe(), e.what()));
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < jobs; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("precompile: %zu keys, %d hits, %d compiled, %d failed, %.2f s (%d jobs, cache %s)\n",
              keys.size(), hits.load(), compiled.load(), failed.load(), secs, jobs, store.roots().front().c_str());
  if (!root_problem.empty()) std::printf("precompile: %s\n", root_problem.c_str());
  std::fflush(stdout);
  if (failed.load() > 0) fail_with(1);
}

std::vector<int> parse_tp_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    try {
      size_t used = 0;
      int v = std::stoi(item, &used);
      if (used != item.size() || v <= 0) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("--tp: '{}' is not a positive integer", item));
    }
  }
  return out;
}

}  // namespace

void add_precompile_command(CLI::App& app) {
  auto args = std::make_shared<PrecompileArgs>();
  auto tp_text = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("precompile", "compile a preset's or a key file's keys into the cache");
  cmd->add_option("--preset", args->preset, "model preset, e.g. v4.1-flash");
  cmd->add_option("--tp", *tp_text, "tensor-parallel degrees, comma separated, e.g. 2,4");
  cmd->add_option("--arch", args->arch, "target arch (default sm_90a)");
  cmd->add_option("--kv", args->kv, "KV format pairing (default: all of the preset's)");
  cmd->add_option("--keys", args->keys_file, "a JSON file: one key object or an array of keys");
  cmd->add_option("--jobs,-j", args->jobs, "parallel compiles (default SWAPJIT_JOBS or hardware threads)");
  cmd->add_flag("--list", args->list_only, "print the keys as a JSON key file and compile nothing");
  add_cache_dir_option(cmd, &args->cache_dirs);
  cmd->callback([args, tp_text]() {
    args->tp = parse_tp_list(*tp_text);
    run_precompile(*args);
  });
}

}  // namespace swapjit::cli

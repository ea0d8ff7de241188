// main.cpp: the swapjit CLI. Each command group registers itself (tools/commands.hpp); main only parses,
// runs, and turns errors into exit codes: a swapjit::Error prints its message (it names the key and the
// log) and exits 1. The library never exits; only this file decides the process's exit status.
#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "cache/disk_cache.hpp"
#include "jit/error.hpp"
#include "tools/commands.hpp"

int main(int argc, char** argv) {
  using namespace swapjit::cli;
  CLI::App app{fmt::format("swapjit {}: runtime-JIT decode attention kernels (compile, cache, inspect)",
                           swapjit::cache::library_version())};
  app.require_subcommand(1);
  add_precompile_command(app);
  add_cache_command(app);
  add_explain_command(app);
  add_info_command(app);
  if (add_check_command) add_check_command(app);
  if (add_bench_command) add_bench_command(app);
  if (add_timeline_command) add_timeline_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // the command printed its own report
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const swapjit::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

// temp_dir.hpp: a fresh directory under $TMPDIR for one test, removed (with its permissions restored first,
// for tests that make parts of it read-only) when the test ends.
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "tests/catch.hpp"

namespace swapjit::testing {

struct TempDir {
  std::string path;
  TempDir() {
    path = (std::filesystem::temp_directory_path() / "swapjit_test_XXXXXX").string();
    REQUIRE(::mkdtemp(path.data()) != nullptr);
  }
  ~TempDir() {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
    for (auto& p : fs::recursive_directory_iterator(path, ec))
      fs::permissions(p.path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace swapjit::testing

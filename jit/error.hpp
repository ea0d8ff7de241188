// error.hpp: the project's one error type and check-macro family (STYLE.md habit 3). Errors carry the
// failing call's text, file:line, a decoded error name/string where there is one, the compile key (canonical
// JSON) and the NVRTC log where there is one. Nothing in the library calls exit().
#pragma once
#include <stdexcept>
#include <string>

namespace swapjit {

enum class ErrorCode {
  kInvalidArgument,  // bad input from the caller (key field, shape, JSON, pointer)
  kNotFound,         // a key not warmed, a missing entry
  kCompileFailed,    // NVRTC rejected the source (log attached)
  kCacheIo,          // the cache dir is unwritable, a lock timed out, a file could not be read
  kNoDriver,         // libcuda.so.1 or a GPU is absent
  kDriver,           // a CUDA driver call failed
  kNotWarmed,        // a key met during stream capture or after seal() that was not warmed
  kUnsupported,      // a shape or arch no kernel takes
  kInternal,
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message, std::string key_json = {}, std::string log = {});
  ErrorCode code() const { return code_; }
  // The message without the "swapjit <code>:" prefix, key and log (for re-wrapping with more context).
  const std::string& message() const { return message_; }
  const std::string& key_json() const { return key_json_; }
  const std::string& log() const { return log_; }

 private:
  ErrorCode code_;
  std::string message_;
  std::string key_json_;
  std::string log_;
};

// Formats "<what> at file:line" and throws Error(code, ...).
[[noreturn]] void throw_error(ErrorCode code, const std::string& what, const char* file, int line,
                              const std::string& key_json = {}, const std::string& log = {});

}  // namespace swapjit

#define SWAPJIT_THROW(code, msg) ::swapjit::throw_error((code), (msg), __FILE__, __LINE__)
#define SWAPJIT_REQUIRE(cond, code, msg)                                               \
  do {                                                                                 \
    if (!(cond)) ::swapjit::throw_error((code), std::string(msg) + " [" #cond "]", __FILE__, __LINE__); \
  } while (0)

#include "jit/error.hpp"

#include <fmt/format.h>

namespace swapjit {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kCompileFailed: return "compile_failed";
    case ErrorCode::kCacheIo: return "cache_io";
    case ErrorCode::kNoDriver: return "no_driver";
    case ErrorCode::kDriver: return "driver_error";
    case ErrorCode::kNotWarmed: return "not_warmed";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

static std::string compose(ErrorCode code, const std::string& message, const std::string& key_json,
                           const std::string& log) {
  std::string s = fmt::format("swapjit {}: {}", error_code_name(code), message);
  if (!key_json.empty()) s += fmt::format("\n  key: {}", key_json);
  if (!log.empty()) s += fmt::format("\n  log:\n{}", log);
  return s;
}

Error::Error(ErrorCode code, std::string message, std::string key_json, std::string log)
    : std::runtime_error(compose(code, message, key_json, log)),
      code_(code),
      message_(std::move(message)),
      key_json_(std::move(key_json)),
      log_(std::move(log)) {}

void throw_error(ErrorCode code, const std::string& what, const char* file, int line,
                 const std::string& key_json, const std::string& log) {
  throw Error(code, fmt::format("{} (at {}:{})", what, file, line), key_json, log);
}

}  // namespace swapjit

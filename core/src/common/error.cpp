#include "specd/error.hpp"

#include <string>

namespace specd {

std::string_view error_code_name(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kConfig:
      return "config";
    case ErrorCode::kPluginLoad:
      return "plugin_load";
    case ErrorCode::kPluginCall:
      return "plugin_call";
    case ErrorCode::kModelFormat:
      return "model_format";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kOutOfMemory:
      return "out_of_memory";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "unknown";
}

namespace detail {
void throw_check_failed(ErrorCode code, const char* file, int line, const std::string& message) {
  std::string where = file;
  if (auto pos = where.rfind("/core/"); pos != std::string::npos) where = where.substr(pos + 1);
  throw Error(code, message + " [" + where + ":" + std::to_string(line) + "]");
}
}  // namespace detail

}  // namespace specd

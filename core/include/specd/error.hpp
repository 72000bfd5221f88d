// specd::Error: the one exception type of the engine. Load, config and API-misuse errors
// throw it; per-request failures are reported on the request instead.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace specd {

enum class ErrorCode {
  kInvalidArgument,  // bad user input: config value, request field, CLI flag
  kNotFound,         // a file, plugin, component or model that is not there
  kConfig,           // a config file that does not validate
  kPluginLoad,       // a plugin refused at load or a component factory that failed
  kPluginCall,       // a plugin call that failed at run time
  kModelFormat,      // checkpoint or tokenizer file malformed or unsupported
  kUnsupported,      // a feature that specd does not implement
  kOutOfMemory,      // KV blocks or buffers exhausted
  kInternal,         // a broken invariant inside specd (a bug)
};

std::string_view error_code_name(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

namespace detail {
[[noreturn]] void throw_check_failed(ErrorCode code, const char* file, int line, const std::string& message);
}  // namespace detail

}  // namespace specd

// SPECD_CHECK(cond, code, message): throws specd::Error carrying file:line when cond is false.
// For invariants and API misuse; user-input errors should say what the input was instead.
#define SPECD_CHECK(cond, code, message)                                                     \
  do {                                                                                       \
    if (!(cond)) ::specd::detail::throw_check_failed((code), __FILE__, __LINE__, (message)); \
  } while (0)

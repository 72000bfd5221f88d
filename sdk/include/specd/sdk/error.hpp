// Errors on the plugin side of the ABI: specd::sdk::Error carries an ABI status code, and
// detail::guard turns any exception into a status plus a message in the host's error buffer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "specd/sdk/abi.h"

namespace specd::sdk {

class Error : public std::exception {
 public:
  explicit Error(std::string message, int32_t code = SPECD_ERR_INVALID_ARGUMENT)
      : message_(std::move(message)), code_(code) {}
  const char* what() const noexcept override { return message_.c_str(); }
  int32_t code() const noexcept { return code_; }

 private:
  std::string message_;
  int32_t code_;
};

namespace detail {

inline void write_error(specd_error* err, std::string_view message) {
  if (err == nullptr || err->message == nullptr || err->capacity == 0) return;
  const size_t n = std::min<size_t>(message.size(), err->capacity - 1);
  std::memcpy(err->message, message.data(), n);
  err->message[n] = '\0';
}

// Runs fn, translating any exception into a status code + message. Nothing throws past here.
template <class Fn>
int32_t guard(specd_error* err, Fn&& fn) noexcept {
  try {
    fn();
    return SPECD_OK;
  } catch (const Error& e) {
    write_error(err, e.what());
    return e.code() == SPECD_OK ? SPECD_ERR_INTERNAL : e.code();
  } catch (const std::bad_alloc&) {
    write_error(err, "out of memory");
    return SPECD_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    write_error(err, e.what());
    return SPECD_ERR_INTERNAL;
  } catch (...) {
    write_error(err, "unknown exception");
    return SPECD_ERR_INTERNAL;
  }
}

// Host side of a status: turns a failed call back into sdk::Error.
inline void check_status(int32_t status, const char* message) {
  if (status != SPECD_OK) throw Error(message != nullptr && *message ? message : "host call failed", status);
}

template <class... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

}  // namespace detail

}  // namespace specd::sdk

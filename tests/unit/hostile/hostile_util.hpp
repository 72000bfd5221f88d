// Helpers of the hostile-input unit tests.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <initializer_list>
#include <string>

#include "specd/error.hpp"

namespace specd::test {

// A fresh directory for the running test.
inline std::filesystem::path scratch() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::filesystem::path dir = std::filesystem::path(SPECD_TEST_WORK_DIR) / "hostile" /
                                    (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The message of the specd::Error `fn` throws; fails the test when it throws nothing else.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const specd::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a specd::Error";
  return {};
}

// The message holds every part and is short: a refusal names what was wrong, it does not echo
// the input (a list of up to 20 errors gets a larger bound).
inline void expect_has(const std::string& message, std::initializer_list<std::string> parts, size_t max_size = 1000) {
  for (const auto& p : parts)
    EXPECT_NE(message.find(p), std::string::npos) << "\"" << message << "\" lacks \"" << p << "\"";
  EXPECT_LT(message.size(), max_size) << "the message echoes the input";
}

}  // namespace specd::test

// Helpers shared by the checkpoint tests: per-test scratch directories and fixture paths.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fixture.hpp"
#include "specd/error.hpp"

namespace specd::model::test {

// <test-work>/model/<name>: shared fixture checkpoints (write() is idempotent and locked).
inline std::filesystem::path fixture_dir(const std::string& name) {
  return std::filesystem::path(SPECD_TEST_WORK_DIR) / "model" / name;
}

// A fresh, empty directory for the running test.
inline std::filesystem::path scratch_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  const std::filesystem::path dir = std::filesystem::path(SPECD_TEST_WORK_DIR) / "model-scratch" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs `fn`, expecting a specd::Error with `code` whose message contains every substring.
template <typename Fn>
void expect_error(Fn&& fn, ErrorCode code, std::initializer_list<std::string> substrings) {
  try {
    fn();
    ADD_FAILURE() << "expected a specd::Error (" << error_code_name(code) << ")";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << "message: " << e.what() << " (got " << error_code_name(e.code()) << ")";
    for (const std::string& s : substrings) {
      EXPECT_NE(std::string(e.what()).find(s), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << s << "\"";
    }
  }
}

}  // namespace specd::model::test

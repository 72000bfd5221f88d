// Where tests write their files: the build's test-work directory (SPECD_TEST_WORK_DIR, set by
// tests/CMakeLists.txt), or the directory the environment variable of that name gives, for
// suites carried to another machine (scripts/gpu-check.sh).
#pragma once

#include <cstdlib>
#include <filesystem>

namespace specd::testing_paths {

inline std::filesystem::path work_dir() {
  if (const char* env = std::getenv("SPECD_TEST_WORK_DIR"); env != nullptr && *env != '\0') return env;
  return SPECD_TEST_WORK_DIR;
}

}  // namespace specd::testing_paths

// libFuzzer target: an engine YAML file as `specd validate` reads it (structural checks, typed
// sections, plugin subtrees flattened). Only specd::Error (file:line messages) is expected.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "specd/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    specd::config::load_string(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
  } catch (const specd::Error&) {
  }
  return 0;
}

// libFuzzer target: a whole safetensors file (8-byte length, JSON header, data) as the
// checkpoint reader parses it. Only specd::Error (a refusal naming the file) is expected.
#include <cstddef>
#include <cstdint>

#include "model/safetensors.hpp"
#include "specd/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    specd::model::parse_safetensors(reinterpret_cast<const std::byte*>(data), size, "fuzz.safetensors");
  } catch (const specd::Error&) {
  }
  return 0;
}

// libFuzzer target: tokenizer.json text as the tokenizer loader reads it; a tokenizer that loads
// then encodes and decodes a fixed text. Only specd::Error (a refusal naming the file) is
// expected.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "specd/error.hpp"
#include "tokenizer/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto tok =
        specd::tokenizer::Tokenizer::from_json(std::string_view(reinterpret_cast<const char*>(data), size));
    const auto ids = tok->encode("Hello, fuzz! <s> 123 \xe2\x96\x81 tokens");
    tok->decode(ids);
  } catch (const specd::Error&) {
  }
  return 0;
}

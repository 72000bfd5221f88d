// libFuzzer target: a whole GGUF file as the reader parses it (header, typed metadata with
// nested arrays, tensor table, alignment, data bounds), then every metadata value described and
// the tokenizer built from its tokenizer.* keys, as `specd` does for a GGUF model. Only
// specd::Error (a refusal naming the file) is expected.
#include <cstddef>
#include <cstdint>

#include "model/gguf.hpp"
#include "specd/error.hpp"
#include "tokenizer/tokenizer_impl.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace gguf = specd::model::gguf;
  try {
    const auto file = gguf::File::parse(reinterpret_cast<const std::byte*>(data), size, "fuzz.gguf");
    for (const auto& [key, value] : file->metadata()) (void)file->describe(value, 64);
    const specd::tokenizer::TokenizerDocuments docs = specd::tokenizer::gguf_tokenizer_documents(*file);
    (void)specd::tokenizer::build_impl(docs.tokenizer, docs.config, "fuzz.gguf", "fuzz.gguf");
  } catch (const specd::Error&) {
  }
  return 0;
}

// Reading untrusted input (model files, tokenizer files, config files, HTTP bodies) without
// letting its size or shape choose how much memory or stack the process uses:
//   - files are opened without blocking (a FIFO named like a model file cannot hang the
//     loader), must be regular files, and are refused above a size limit before any byte is
//     read or allocated;
//   - JSON nesting deeper than kMaxJsonDepth is refused before the document is built, so no
//     recursive walk over a parsed document (dump, copy, a component loader) can overflow the
//     stack, and parse errors never echo more than a few bytes of the input.
// Every refusal is a specd::Error whose message names the file (or `what`) and the limit.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

namespace specd {

// Deepest JSON nesting accepted anywhere (objects and arrays count one level each).
inline constexpr int kMaxJsonDepth = 64;

// Size limits of the files specd reads whole (docs/model-formats.md lists them).
inline constexpr uint64_t kMaxSmallJsonBytes = uint64_t{16} << 20;       // config.json and friends
inline constexpr uint64_t kMaxIndexJsonBytes = uint64_t{64} << 20;       // model.safetensors.index.json
inline constexpr uint64_t kMaxTokenizerJsonBytes = uint64_t{128} << 20;  // tokenizer.json
inline constexpr uint64_t kMaxConfigYamlBytes = uint64_t{1} << 20;       // engine YAML

// The whole content of `file`, which must be a regular file of at most `max_bytes` bytes.
// Throws specd::Error: kNotFound when it does not exist, else `code` ("<file>: not a regular
// file", "<file>: 3000000000 bytes, more than the 16777216-byte limit for config.json", ...).
// `what` names the kind of file in the size message.
std::string read_file_limited(const std::filesystem::path& file, uint64_t max_bytes, std::string_view what);

// Parses JSON text with the nesting limit. Throws JsonError, whose message states the problem
// and where (line/column or byte) with at most a short excerpt of the text.
struct JsonError : std::runtime_error {
  using std::runtime_error::runtime_error;
  std::string path;              // JSON path of the value being read, e.g. "messages[2].content"; "" = top
  bool invalid_utf8 = false;     // the text is not valid UTF-8 (or holds a lone surrogate)
  bool number_overflow = false;  // a number literal beyond the range of a double (1e400)
};
nlohmann::json parse_json(std::string_view text);
// The same, keeping the order of object keys (request bodies whose key order reaches a template).
nlohmann::ordered_json parse_ordered_json(std::string_view text);

// A JSON value's type as a word ("object", "array", "string", ...), for messages that name a
// field and its type instead of echoing the value.
const char* json_type_name(const nlohmann::json& value);
const char* json_type_name(const nlohmann::ordered_json& value);

// `text` shortened to at most `max_chars` bytes (cut at a UTF-8 boundary, "..." appended), for
// names taken from untrusted input (tensor names, vocab tokens) in error messages.
std::string clip(std::string_view text, size_t max_chars = 64);

}  // namespace specd

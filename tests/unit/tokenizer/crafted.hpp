// Small tokenizer.json files written by the tests themselves (no downloads): a byte-level BPE
// whose vocab is the 256 byte characters (id = byte value) plus "aa" (256) and "aaaa" (257).
#pragma once

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "tokenizer/components.hpp"

namespace specd::tokenizer::testing {

inline nlohmann::json byte_level_tokenizer_json() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[detail::byte_to_unicode(static_cast<unsigned char>(b))] = b;
  vocab["aa"] = 256;
  vocab["aaaa"] = 257;
  return {
      {"version", "1.0"},
      {"added_tokens", nlohmann::json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a a", "aa aa"}}}},
  };
}

// Writes json (or raw text) as <work>/tokenizer/<name>/tokenizer.json; returns the directory.
inline std::filesystem::path write_tokenizer(const std::string& name, const std::string& text,
                                             const std::string& config = {}) {
  const auto dir = std::filesystem::path(SPECD_TEST_WORK_DIR) / "tokenizer" / name;
  std::filesystem::create_directories(dir);
  // Written aside and renamed: tests run as parallel processes and may load the same directory
  // while another one rewrites it.
  auto write = [&](const char* file, const std::string& content) {
    const auto tmp = dir / (std::string(file) + "." + std::to_string(::getpid()));
    std::ofstream(tmp) << content;
    std::filesystem::rename(tmp, dir / file);
  };
  write("tokenizer.json", text);
  if (config.empty())
    std::filesystem::remove(dir / "tokenizer_config.json");
  else
    write("tokenizer_config.json", config);
  return dir;
}

inline std::filesystem::path write_tokenizer(const std::string& name, const nlohmann::json& json,
                                             const nlohmann::json& config = nullptr) {
  return write_tokenizer(name, json.dump(), config.is_null() ? std::string() : config.dump());
}

}  // namespace specd::tokenizer::testing

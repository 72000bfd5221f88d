// A small byte-level BPE tokenizer built in memory, for fuzz targets that need one.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "tokenizer/tokenizer.hpp"

namespace specd::fuzz {

inline std::unique_ptr<tokenizer::Tokenizer> small_tokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int c = 32; c < 127; ++c) vocab[std::string(1, static_cast<char>(c))] = c - 32;
  vocab["<s>"] = 95;
  vocab["<|im_end|>"] = 96;
  const nlohmann::json t = {{"version", "1.0"},
                            {"added_tokens", {{{"id", 96}, {"content", "<|im_end|>"}, {"special", true}}}},
                            {"normalizer", nullptr},
                            {"pre_tokenizer", nullptr},
                            {"post_processor", nullptr},
                            {"decoder", nullptr},
                            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}}};
  return tokenizer::Tokenizer::from_json(t.dump());
}

}  // namespace specd::fuzz

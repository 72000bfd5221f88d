// specd::Tokenizer: Hugging Face tokenizers: reads the tokenizer.json / tokenizer_config.json that ship with every
// HF model directory and produces the ids the official implementation produces. A GGUF file's
// vocabulary (tokenizer.ggml.*) is read as the tokenizer.json that describes the same
// tokenizer and builds the same pipeline (gguf_vocab.cpp, docs/model-formats.md).
//
// Supported (anything else is a load error naming the file and the feature, never a silent
// wrong tokenization):
//   model:          BPE (byte-level and SentencePiece-style, merges as strings or pairs,
//                   byte_fallback, ignore_merges, fuse_unk, continuing_subword_prefix,
//                   end_of_word_suffix)
//   normalizers:    NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, Sequence
//   pre-tokenizers: ByteLevel, Split, Metaspace, Digits, Sequence
//   post-processors: TemplateProcessing, ByteLevel, Sequence
//   decoders:       ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence
//
// Thread-safety: a loaded Tokenizer is immutable; encode/decode and every other const member may
// be called concurrently from any number of threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "specd/error.hpp"

namespace specd {

struct EncodeOptions {
  // Apply the post-processor's template (BOS/EOS and friends).
  bool add_special_tokens = true;
  // Recognise special-token text ("<|im_start|>", "</s>") in the input as the special token.
  // When false, such text is tokenized as ordinary text (what a server wants for user input).
  // Non-special added tokens are always recognised.
  bool parse_special = false;
  // More tokens than this (0 = no limit) stop the encoding with TokenLimitExceeded as soon as
  // they are certain: before a pre-token whose bytes need more tokens than are left (a token
  // covers at most the vocabulary's longest entry), or once the ids pass it. What a server sets
  // for prompts, so that a text that cannot fit the context costs neither the time nor the
  // memory of tokenizing it whole.
  int64_t max_tokens = 0;
};

// Thrown by encode when EncodeOptions::max_tokens is set and the text has more tokens.
class TokenLimitExceeded : public Error {
 public:
  explicit TokenLimitExceeded(int64_t limit)
      : Error(ErrorCode::kInvalidArgument, "the text has more than " + std::to_string(limit) + " tokens"),
        limit_(limit) {}
  int64_t limit() const noexcept { return limit_; }

 private:
  int64_t limit_;
};

// What a model ships for chat prompts: the Jinja chat templates of tokenizer_config.json
// ("chat_template" as a string, named "default", or as a list of {"name", "template"}; a
// chat_template.jinja file beside it is the "default" template) and the special-token strings
// transformers hands the template (bos_token, eos_token, ...). Rendered by specd's Jinja engine.
// A GGUF file's tokenizer.chat_template reaches the same fields through the tokenizer_config it
// is read as.
struct ChatTemplateConfig {
  std::vector<std::pair<std::string, std::string>> templates;       // (name, Jinja source)
  std::vector<std::pair<std::string, std::string>> special_tokens;  // (bos_token, "<s>"), ...
  std::vector<std::string> additional_special_tokens;
  std::string origin;  // the file the templates came from, for messages
};

class Tokenizer {
 public:
  // path: a model directory (reads tokenizer.json and, if present, tokenizer_config.json), a
  // tokenizer.json file (a tokenizer_config.json next to it is read too) or a GGUF file
  // (recognised by its magic, whatever its name). Throws specd::Error:
  // kNotFound (no file), kModelFormat (malformed JSON or values), kUnsupported (a component
  // specd does not implement).
  static std::unique_ptr<Tokenizer> load(const std::filesystem::path& path);
  // The same from the text of tokenizer.json and tokenizer_config.json ("{}" = none); `name`
  // stands for the file in error messages.
  static std::unique_ptr<Tokenizer> from_json(std::string_view tokenizer_json,
                                              std::string_view tokenizer_config_json = "{}",
                                              const std::string& name = "tokenizer.json");

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Input that is not valid UTF-8 is read with each invalid sequence replaced by U+FFFD.
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& opts = {}) const;

  // Ids that name no token (e.g. padding rows of a model's embedding) are skipped.
  // Invalid UTF-8 produced by byte tokens is replaced by U+FFFD (maximal subparts).
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int32_t vocab_size() const;             // max id + 1 over the model vocab and added tokens
  std::optional<int32_t> bos_id() const;  // from tokenizer_config.json / post-processor
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // throws kInvalidArgument on an id with no token
  bool is_special(int32_t id) const;          // false for ids with no token

  // The file the tokenizer was read from (for messages).
  const std::filesystem::path& source() const;

  // The model's chat templates and special-token strings (empty templates: the model has none).
  const ChatTemplateConfig& chat_template_config() const;

  // The implementation (core/src/tokenizer/): incomplete here, for specd's own code.
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace specd

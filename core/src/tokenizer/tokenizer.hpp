// Hugging Face tokenizers: reads the tokenizer.json / tokenizer_config.json that ship with every
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
#include <vector>

namespace specd::tokenizer {

struct EncodeOptions {
  // Apply the post-processor's template (BOS/EOS and friends).
  bool add_special_tokens = true;
  // Recognise special-token text ("<|im_start|>", "</s>") in the input as the special token.
  // When false, such text is tokenized as ordinary text (what a server wants for user input).
  // Non-special added tokens are always recognised.
  bool parse_special = false;
};

class IncrementalDetokenizer;

// What a model ships for chat prompts: the Jinja chat templates of tokenizer_config.json
// ("chat_template" as a string, named "default", or as a list of {"name", "template"}; a
// chat_template.jinja file beside it is the "default" template) and the special-token strings
// transformers hands the template (bos_token, eos_token, ...). Rendered by core/src/template/.
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
  static std::unique_ptr<Tokenizer> from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json = "{}",
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

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend class IncrementalDetokenizer;
};

// Streaming detokenizer for one sequence. Fed one or more ids at a time (a speculative step
// accepts up to k+1 tokens at once), it returns only complete UTF-8 text, and
//   push(a) + push(b) + ... + flush() == decode(a + b + ...)
// exactly, including SentencePiece leading-space stripping, byte-fallback runs split across
// pushes and clean_up_tokenization_spaces. Text that a later token could still change (an
// incomplete UTF-8 sequence, a space that clean-up may delete) is held back until it is final.
//
// With prompt_ids, the prompt is context: deltas continue decode(prompt + generated) after the
// prompt's text. (Prompt text that was itself still pending — e.g. a trailing incomplete UTF-8
// sequence — is emitted with the first delta that completes it.)
//
// Cost per push is proportional to the ids pushed plus a few ids of context, not to the length
// of the sequence. Not thread-safe (one per sequence); the Tokenizer must outlive it.
class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tok, bool skip_special_tokens = false,
                         std::span<const int32_t> prompt_ids = {});

  std::string push(std::span<const int32_t> ids);  // newly completed UTF-8 text (may be empty)
  std::string flush();                             // anything held back, at end of stream

 private:
  std::string clean_up_stream(std::string raw, bool final_flush);

  const Tokenizer& tok_;
  bool skip_special_;
  // Ids from the context start on. ids_[0, window_) is context whose text was already passed
  // on; its decode is non-empty, so start-of-text effects (a stripped leading space) are
  // settled inside it.
  std::vector<int32_t> ids_;
  size_t window_ = 0;
  size_t emitted_ = 0;         // bytes of decode(ids_) (before clean-up) already passed on
  std::string emitted_text_;   // those bytes, to check the decode only ever grows
  // clean_up_tokenization_spaces runs over the raw stream; text a later character could
  // still change waits here.
  std::string pending_clean_;
  char prev_clean_char_ = '\0';  // last raw character already cleaned and passed on
};

}  // namespace specd::tokenizer

// Tokenizer::Impl: the loaded pipeline (internal; shared by tokenizer.cpp, load.cpp and
// detokenizer.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/components.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::tokenizer::detail {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// Longest-match dictionary over added-token contents (byte trie). A match starts at the
// leftmost position where any content matches and is the longest content there.
class AddedTokenTrie {
 public:
  void insert(std::string_view content, int32_t token_index);
  bool empty() const { return nodes_.size() <= 1; }

  struct Segment {
    size_t begin, end;
    int32_t token = -1;  // index into Impl::added, or -1 for text
  };
  // Splits text into text and added-token segments. Special tokens are matched only when
  // match_special; single_word tokens only when not inside a word.
  void split(std::string_view text, const std::vector<AddedToken>& tokens, bool match_special,
             std::vector<Segment>& out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;
    int32_t token = -1;
  };
  std::vector<Node> nodes_{Node{}};
  bool first_byte_[256] = {};
};

// One item of a TemplateProcessing "single" template.
struct TemplateItem {
  bool is_sequence = false;
  std::vector<int32_t> special_ids;  // for special tokens
};

class TemplateProcessing final : public PostProcessor {
 public:
  explicit TemplateProcessing(std::vector<TemplateItem> single) : single_(std::move(single)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override;
  std::vector<TemplateItem>& single() { return single_; }
  const std::vector<TemplateItem>& single() const { return single_; }

 private:
  std::vector<TemplateItem> single_;
};

}  // namespace specd::tokenizer::detail

// The public specd::Tokenizer's implementation (a nested class: defined in namespace specd).
namespace specd {

struct Tokenizer::Impl {
  std::filesystem::path source;
  std::unique_ptr<tokenizer::detail::Normalizer> normalizer;
  std::unique_ptr<tokenizer::detail::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tokenizer::detail::BpeModel> model;
  std::unique_ptr<tokenizer::detail::PostProcessor> post_processor;
  std::unique_ptr<tokenizer::detail::Decoder> decoder;

  std::vector<tokenizer::detail::AddedToken> added;
  tokenizer::detail::Vocab added_ids;                   // content (and normalized content) -> id
  tokenizer::detail::AddedTokenTrie unnormalized_trie;  // matched on the input text
  tokenizer::detail::AddedTokenTrie normalized_trie;    // matched after normalization

  // Per id (index = id): the token string, whether there is one, and decode facts.
  std::vector<std::string> tokens;
  std::vector<char> has_token;
  std::vector<char> special;        // skipped by skip_special_tokens
  std::vector<char> added_content;  // an added token's content: ByteLevel passes it through

  std::optional<int32_t> bos;
  std::optional<int32_t> eos;
  bool clean_up_spaces = true;
  ChatTemplateConfig chat;

  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& opts) const;
  // The decoder chain's text, before clean_up_tokenization_spaces.
  std::string decode_raw(std::span<const int32_t> ids, bool skip_special_tokens) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;
  // The bytes token `id` adds to the text in the middle of a sequence (no leading-space
  // stripping, no UTF-8 repair: a byte token is its one byte). Empty for special tokens and
  // ids with no token. What a grammar sees of a token (constrain/token_mask.hpp).
  std::string token_bytes(int32_t id) const;

 private:
  // limit: EncodeOptions::max_tokens (0 = none).
  void encode_section(std::string_view text, bool at_origin, bool parse_special, int64_t limit,
                      std::vector<int32_t>& out) const;
  void encode_normalized(std::string_view text, bool at_origin, int64_t limit, std::vector<int32_t>& out) const;
};

}  // namespace specd

namespace specd::tokenizer {

// Reads tokenizer.json (+ tokenizer_config.json), or a GGUF file's vocabulary, into an Impl
// (load.cpp).
std::unique_ptr<Tokenizer::Impl> load_impl(const std::filesystem::path& path);
// The same from the files' text; `source` and `config_name` name them in error messages.
std::unique_ptr<Tokenizer::Impl> load_impl_from_text(std::string_view tokenizer_json, std::string_view config_json,
                                                     const std::filesystem::path& source,
                                                     const std::string& config_name);

// Builds the pipeline from a tokenizer.json document and a tokenizer_config.json document (an
// empty object when there is none). source: the file named in messages and by source();
// config_name: the name messages give the config. The tokenizer document is taken by value and
// released part by part as the pipeline is built from it (the model's vocab once the model has
// its own, the added tokens once they are read), so its strings are not all held twice at once.
std::unique_ptr<Tokenizer::Impl> build_impl(nlohmann::json tokenizer, const nlohmann::json& config,
                                            const std::filesystem::path& source, const std::string& config_name);

// A GGUF file's tokenizer.* metadata as the tokenizer.json and tokenizer_config.json documents
// that describe the same tokenizer (gguf_vocab.cpp), so that both formats build the same
// pipeline. Throws specd::Error naming the file and the key.
struct TokenizerDocuments {
  nlohmann::json tokenizer;
  nlohmann::json config;
};
}  // namespace specd::tokenizer

namespace specd::model::gguf {
class File;
}

namespace specd::tokenizer {
TokenizerDocuments gguf_tokenizer_documents(const model::gguf::File& file);

}  // namespace specd::tokenizer

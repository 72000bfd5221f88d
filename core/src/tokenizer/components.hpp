// Internal building blocks of the tokenizer pipeline (not part of the API):
//   text -> added-token split -> Normalizer -> PreTokenizer -> BpeModel -> PostProcessor -> ids
//   ids -> tokens -> Decoder chain -> clean-up -> text
// Every component is immutable after load and safe to use from several threads.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace specd::tokenizer::detail {

// ---- UTF-8 (unicode.cpp) ---------------------------------------------------------------------

// Decodes the code point at text[pos] (valid UTF-8 assumed) and advances pos.
char32_t next_code_point(std::string_view text, size_t& pos);
void append_utf8(std::string& out, char32_t cp);
size_t utf8_length(unsigned char lead);  // bytes of the sequence this lead byte starts (1..4)
// WHATWG "utf-8 decode" with replacement (U+FFFD per maximal subpart), the decoder that
// TextDecoder and Rust's from_utf8_lossy implement.
std::string utf8_lossy(std::string_view bytes);
// While one is alive on a thread, utf8_lossy returns its input unchanged, so the decoders hand
// back a token's bytes as they are, half a code point included (Tokenizer::Impl::token_bytes).
class RawBytesScope {
 public:
  RawBytesScope();
  ~RawBytesScope();
  RawBytesScope(const RawBytesScope&) = delete;
  RawBytesScope& operator=(const RawBytesScope&) = delete;
};
bool is_valid_utf8(std::string_view bytes);
// True for what JavaScript's String.prototype.trim removes (WhiteSpace + LineTerminator).
bool is_js_whitespace(char32_t cp);
std::string_view js_trim_start(std::string_view text);
std::string_view js_trim_end(std::string_view text);
// The GPT-2 byte <-> printable character tables used by ByteLevel.
const std::string& byte_to_unicode(unsigned char byte);  // UTF-8 of the mapped character
int unicode_to_byte(char32_t cp);                        // -1 when cp is not in the table
// \w as the official tokenizers define it for Oniguruma patterns.
bool is_word_char(char32_t cp);

// Transparent hash so unordered_map<std::string, T> can be queried with a string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// ---- Regex (regex.cpp, onig_translate.cpp) ---------------------------------------------------

// A PCRE2 pattern compiled once (JIT where available). Patterns from tokenizer.json are
// written for Oniguruma; from_oniguruma() translates the constructs the official
// implementation gives meaning to (\s = White_Space, \d = Nd, (?i:) folds ASCII only, ...)
// and refuses the ones it does not know.
class Regex {
 public:
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // where: "tokenizer.json: pre_tokenizer Split" — used in error messages.
  static std::unique_ptr<Regex> from_oniguruma(std::string_view pattern, const std::string& where);
  static std::unique_ptr<Regex> from_pcre2(const std::string& pattern, const std::string& where);
  static std::unique_ptr<Regex> literal(std::string_view text, const std::string& where);

  // All matches, left to right, as [begin, end) byte offsets, with JavaScript matchAll
  // semantics (after an empty match the search resumes one character later). text must be
  // valid UTF-8.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;
  std::string replace_all(std::string_view text, std::string_view with) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8*
  std::string literal_;   // non-empty: a plain string pattern, matched without PCRE2
};

// A code point as a PCRE2 escape, \x{HEX} (onig_translate.cpp).
std::string hex_escape(char32_t cp);
// Translates an Oniguruma pattern to PCRE2 syntax (onig_translate.cpp; exposed for tests).
std::string oniguruma_to_pcre2(std::string_view pattern, const std::string& where);
// tokenizer.json's {"String": "..."} (literal) or {"Regex": "..."} (Oniguruma) pattern.
std::unique_ptr<Regex> make_pattern(const nlohmann::json& pattern, const std::string& where);

// ---- Component loading -----------------------------------------------------------------------

// Sequence components may nest (a Sequence inside a Sequence); loading recurses once per level
// and decoding runs the chain recursively, so the nesting is bounded. depth: how many
// Sequences enclose this one. Throws specd::Error naming `where` beyond kMaxSequenceDepth.
inline constexpr int kMaxSequenceDepth = 8;
void check_sequence_depth(int depth, const std::string& where);

// ---- Normalizers (normalize.cpp) -------------------------------------------------------------

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string_view text) const = 0;
};
// Returns nullptr for JSON null. file: for error messages.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& config, const std::string& file, int depth = 0);

// ---- Pre-tokenizers (pretokenize.cpp) --------------------------------------------------------

struct PreToken {
  std::string text;
  bool at_origin = false;  // starts at offset 0 of the original input (Metaspace "first")
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces pieces by their splits, in order.
  virtual void split(std::vector<PreToken>& pieces) const = 0;
  // Whether split may drop text (a Split with behavior Removed); otherwise every byte of the
  // input reaches some piece, printable ASCII other than the space unchanged.
  virtual bool may_remove() const { return false; }
};
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& config, const std::string& file, int depth = 0);

// ---- BPE model (bpe.cpp) ---------------------------------------------------------------------

class BpeModel {
 public:
  BpeModel(const nlohmann::json& config, const std::string& file);
  ~BpeModel();

  // Appends the ids of one pre-token. Characters missing from the vocab become byte tokens
  // (byte_fallback) or the unk token, or are dropped when the model has neither.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  // The longest vocabulary entry in bytes (at least 4, a character): no token covers more of a
  // word.
  size_t max_token_bytes() const { return max_token_bytes_; }
  // At least how many ids encode_word(word) appends, without building its symbols: the bytes of
  // the characters the vocabulary knows, over max_token_bytes() (unknown characters may be
  // dropped or fused into one unk). Linear in the word, no allocation.
  size_t min_tokens(std::string_view word) const;
  // The bytes of `text` that are printable ASCII other than the space (kept as they are by every
  // pre-tokenizer that removes nothing) and single-character tokens of the vocab; 0 for a model
  // with subword affixes.
  size_t known_ascii_bytes(std::string_view text) const;
  // An unk_token that is an added token rather than a vocab entry.
  void resolve_unk(const Vocab& added_tokens);

  const Vocab& vocab() const { return vocab_; }
  std::optional<int32_t> unk_id() const { return unk_id_; }
  bool fuse_unk() const { return fuse_unk_; }

 private:
  struct Symbol;
  // Merges as an open-addressing table keyed by (left id, right id): the hottest lookup of
  // encoding, so no node-based map.
  struct Merge {
    uint64_t key;
    uint32_t rank;
    int32_t result;
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};
  const Merge* find_merge(int32_t left, int32_t right) const;
  void add_merge(int32_t left, int32_t right, uint32_t rank, int32_t result);
  int32_t symbol_id(std::string_view piece) const;
  int32_t char_symbol(std::string_view word, size_t begin, size_t pos, char32_t cp, std::string& scratch) const;
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void split_symbols(std::string_view word, std::vector<Symbol>& symbols) const;
  void emit_symbols(std::string_view word, const std::vector<Symbol>& symbols, std::vector<int32_t>& out) const;
  // The constructor's steps.
  void read_vocab(const nlohmann::json& config, const std::string& where);
  void read_options(const nlohmann::json& config, const std::string& where);
  void index_single_symbols();
  void read_merge_ids(const std::vector<uint8_t>& packed, const std::string& where);
  void read_merges(const nlohmann::json& config, const std::string& where);

  Vocab vocab_;
  std::vector<Merge> merges_;            // size is a power of two
  std::vector<uint64_t> rank_pairs_;     // by rank: (left << 32 | right)
  std::vector<int32_t> rank_results_;    // by rank: id of the merged token
  std::vector<int32_t> small_char_ids_;  // id of each single code point < kSmallChars, or -1
  std::optional<int32_t> unk_id_;
  std::string unk_token_;  // set while unresolved
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  int32_t byte_ids_[256];  // <0xHH> token ids, -1 when absent
  bool all_byte_ids_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  size_t max_token_bytes_ = 4;
  uint64_t serial_;  // identifies this model in the per-thread word cache
};

// ---- Post-processors (tokenizer.cpp) ---------------------------------------------------------

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
};

// ---- Decoders (decode.cpp) -------------------------------------------------------------------

class Decoder {
 public:
  virtual ~Decoder() = default;
  // tokens: the current chain of strings; added: for the top-level decoder, which of the
  // original tokens are added tokens (ByteLevel passes those through verbatim), else nullptr.
  virtual void decode_chain(std::vector<std::string>& tokens, const std::vector<char>* added) const = 0;
};
std::unique_ptr<Decoder> make_decoder(const nlohmann::json& config, const std::string& file);

// transformers' clean_up_tokenization: " ." -> "." and friends, applied in this order with
// JavaScript replaceAll semantics. keep (optional) receives, per input byte, whether it
// survives (clean-up only ever deletes spaces).
std::string clean_up_tokenization(std::string_view text, std::vector<char>* keep = nullptr);

}  // namespace specd::tokenizer::detail

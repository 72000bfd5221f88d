// Tokenizer: the encode and decode pipelines over the loaded components.
#include "tokenizer/tokenizer.hpp"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "specd/error.hpp"
#include "tokenizer/tokenizer_impl.hpp"

namespace specd::tokenizer {

namespace detail {

void AddedTokenTrie::insert(std::string_view content, int32_t token_index) {
  if (content.empty()) return;
  int32_t node = 0;
  for (const char c : content) {
    const auto byte = static_cast<unsigned char>(c);
    auto& children = nodes_[node].children;
    const auto it = std::find_if(children.begin(), children.end(), [&](const auto& ch) { return ch.first == byte; });
    if (it != children.end()) {
      node = it->second;
    } else {
      const auto child = static_cast<int32_t>(nodes_.size());
      children.emplace_back(byte, child);
      nodes_.emplace_back();
      node = child;
    }
  }
  nodes_[node].token = token_index;  // a later token with the same content wins
  first_byte_[static_cast<unsigned char>(content[0])] = true;
}

namespace {

bool word_char_before(std::string_view text, size_t pos) {
  if (pos == 0) return false;
  size_t start = pos - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return is_word_char(next_code_point(text, start));
}

bool word_char_at(std::string_view text, size_t pos) {
  if (pos >= text.size()) return false;
  return is_word_char(next_code_point(text, pos));
}

}  // namespace

void AddedTokenTrie::split(std::string_view text, const std::vector<AddedToken>& tokens, bool match_special,
                           std::vector<Segment>& out) const {
  out.clear();
  size_t start = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    int32_t node = 0;
    int32_t best = -1;
    size_t best_end = 0;
    for (size_t j = i; j < text.size(); ++j) {
      const auto byte = static_cast<unsigned char>(text[j]);
      const auto& children = nodes_[node].children;
      const auto it = std::find_if(children.begin(), children.end(), [&](const auto& ch) { return ch.first == byte; });
      if (it == children.end()) break;
      node = it->second;
      const int32_t t = nodes_[node].token;
      if (t >= 0 && (match_special || !tokens[t].special)) {
        best = t;
        best_end = j + 1;
      }
    }
    if (best >= 0 && tokens[best].single_word && (word_char_before(text, i) || word_char_at(text, best_end))) best = -1;
    if (best < 0) {
      ++i;
      continue;
    }
    if (i > start) out.push_back({start, i, -1});
    out.push_back({i, best_end, best});
    i = start = best_end;
  }
  if (start < text.size()) out.push_back({start, text.size(), -1});
}

void TemplateProcessing::process(std::vector<int32_t>& ids, bool add_special_tokens) const {
  if (!add_special_tokens) return;
  std::vector<int32_t> out;
  out.reserve(ids.size() + 4);
  for (const auto& item : single_) {
    if (item.is_sequence)
      out.insert(out.end(), ids.begin(), ids.end());
    else
      out.insert(out.end(), item.special_ids.begin(), item.special_ids.end());
  }
  ids = std::move(out);
}

namespace {

// lstrip/rstrip: an added token swallows the whitespace next to it.
void apply_strip_flags(std::string_view text, std::vector<AddedTokenTrie::Segment>& segments,
                       const std::vector<AddedToken>& tokens) {
  for (size_t k = 0; k < segments.size(); ++k) {
    if (segments[k].token < 0) continue;
    const AddedToken& token = tokens[segments[k].token];
    if (token.lstrip && k > 0 && segments[k - 1].token < 0) {
      auto& prev = segments[k - 1];
      prev.end = prev.begin + js_trim_end(text.substr(prev.begin, prev.end - prev.begin)).size();
    }
    if (token.rstrip && k + 1 < segments.size() && segments[k + 1].token < 0) {
      auto& next = segments[k + 1];
      next.begin = next.end - js_trim_start(text.substr(next.begin, next.end - next.begin)).size();
    }
  }
}

}  // namespace

}  // namespace detail

}  // namespace specd::tokenizer

// Members of specd::Tokenizer and its Impl are defined in namespace specd (which encloses them).
namespace specd {

using namespace tokenizer;  // NOLINT(google-build-using-namespace): this file implements the tokenizer
using tokenizer::detail::AddedTokenTrie;

std::vector<int32_t> Tokenizer::Impl::encode(std::string_view text, const EncodeOptions& opts) const {
  std::vector<int32_t> ids;
  if (tokenizer::detail::is_valid_utf8(text)) {
    encode_section(text, true, opts.parse_special, opts.max_tokens, ids);
  } else {
    const std::string clean = tokenizer::detail::utf8_lossy(text);
    encode_section(clean, true, opts.parse_special, opts.max_tokens, ids);
  }
  if (post_processor) post_processor->process(ids, opts.add_special_tokens);
  if (opts.max_tokens > 0 && static_cast<int64_t>(ids.size()) > opts.max_tokens)
    throw TokenLimitExceeded(opts.max_tokens);
  return ids;
}

namespace {

// More than `limit` ids already (fuse_unk may still shorten a run of unknowns: checked at the end).
void check_limit(const std::vector<int32_t>& out, int64_t limit, bool may_shrink) {
  if (limit > 0 && !may_shrink && static_cast<int64_t>(out.size()) > limit) throw TokenLimitExceeded(limit);
}

}  // namespace

void Tokenizer::Impl::encode_section(std::string_view text, bool at_origin, bool parse_special, int64_t limit,
                                     std::vector<int32_t>& out) const {
  std::vector<AddedTokenTrie::Segment> sections;
  unnormalized_trie.split(text, added, parse_special, sections);
  tokenizer::detail::apply_strip_flags(text, sections, added);
  std::vector<AddedTokenTrie::Segment> subsections;
  for (const auto& section : sections) {
    if (section.end <= section.begin) continue;
    if (section.token >= 0) {
      out.push_back(added[section.token].id);
      check_limit(out, limit, false);
      continue;
    }
    const bool origin = at_origin && section.begin == 0;
    const std::string_view piece = text.substr(section.begin, section.end - section.begin);
    std::string normalized = normalizer ? normalizer->normalize(piece) : std::string(piece);
    if (normalized.empty()) continue;
    if (normalized_trie.empty()) {
      encode_normalized(normalized, origin, limit, out);
      continue;
    }
    normalized_trie.split(normalized, added, parse_special, subsections);
    tokenizer::detail::apply_strip_flags(normalized, subsections, added);
    for (const auto& sub : subsections) {
      if (sub.end <= sub.begin) continue;
      if (sub.token >= 0)
        out.push_back(added[sub.token].id);
      else
        encode_normalized(std::string_view(normalized).substr(sub.begin, sub.end - sub.begin), origin && sub.begin == 0,
                          limit, out);
      check_limit(out, limit, false);
    }
  }
}

void Tokenizer::Impl::encode_normalized(std::string_view text, bool at_origin, int64_t limit,
                                        std::vector<int32_t>& out) const {
  const size_t first = out.size();
  const bool may_shrink = model->fuse_unk() && model->unk_id();
  auto word = [&](std::string_view piece) {
    // A token covers at most the longest vocabulary entry of the word's bytes: a word that needs
    // more tokens than are left is refused before its symbols are built. (With fuse_unk this
    // call's ids may still shrink: only those before it count.)
    const size_t before = may_shrink ? first : out.size();
    if (limit > 0 && static_cast<int64_t>(before + piece.size() / model->max_token_bytes()) > limit &&
        static_cast<int64_t>(before + model->min_tokens(piece)) > limit)
      throw TokenLimitExceeded(limit);
    model->encode_word(piece, out);
    check_limit(out, limit, may_shrink);
  };
  if (pre_tokenizer) {
    // Before the pre-tokenizer copies the text into pieces (2M words of a 4 MB prompt took 140 MB):
    // the known printable ASCII bytes reach the pieces unchanged, and no token covers more than
    // the longest vocab entry of them.
    if (limit > 0 && !pre_tokenizer->may_remove() &&
        static_cast<int64_t>(out.size() + model->known_ascii_bytes(text) / model->max_token_bytes()) > limit)
      throw TokenLimitExceeded(limit);
    std::vector<tokenizer::detail::PreToken> pieces;
    pieces.push_back({std::string(text), at_origin});
    pre_tokenizer->split(pieces);
    for (const auto& piece : pieces) word(piece.text);
  } else {
    word(text);
  }
  // fuse_unk: a run of unknown tokens becomes one.
  if (model->fuse_unk() && model->unk_id()) {
    const int32_t unk = *model->unk_id();
    size_t w = first;
    for (size_t r = first; r < out.size(); ++r) {
      if (out[r] == unk && w > first && out[w - 1] == unk) continue;
      out[w++] = out[r];
    }
    out.resize(w);
  }
}

std::string Tokenizer::Impl::decode_raw(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> pieces;
  std::vector<char> added_mask;
  pieces.reserve(ids.size());
  added_mask.reserve(ids.size());
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= tokens.size() || !has_token[id]) continue;
    if (skip_special_tokens && special[id]) continue;
    pieces.push_back(tokens[id]);
    added_mask.push_back(added_content[id]);
  }
  std::string text;
  if (decoder) {
    decoder->decode_chain(pieces, &added_mask);
    for (const auto& p : pieces) text += p;
  } else {
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (i > 0) text += ' ';
      text += pieces[i];
    }
  }
  return text;
}

std::string Tokenizer::Impl::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens.size() || !has_token[id] || special[id]) return {};
  // Decoders strip a leading space from the first token only: the second copy of [id, id] is
  // the token as it reads mid-sequence.
  const tokenizer::detail::RawBytesScope raw;
  const int32_t pair[2] = {id, id};
  const std::string one = decode_raw(std::span<const int32_t>(pair, 1), false);
  std::string two = decode_raw(pair, false);
  if (two.size() >= one.size() && two.compare(0, one.size(), one) == 0) return two.substr(one.size());
  return one;
}

std::string Tokenizer::Impl::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string text = decode_raw(ids, skip_special_tokens);
  if (clean_up_spaces) text = tokenizer::detail::clean_up_tokenization(text);
  return text;
}

// ---- public API ------------------------------------------------------------------------------

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& path) {
  return std::unique_ptr<Tokenizer>(new Tokenizer(load_impl(path)));
}

std::unique_ptr<Tokenizer> Tokenizer::from_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                                                const std::string& name) {
  return std::unique_ptr<Tokenizer>(
      new Tokenizer(load_impl_from_text(tokenizer_json, tokenizer_config_json, name, "tokenizer_config.json")));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& opts) const {
  return impl_->encode(text, opts);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->decode(ids, skip_special_tokens);
}

int32_t Tokenizer::vocab_size() const {
  return static_cast<int32_t>(impl_->tokens.size());
}
std::optional<int32_t> Tokenizer::bos_id() const {
  return impl_->bos;
}
std::optional<int32_t> Tokenizer::eos_id() const {
  return impl_->eos;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto it = impl_->added_ids.find(token); it != impl_->added_ids.end()) return it->second;
  if (const auto it = impl_->model->vocab().find(token); it != impl_->model->vocab().end()) return it->second;
  return std::nullopt;
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->tokens.size() || !impl_->has_token[id])
    throw Error(ErrorCode::kInvalidArgument, "tokenizer " + impl_->source.string() + ": no token has id " +
                                                 std::to_string(id) + " (vocab size " + std::to_string(vocab_size()) +
                                                 ")");
  return impl_->tokens[id];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->tokens.size() && impl_->has_token[id] && impl_->special[id];
}

const std::filesystem::path& Tokenizer::source() const {
  return impl_->source;
}

const ChatTemplateConfig& Tokenizer::chat_template_config() const {
  return impl_->chat;
}

}  // namespace specd

// IncrementalDetokenizer: streaming decode whose deltas concatenate to the full decode.
//
// Two stages.
// 1. The decoder chain, by difference: the text of ids_ (a short context plus the new ids) is
//    decoded as a whole and the part beyond what was already passed on is the delta. Trailing
//    U+FFFD is held back (an incomplete UTF-8 sequence that a later byte token may complete).
//    When everything is passed on, the context shrinks to the last ids that produced text: a
//    non-empty decode means start-of-text effects (Metaspace/Strip removing the first space)
//    are settled inside the context, and no pending bytes cross the boundary, so decoding from
//    the context on continues the full decode exactly.
// 2. clean_up_tokenization_spaces over the raw text stream. Clean-up only deletes spaces, and a
//    deletion depends on at most the next five characters; text is passed on up to the last
//    position no pattern can straddle (see safe_cut).
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "specd/error.hpp"
#include "tokenizer/tokenizer_impl.hpp"

namespace specd::tokenizer {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

size_t trailing_replacement_bytes(std::string_view text) {
  size_t n = 0;
  while (text.size() - n >= kReplacement.size() &&
         text.substr(text.size() - n - kReplacement.size(), kReplacement.size()) == kReplacement)
    n += kReplacement.size();
  return n;
}

// Every pattern of clean-up (" .", " ' ", " n't", ... and the matches an earlier replacement
// creates, like "  ' s" -> " 's" -> "'s") is a run whose adjacent pairs start with a space or
// a quote, or are n/v/r right after a space or quote. A cut between two characters where the
// left one is none of these cannot split a match, so both sides clean up independently.
bool safe_cut(char left, char before_left) {
  if (left == ' ' || left == '\'') return false;
  if ((left == 'n' || left == 'v' || left == 'r') && (before_left == ' ' || before_left == '\'')) return false;
  return true;
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, bool skip_special_tokens,
                                               std::span<const int32_t> prompt_ids)
    : tok_(tok), skip_special_(skip_special_tokens) {
  if (prompt_ids.empty()) return;
  const Tokenizer::Impl& impl = tok_.impl();
  const std::string full = impl.decode_raw(prompt_ids, skip_special_);
  // Prefer a short suffix of the prompt as context: one whose own decode is non-empty and has
  // no replacement character at either end (so it starts and ends on character boundaries).
  const size_t n = prompt_ids.size();
  const size_t lowest = n > 32 ? n - 32 : 0;
  for (size_t s = n; s-- > lowest;) {
    const std::string suffix = impl.decode_raw(prompt_ids.subspan(s), skip_special_);
    if (suffix.empty()) continue;
    if (suffix.starts_with(kReplacement) || trailing_replacement_bytes(suffix) != 0) break;
    ids_.assign(prompt_ids.begin() + static_cast<std::ptrdiff_t>(s), prompt_ids.end());
    window_ = ids_.size();
    emitted_ = suffix.size();
    emitted_text_ = suffix;
    if (impl.clean_up_spaces) clean_up_stream(full, false);
    return;
  }
  ids_.assign(prompt_ids.begin(), prompt_ids.end());
  window_ = ids_.size();
  emitted_ = full.size() - trailing_replacement_bytes(full);
  emitted_text_ = full.substr(0, emitted_);
  if (impl.clean_up_spaces) clean_up_stream(emitted_text_, false);
}

std::string IncrementalDetokenizer::push(std::span<const int32_t> ids) {
  const Tokenizer::Impl& impl = tok_.impl();
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  const std::string raw = impl.decode_raw(ids_, skip_special_);
  if (raw.compare(0, emitted_text_.size(), emitted_text_) != 0)
    throw Error(ErrorCode::kInternal, "IncrementalDetokenizer: the decode of " + impl.source.string() +
                                          " changed text already emitted (decoder chain not streamable)");
  const size_t stable = std::max(emitted_, raw.size() - trailing_replacement_bytes(raw));
  std::string delta = raw.substr(emitted_, stable - emitted_);
  emitted_ = stable;
  if (stable == raw.size() && window_ < ids_.size()) {
    // Everything is out: the ids since the last boundary become the whole context if they
    // produce text on their own.
    std::string context = impl.decode_raw(std::span<const int32_t>(ids_).subspan(window_), skip_special_);
    if (!context.empty()) {
      ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(window_));
      emitted_ = context.size();
      emitted_text_ = std::move(context);
    } else {
      emitted_text_ = raw;
    }
    window_ = ids_.size();
  } else {
    emitted_text_ = raw.substr(0, emitted_);
  }
  if (!impl.clean_up_spaces) return delta;
  return clean_up_stream(delta, false);
}

std::string IncrementalDetokenizer::flush() {
  const Tokenizer::Impl& impl = tok_.impl();
  const std::string raw = impl.decode_raw(ids_, skip_special_);
  std::string delta = raw.size() > emitted_ ? raw.substr(emitted_) : std::string();
  emitted_ = raw.size();
  emitted_text_ = raw;
  if (!impl.clean_up_spaces) return delta;
  return clean_up_stream(delta, true);
}

std::string IncrementalDetokenizer::clean_up_stream(const std::string& raw, bool final_flush) {
  pending_clean_ += raw;
  size_t cut = 0;
  if (final_flush) {
    cut = pending_clean_.size();
  } else {
    for (size_t p = pending_clean_.size(); p > 0; --p) {
      if (p < pending_clean_.size() && (static_cast<unsigned char>(pending_clean_[p]) & 0xC0) == 0x80) continue;
      const char before = p >= 2 ? pending_clean_[p - 2] : prev_clean_char_;
      if (safe_cut(pending_clean_[p - 1], before)) {
        cut = p;
        break;
      }
    }
  }
  if (cut == 0) return {};
  std::string out = detail::clean_up_tokenization(std::string_view(pending_clean_).substr(0, cut));
  prev_clean_char_ = pending_clean_[cut - 1];
  pending_clean_.erase(0, cut);
  return out;
}

}  // namespace specd::tokenizer

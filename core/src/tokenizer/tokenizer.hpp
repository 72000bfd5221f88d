// The tokenizer's private side: the public specd::Tokenizer (specd/tokenizer.hpp) under its
// internal name, and the incremental detokenizer the output processor streams text with.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "specd/tokenizer.hpp"

namespace specd::tokenizer {

using specd::ChatTemplateConfig;
using specd::EncodeOptions;
using specd::Tokenizer;

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
  std::string clean_up_stream(const std::string& raw, bool final_flush);

  const Tokenizer& tok_;
  bool skip_special_;
  // Ids from the context start on. ids_[0, window_) is context whose text was already passed
  // on; its decode is non-empty, so start-of-text effects (a stripped leading space) are
  // settled inside it.
  std::vector<int32_t> ids_;
  size_t window_ = 0;
  size_t emitted_ = 0;        // bytes of decode(ids_) (before clean-up) already passed on
  std::string emitted_text_;  // those bytes, to check the decode only ever grows
  // clean_up_tokenization_spaces runs over the raw stream; text a later character could
  // still change waits here.
  std::string pending_clean_;
  char prev_clean_char_ = '\0';  // last raw character already cleaned and passed on
};

}  // namespace specd::tokenizer

// RequestValidator: every check a request passes before it enters the engine, with the limits
// they apply in one place: the vocabulary, the context length (max_model_len), kMaxChoices and
// kMaxSpeculativeTokens (specd/request.hpp; config and the server parse against the same ones).
//
// A request that fails a check is never an exception: Engine::add_request reports it as a
// finished output with FinishReason::kError and the message below. Prompt scoring
// (Engine::prompt_logprobs) is a direct call, so its check throws.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "specd/request.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd {

class RequestValidator {
 public:
  // The tokenizer must outlive the validator; vocab_size is the model's.
  RequestValidator(const tokenizer::Tokenizer& tok, int64_t vocab_size, int64_t max_model_len)
      : tok_(tok), vocab_(vocab_size), max_model_len_(max_model_len) {}

  struct Verdict {
    std::vector<int32_t> prompt;  // the prompt's token ids (empty when tokenizing failed)
    std::string error;            // "" = the request may run
    bool ok() const { return error.empty(); }
  };
  // Sampling parameters, the prompt (tokenized when given as text), n and the per-request
  // speculative options. The A/B arm is checked where the arms are (speculative/).
  Verdict check(const Request& request) const;

  // Throws specd::Error(kInvalidArgument) unless `ids` are 2..max_model_len tokens of the vocabulary.
  void check_scoring(std::span<const int32_t> ids) const;

  int64_t max_model_len() const { return max_model_len_; }

 private:
  std::string check_tokens(std::span<const int32_t> ids, const char* what) const;

  const tokenizer::Tokenizer& tok_;
  int64_t vocab_;
  int64_t max_model_len_;
};

}  // namespace specd

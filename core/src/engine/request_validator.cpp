#include "engine/request_validator.hpp"

#include "specd/error.hpp"

namespace specd {

std::string RequestValidator::check_tokens(std::span<const int32_t> ids, const char* what) const {
  for (int32_t t : ids) {
    if (t < 0 || t >= vocab_)
      return std::string(what) + " token id " + std::to_string(t) + " is outside the vocabulary [0, " +
             std::to_string(vocab_) + ")";
  }
  return "";
}

RequestValidator::Verdict RequestValidator::check(const Request& request) const {
  Verdict v;
  if (std::string err = validate_sampling_params(request.sampling); !err.empty()) {
    v.error = "invalid sampling parameters: " + err;
    return v;
  }
  try {
    v.prompt = request.prompt_ids.empty() ? tok_.encode(request.prompt) : request.prompt_ids;
  } catch (const Error& e) {
    v.error = std::string("cannot tokenize the prompt: ") + e.what();
    return v;
  }
  const auto n = static_cast<int64_t>(v.prompt.size());
  if (n == 0) {
    v.error = "the prompt is empty";
  } else if (std::string err = check_tokens(v.prompt, "prompt"); !err.empty()) {
    v.error = std::move(err);
  } else if (n >= max_model_len_) {
    v.error = "the prompt has " + std::to_string(n) + " tokens but the context length (max_model_len) is " +
              std::to_string(max_model_len_) + ", which leaves no room to generate";
  } else if (const auto& k = request.speculative.num_speculative_tokens; k && (*k < 0 || *k > kMaxSpeculativeTokens)) {
    v.error = "speculative.num_speculative_tokens must be in [0, " + std::to_string(kMaxSpeculativeTokens) + "], got " +
              std::to_string(*k);
  } else if (request.n < 1 || request.n > kMaxChoices || (request.n > 1 && request.sampling.max_tokens == 0)) {
    v.error = "n must be in [1, " + std::to_string(kMaxChoices) + "] (1 when max_tokens is 0), got " +
              std::to_string(request.n);
  } else {
    for (const auto& [token, bias] : request.sampling.logit_bias) {
      if (token < 0 || token >= vocab_) {
        v.error = "logit_bias names token id " + std::to_string(token) + " outside the vocabulary [0, " +
                  std::to_string(vocab_) + ")";
        break;
      }
    }
  }
  return v;
}

void RequestValidator::check_scoring(std::span<const int32_t> ids) const {
  const auto n = static_cast<int64_t>(ids.size());
  if (n < 2) throw Error(ErrorCode::kInvalidArgument, "scoring needs at least 2 tokens, got " + std::to_string(n));
  if (n > max_model_len_) {
    throw Error(ErrorCode::kInvalidArgument, "cannot score " + std::to_string(n) + " tokens: the context length is " +
                                                 std::to_string(max_model_len_));
  }
  for (int32_t t : ids) {
    if (t < 0 || t >= vocab_)
      throw Error(ErrorCode::kInvalidArgument, "token id " + std::to_string(t) + " is outside the vocabulary");
  }
}

}  // namespace specd

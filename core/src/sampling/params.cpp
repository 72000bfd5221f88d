#include <cmath>
#include <string>

#include "specd/request.hpp"

namespace specd {

std::string validate_sampling_params(const SamplingParams& p) {
  auto num = [](double v) {
    std::string s = std::to_string(v);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  };
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f) {
    return "temperature must be >= 0, got " + num(p.temperature);
  }
  if (p.top_k < -1) return "top_k must be -1, 0 (disabled) or >= 1, got " + std::to_string(p.top_k);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return "top_p must be in (0, 1], got " + num(p.top_p);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return "min_p must be in [0, 1], got " + num(p.min_p);
  if (p.max_tokens < 0) return "max_tokens must be >= 0, got " + std::to_string(p.max_tokens);
  if (p.max_tokens == 0 && p.prompt_logprobs < 0)
    return "max_tokens 0 generates nothing: it needs prompt_logprobs (echo with logprobs) to score the prompt";
  if (p.min_tokens < 0) return "min_tokens must be >= 0, got " + std::to_string(p.min_tokens);
  if (p.min_tokens > p.max_tokens && p.max_tokens > 0)
    return "min_tokens (" + std::to_string(p.min_tokens) + ") must not exceed max_tokens (" +
           std::to_string(p.max_tokens) + ")";
  if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f))
    return "presence_penalty must be in [-2, 2], got " + num(p.presence_penalty);
  if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f))
    return "frequency_penalty must be in [-2, 2], got " + num(p.frequency_penalty);
  if (!(p.repetition_penalty > 0.0f && p.repetition_penalty <= 2.0f))
    return "repetition_penalty must be in (0, 2], got " + num(p.repetition_penalty);
  for (const auto& [token, bias] : p.logit_bias) {
    if (!(bias >= -100.0f && bias <= 100.0f)) return "logit_bias values must be in [-100, 100], got " + num(bias);
  }
  if (p.logprobs < -1 || p.logprobs > kMaxLogprobs)
    return "logprobs must be in [0, " + std::to_string(kMaxLogprobs) + "], got " + std::to_string(p.logprobs);
  if (p.prompt_logprobs < -1 || p.prompt_logprobs > kMaxLogprobs)
    return "prompt_logprobs must be in [0, " + std::to_string(kMaxLogprobs) + "], got " +
           std::to_string(p.prompt_logprobs);
  for (const std::string& s : p.stop) {
    if (s.empty()) return "stop strings must not be empty";
  }
  for (int32_t id : p.stop_token_ids) {
    if (id < 0) return "stop_token_ids must be >= 0, got " + std::to_string(id);
  }
  return "";
}

std::string_view finish_reason_name(FinishReason reason) noexcept {
  switch (reason) {
    case FinishReason::kNone:
      return "none";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kError:
      return "error";
    case FinishReason::kAbort:
      return "abort";
  }
  return "none";
}

}  // namespace specd

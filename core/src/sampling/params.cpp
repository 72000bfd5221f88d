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
  if (p.max_tokens < 1) return "max_tokens must be >= 1, got " + std::to_string(p.max_tokens);
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
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kError: return "error";
    case FinishReason::kAbort: return "abort";
  }
  return "none";
}

}  // namespace specd

// Requests and their streamed outputs: the types of the embedding API (engine.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specd {

// How one request chooses its tokens. Semantics follow vLLM (docs/generation.md):
// logits / temperature → min-p → top-k → top-p → renormalize → draw with the request's
// seeded Philox stream. temperature == 0 is greedy (argmax; top-k/top-p/min-p ignored).
struct SamplingParams {
  float temperature = 1.0f;  // >= 0
  int32_t top_k = 0;         // keep the k most likely tokens; 0 or -1 = all
  float top_p = 1.0f;        // (0, 1]: smallest set whose probability reaches top_p
  float min_p = 0.0f;        // [0, 1]: drop tokens below min_p * (max probability)
  // Seed of the request's random stream; unset = derived from the engine's model.seed and the
  // request id (reproducible across runs of the same request sequence).
  std::optional<uint64_t> seed;
  int32_t max_tokens = 16;                // >= 1: generated tokens, stop token included
  std::vector<int32_t> stop_token_ids;    // finish (reason stop) after emitting one of these
  std::vector<std::string> stop;          // stop strings; may span tokens; excluded from text
  bool ignore_eos = false;                // keep generating past the model's EOS token(s)
};

// "" when valid, else a message naming the field, e.g. "top_p must be in (0, 1], got 0".
std::string validate_sampling_params(const SamplingParams& params);

using RequestId = uint64_t;

// Per-request control of speculative decoding (the engine's `speculative` section sets the
// defaults; without that section these are ignored).
struct SpeculativeOptions {
  bool enabled = true;
  // Proposal length k for this request, in [0, 32]; unset = speculative.num_speculative_tokens.
  // 0 is the same as enabled = false.
  std::optional<int32_t> num_speculative_tokens;
  // The A/B arm (speculative.arms) that serves this request; "" = assigned by `user`,
  // else by a seeded draw. An unknown name fails the request.
  std::string arm;
  // The end user (OpenAI `user`): requests of the same user get the same A/B arm (sticky).
  std::string user;
};

struct Request {
  std::string prompt;               // tokenized with the model's tokenizer (special tokens added)
  std::vector<int32_t> prompt_ids;  // when non-empty, used as is instead of `prompt`
  SamplingParams sampling;
  SpeculativeOptions speculative;
};

enum class FinishReason {
  kNone,    // still running
  kStop,    // EOS, a stop token id or a stop string
  kLength,  // max_tokens or the model's context length reached
  kError,   // the request failed (see RequestOutput::error); the engine carries on
  kAbort,   // Engine::abort
};
std::string_view finish_reason_name(FinishReason reason) noexcept;  // "stop", "length", ...

// What one step produced for one request.
struct RequestOutput {
  RequestId id = 0;
  std::vector<int32_t> new_token_ids;  // tokens emitted by this step
  std::string text_delta;              // complete UTF-8 text newly final (stop strings held back)
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;                   // when finish_reason == kError
  int32_t num_prompt_tokens = 0;
  int32_t num_generated_tokens = 0;    // total so far
  // Speculative decoding of this request so far: tokens proposed and accepted, and the
  // steps that verified a draft (acceptance rate = accepted / draft).
  int32_t num_draft_tokens = 0;
  int32_t num_accepted_tokens = 0;
  int32_t num_spec_steps = 0;
  // The A/B arm serving the request: an index into EngineInfo::arms; -1 = none (speculation
  // off for the request, or the request failed before it was assigned).
  int32_t arm = -1;
};

}  // namespace specd

// Requests and their streamed outputs: the types of the embedding API (engine.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specd {

// How one request chooses its tokens. Semantics follow vLLM (docs/generation.md):
// logits → logit_bias, min_tokens (stop tokens masked) → repetition / frequency / presence
// penalties → / temperature → min-p → top-k → top-p → renormalize → draw with the request's
// seeded Philox stream. temperature == 0 is greedy (argmax of the penalized logits; top-k/top-p/
// min-p ignored). Penalties count the tokens generated before the position being sampled,
// speculative drafts before it included, exactly as plain decoding would.
struct SamplingParams {
  float temperature = 1.0f;  // >= 0
  int32_t top_k = 0;         // keep the k most likely tokens; 0 or -1 = all
  float top_p = 1.0f;        // (0, 1]: smallest set whose probability reaches top_p
  float min_p = 0.0f;        // [0, 1]: drop tokens below min_p * (max probability)
  // Seed of the request's random stream; unset = derived from the engine's model.seed and the
  // request id (reproducible across runs of the same request sequence).
  std::optional<uint64_t> seed;
  // >= 1: generated tokens, stop token included. 0: no token is generated; the request only
  // scores its prompt (with prompt_logprobs) and finishes with reason length.
  int32_t max_tokens = 16;
  int32_t min_tokens = 0;                             // EOS and stop_token_ids are masked before this many
  std::vector<int32_t> stop_token_ids;                // finish (reason stop) after emitting one of these
  std::vector<std::string> stop;                      // stop strings; may span tokens
  bool include_stop_str_in_output = false;            // keep the stop string that ended the text
  bool ignore_eos = false;                            // keep generating past the model's EOS token(s)
  bool skip_special_tokens = true;                    // leave special tokens out of the text
  float presence_penalty = 0.0f;                      // [-2, 2]: minus this once for a generated token
  float frequency_penalty = 0.0f;                     // [-2, 2]: minus this per generated occurrence
  float repetition_penalty = 1.0f;                    // (0, 2]: logits of prompt or generated tokens / (> 0) or * (< 0)
  std::vector<std::pair<int32_t, float>> logit_bias;  // added to the token's logit
  // Log-probabilities from the target model's distribution (log-softmax of its logits, before any
  // of the transforms above, as vLLM's default): -1 = none; N >= 0 = each token's own and the N
  // most likely. logprobs covers generated tokens, prompt_logprobs the prompt (token 0 has none).
  int32_t logprobs = -1;
  int32_t prompt_logprobs = -1;
};

// The most alternatives logprobs / prompt_logprobs may ask for (vLLM's and OpenAI's limit).
inline constexpr int32_t kMaxLogprobs = 20;
// The most draft tokens any request, arm or engine may ask for per step (num_speculative_tokens).
inline constexpr int32_t kMaxSpeculativeTokens = 32;
// The most choices one request may ask for (Request::n; OpenAI's `n`, vLLM's `best_of`).
inline constexpr int32_t kMaxChoices = 64;

// "" when valid, else a message naming the field, e.g. "top_p must be in (0, 1], got 0".
std::string validate_sampling_params(const SamplingParams& params);

using RequestId = uint64_t;

// Per-request control of speculative decoding (the engine's `speculative` section sets the
// defaults; without that section these are ignored).
struct SpeculativeOptions {
  bool enabled = true;
  // Proposal length k for this request, in [0, kMaxSpeculativeTokens]; unset = speculative.num_speculative_tokens.
  // 0 is the same as enabled = false.
  std::optional<int32_t> num_speculative_tokens;
  // Dynamic speculation for this request (the policy picks 0..k drafts every step); unset =
  // speculative.dynamic. false = exactly k drafts every step (what the proposer finds).
  std::optional<bool> dynamic;
  // The A/B arm (speculative.arms) that serves this request; "" = assigned by `user`,
  // else by a seeded draw. An unknown name fails the request.
  std::string arm;
  // The end user (OpenAI `user`): requests of the same user get the same A/B arm (sticky).
  std::string user;
  // Who owns this request's text (ABI 1.4 specd_sequence.tenant): requests with the same
  // non-empty tenant may draft from each other's outputs when a proposer keeps them (suffix
  // decoding with share_across_requests: false); "" = nobody else. The server sets it from the
  // API key and `user` (docs/server.md).
  std::string tenant;
};

// Structured output (docs/structured-output.md): the generated text must be a sentence of the
// constraint; every token it forbids is masked, at each speculative position too, and the
// choice finishes (reason stop) where the constraint's text is complete and nothing may follow.
struct StructuredOutput {
  enum class Kind {
    kNone,
    kJsonObject,  // any JSON object
    kJsonSchema,  // spec: a JSON Schema (text)
    kRegex,       // spec: a regular expression the whole text matches
    kChoice,      // one of `choices`, exactly
    kGrammar,     // spec: a GBNF grammar (start rule `root`)
  };
  Kind kind = Kind::kNone;
  std::string spec;
  std::vector<std::string> choices;
  // Literal text the output must start and end with around the constrained part (e.g. a
  // tool-call block's tags, for tool_choice "required" or a named function).
  std::string prefix, suffix;
  bool active() const { return kind != Kind::kNone; }
};

// How generated text carries tool calls (output/tool_calls.hpp); kNone leaves text as it is.
enum class ToolCallFormat { kNone, kHermes, kLlama3Json };

struct Request {
  std::string prompt;               // tokenized with the model's tokenizer (special tokens added)
  std::vector<int32_t> prompt_ids;  // when non-empty, used as is instead of `prompt`
  SamplingParams sampling;
  SpeculativeOptions speculative;
  // Choices generated from the one prompt, each with its own seed stream (seed + index); the
  // prompt is prefilled once and its KV blocks shared. [1, kMaxChoices].
  int32_t n = 1;
  ToolCallFormat tool_calls = ToolCallFormat::kNone;
  StructuredOutput structured = {};
};

enum class FinishReason {
  kNone,    // still running
  kStop,    // EOS, a stop token id or a stop string
  kLength,  // max_tokens or the model's context length reached
  kError,   // the request failed (see RequestOutput::error); the engine carries on
  kAbort,   // Engine::abort
};
std::string_view finish_reason_name(FinishReason reason) noexcept;  // "stop", "length", ...

// A token's log-probability and, when asked for, the most likely alternatives at its position.
struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};
struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;  // most likely first (ties: lower id)
};

struct ToolCall {
  int32_t index = 0;  // order of the call in the choice's output
  std::string name;
  std::string arguments;  // JSON text
};

// What one step produced for one choice of one request.
struct RequestOutput {
  RequestId id = 0;
  int32_t index = 0;                   // the choice (0 .. n-1)
  std::vector<int32_t> new_token_ids;  // tokens emitted by this step
  std::string text_delta;              // complete UTF-8 text newly final (stop strings held back)
  // text_delta[0, token_text_ends[i]) is final once new token i is known (one entry per token).
  std::vector<uint32_t> token_text_ends;
  std::vector<ToolCall> tool_calls;            // tool calls completed this step (their text is not in text_delta)
  std::vector<TokenLogprobs> logprobs;         // one per new token (sampling.logprobs >= 0)
  std::vector<TokenLogprobs> prompt_logprobs;  // prompt tokens 1.., once (sampling.prompt_logprobs >= 0)
  // The whole request has ended: every choice finished (for n = 1: this one). A choice's own end
  // is finish_reason != kNone.
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;  // when finish_reason == kError
  int32_t num_prompt_tokens = 0;
  int32_t num_cached_tokens = 0;     // prompt tokens whose KV came from the prefix cache
  int32_t num_generated_tokens = 0;  // total so far
  // Speculative decoding of this request so far: tokens proposed and accepted, and the
  // steps that verified a draft (acceptance rate = accepted / draft).
  int32_t num_draft_tokens = 0;
  int32_t num_accepted_tokens = 0;
  int32_t num_spec_steps = 0;
  // Per draft position: steps that drafted a token there and that accepted it (set when the
  // choice finishes).
  std::vector<int32_t> drafted_at;
  std::vector<int32_t> accepted_at;
  // The A/B arm serving the request: an index into EngineInfo::arms; -1 = none (speculation
  // off for the request, or the request failed before it was assigned).
  int32_t arm = -1;
};

}  // namespace specd

// OpenAI response JSON from a request's RequestOutputs (docs/server.md): the whole response, or
// the stream's chunks, for every choice (n), with logprobs in the completions or chat shape, echo,
// tool calls (whole in a response; as deltas in a stream), finish reasons ("tool_calls" when a
// choice called tools), and usage with the request's speculative-decoding statistics and A/B arm.
//
//   ResponseBuilder b(g, meta, tok, options);
//   for each output:  stream ? b.stream(out, chunks) : b.add(out);
//   non-streaming:    b.response();   streaming, at the end: b.usage_chunk() when asked for
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "server/openai_api.hpp"
#include "specd/request.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::server {

struct ResponseMeta {
  std::string id;  // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;
  std::string model;
  std::string system_fingerprint;  // system_fingerprint(cfg); "" leaves the field out
};

// OpenAI's system_fingerprint: "specd-<version>-<16 hex>", the hex an FNV-1a hash of what decides
// the outputs (model path and dtypes, the speculative section, the verifiers); it changes when
// those do, so a client can tell two backends apart. The same config gives the same value.
std::string system_fingerprint(const config::EngineConfig& cfg);

struct ResponseOptions {
  bool token_by_token = false;  // server.stream_token_by_token: one event per token
  bool speculative = false;     // the engine speculates: usage carries its statistics
  std::string arm;              // the serving A/B arm: usage.arm (an extension); "" = none
  // Completions with a list of prompts: the first choice index of this prompt (i * n); its
  // choices are numbered from there.
  int32_t first_index = 0;
};

// One completion response for a list of prompts (their builders' responses in prompt order): the
// choices one after the other, usage summed (acceptance_rate recomputed).
nlohmann::json merge_responses(const std::vector<nlohmann::json>& responses);
// The usage of several prompts' responses summed, as merge_responses sums it.
nlohmann::json merge_usage(const std::vector<nlohmann::json>& usages);

class ResponseBuilder {
 public:
  // The tokenizer names logprob tokens; it must outlive the builder.
  ResponseBuilder(const GenerationRequest& request, ResponseMeta meta, const tokenizer::Tokenizer& tok,
                  ResponseOptions options);

  // Non-streaming: collect an output.
  void add(const RequestOutput& out);
  nlohmann::json response() const;

  // Streaming: the chunks an output makes (zero or more), appended to `chunks`.
  void stream(const RequestOutput& out, std::vector<nlohmann::json>& chunks);
  // The final usage-only chunk (stream_options.include_usage).
  nlohmann::json usage_chunk() const;

 private:
  struct Choice {
    std::string text;
    std::vector<TokenLogprobs> logprobs;
    std::vector<int32_t> tokens;
    std::vector<ToolCall> tool_calls;
    FinishReason finish = FinishReason::kNone;
    int32_t generated = 0;
    int32_t drafts = 0, accepted = 0, spec_steps = 0;
    std::vector<int32_t> drafted_at, accepted_at;
    bool started = false;  // streaming: the first chunk (role, echo) went out
  };
  Choice& choice(const RequestOutput& out);
  void count(Choice& c, const RequestOutput& out);
  nlohmann::json usage() const;
  std::string finish_reason(const Choice& c) const;
  std::string token_text(int32_t id, std::vector<int32_t> before) const;
  std::vector<int32_t> context(const Choice& c) const;
  std::string call_id(const ToolCall& call, int32_t choice) const;
  // before: the tokens preceding the first entry (the prompt's when with_prompt is false).
  nlohmann::json logprobs_json(const std::vector<TokenLogprobs>& lps, size_t first_offset, bool with_prompt,
                               std::vector<int32_t> before) const;
  nlohmann::json chunk(int32_t index, nlohmann::json delta_or_text, const nlohmann::json& logprobs,
                       const std::string& finish) const;
  void stream_piece(Choice& c, int32_t index, const std::string& text, const std::vector<TokenLogprobs>& lps,
                    const std::vector<ToolCall>& calls, bool last, std::vector<nlohmann::json>& chunks);

  GenerationRequest req_;  // prompt and options (not the sampling details)
  ResponseMeta meta_;
  const tokenizer::Tokenizer& tok_;
  ResponseOptions opts_;
  std::vector<Choice> choices_;
  std::vector<TokenLogprobs> prompt_logprobs_;  // choice 0's, for echo
  int32_t prompt_tokens_ = 0;
  int32_t cached_tokens_ = 0;  // of the prompt, from the prefix cache (usage.prompt_tokens_details)
  size_t text_offset_ = 0;     // completions logprobs: characters before the first generated token
};

}  // namespace specd::server

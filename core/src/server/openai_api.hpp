// The OpenAI-compatible request shapes (docs/server.md): /v1/completions and /v1/chat/completions
// bodies parsed into typed requests with vLLM's conventions — unknown top-level fields are ignored
// with one warning per field name, max_tokens defaults to (and is capped by) the room the context
// leaves, generation_config.json supplies sampling defaults — and every OpenAI parameter specd
// cannot honour exactly is a 400 naming it. No HTTP here; http_server.cpp does the transport and
// openai_response.hpp the response JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "specd/request.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::server {

class ChatPrompter;

// An error answered with the OpenAI error shape
// {"error": {"message", "type", "param", "code"}} and this HTTP status.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string type, std::string param = "", std::string code = "")
      : std::runtime_error(message),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}
  int status;
  std::string type;   // invalid_request_error, authentication_error, ...
  std::string param;  // the offending field, "" = null
  std::string code;   // machine-readable code, "" = null
};

ApiError bad_request(const std::string& message, const std::string& param = "");
nlohmann::json error_body(const ApiError& e);

// The `speculative` extension object: per-request speculative decoding options. Absent fields
// keep the engine's configured behaviour.
struct SpeculativeOptions {
  std::optional<bool> enabled;
  std::optional<int32_t> num_speculative_tokens;  // [0, 32]; 0 = decode without drafts
  std::optional<bool> dynamic;                    // the policy picks 0..k drafts per step
  std::string arm;                                // the A/B arm to serve with ("" = assigned); see resolve_arm()
};

// Sampling defaults of the model (generation_config.json) for fields a request omits.
struct SamplingDefaults {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k, max_tokens;
};

// What the server needs to validate a request.
struct ApiLimits {
  std::string model_name;         // requests naming another model get 404
  int64_t max_model_len = 0;      // context length
  int32_t max_prompt_tokens = 0;  // effective limit (already min'ed with max_model_len - 1)
  int32_t max_tokens_limit = 0;   // operator cap on max_tokens (0 = the context)
  int64_t vocab_size = 0;
  SamplingDefaults defaults;
  std::vector<std::string> arms;  // the engine's A/B arms (EngineInfo::arms)
  // server.allow_unsupported_tools: serve `tools` the chat template does not render or no
  // tool-call parser reads (else 400).
  bool allow_unsupported_tools = false;
  // Chat template renders: server.template_timeout_ms (0 = none), and the flag that cancels a
  // render in progress (the server's shutdown).
  int64_t template_timeout_ms = 0;
  const std::atomic<bool>* cancel_renders = nullptr;
};

struct GenerationRequest {
  bool chat = false;
  std::vector<int32_t> prompt_ids;  // tokenized prompt (chat: template applied)
  std::string prompt_text;          // completions: what echo returns
  SamplingParams sampling;
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool continuous_usage = false;  // stream_options.continuous_usage_stats
  bool echo = false;              // completions: the prompt (and its logprobs) before the text
  bool want_logprobs = false;     // completions logprobs: N / chat logprobs: true
  ToolCallFormat tool_calls = ToolCallFormat::kNone;
  SpeculativeOptions speculative;
  std::string user;             // OpenAI `user`: sticky A/B arm assignment
  std::string tenant;           // whose text it is (specd::SpeculativeOptions::tenant): API key and user
  StructuredOutput structured;  // response_format, guided_*, structured_outputs
};

// Parse and validate a request body. Throw ApiError (400 naming the field, 404 for an unknown
// model) on anything the server cannot honour exactly.
GenerationRequest parse_completion_request(const nlohmann::ordered_json& body, const ApiLimits& limits,
                                           const tokenizer::Tokenizer& tok);
// A completion body whose `prompt` is a list of prompts (strings or token-id arrays): one request
// per prompt, in order, each with the body's other fields; any other body: parse_completion_request.
// A prompt's error names it (prompt[i]). At most kMaxPrompts prompts and kMaxChoices choices in all.
inline constexpr size_t kMaxPrompts = 64;
std::vector<GenerationRequest> parse_completion_requests(const nlohmann::ordered_json& body, const ApiLimits& limits,
                                                         const tokenizer::Tokenizer& tok);
GenerationRequest parse_chat_request(const nlohmann::ordered_json& body, const ApiLimits& limits,
                                     const tokenizer::Tokenizer& tok, const ChatPrompter& prompter);

// The A/B arm a request asks for: the body's speculative.arm or the X-Specd-Arm header
// (`header`, "" = absent). Both given and different, a malformed name, or a name that is not one
// of limits.arms → 400 naming it.
void resolve_arm(GenerationRequest& req, const std::string& header, const ApiLimits& limits);

// Parses a body as JSON, keeping object key order (tools render in the order sent): malformed
// JSON and invalid UTF-8 → 400; a non-object → 400.
nlohmann::ordered_json parse_body(const std::string& body);

// JSON text that never throws (invalid UTF-8, which the engine does not produce, is replaced).
std::string dump(const nlohmann::json& j);

}  // namespace specd::server

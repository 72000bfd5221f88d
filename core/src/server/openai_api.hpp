// The OpenAI-compatible request and response shapes (docs/server.md): strict parsing of
// /v1/completions and /v1/chat/completions bodies into typed requests, and the JSON of
// responses, stream chunks and errors. No HTTP here; http_server.cpp does the transport.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "server/chat_template.hpp"
#include "specd/request.hpp"

namespace specd::tokenizer {
class Tokenizer;
}

namespace specd::server {

// An error answered with the OpenAI error shape
// {"error": {"message", "type", "param", "code"}} and this HTTP status.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string type, std::string param = "", std::string code = "")
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)),
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
  std::string arm;  // the A/B arm to serve with ("" = assigned); see resolve_arm()
};

// What the server needs to validate a request.
struct ApiLimits {
  std::string model_name;         // requests naming another model get 404
  int64_t max_model_len = 0;      // context length
  int32_t max_prompt_tokens = 0;  // effective limit (already min'ed with max_model_len - 1)
  int32_t max_tokens_limit = 4096;
  int64_t vocab_size = 0;
  std::vector<std::string> arms;  // the engine's A/B arms (EngineInfo::arms)
};

struct GenerationRequest {
  bool chat = false;
  std::vector<int32_t> prompt_ids;  // tokenized prompt (chat: template applied)
  SamplingParams sampling;
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  SpeculativeOptions speculative;
  std::string user;                 // OpenAI `user`: sticky A/B arm assignment
};

// Parse and validate a request body. Throw ApiError (400 naming the field, 404 for an unknown
// model) on anything the server cannot honour exactly.
GenerationRequest parse_completion_request(const nlohmann::json& body, const ApiLimits& limits,
                                           const tokenizer::Tokenizer& tok);
GenerationRequest parse_chat_request(const nlohmann::json& body, const ApiLimits& limits,
                                     const tokenizer::Tokenizer& tok, ChatTemplateKind chat_template);

// The A/B arm a request asks for: the body's speculative.arm or the X-Specd-Arm header
// (`header`, "" = absent). Both given and different, a malformed name, or a name that is not one
// of limits.arms → 400 naming it.
void resolve_arm(GenerationRequest& req, const std::string& header, const ApiLimits& limits);

// Parses a body as JSON: malformed JSON and invalid UTF-8 → 400; a non-object → 400.
nlohmann::json parse_body(const std::string& body);

// JSON text that never throws (invalid UTF-8, which the engine does not produce, is replaced).
std::string dump(const nlohmann::json& j);

// Response builders. `id` is the response id ("cmpl-..." / "chatcmpl-..."), `created` Unix s.
struct ResponseMeta {
  std::string id;
  int64_t created = 0;
  std::string model;
};
nlohmann::json usage_json(int32_t prompt_tokens, int32_t completion_tokens);
// finish_reason: "stop" | "length" | "" (null, streaming chunks before the end)
nlohmann::json completion_response(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                                   int32_t prompt_tokens, int32_t completion_tokens);
nlohmann::json chat_response(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                             int32_t prompt_tokens, int32_t completion_tokens);
nlohmann::json completion_chunk(const ResponseMeta& m, const std::string& text, const std::string& finish_reason);
// first: the chunk that carries delta.role = "assistant".
nlohmann::json chat_chunk(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                          bool first);
// The final usage-only chunk of a stream with stream_options.include_usage (choices empty).
nlohmann::json usage_chunk(const ResponseMeta& m, bool chat, int32_t prompt_tokens, int32_t completion_tokens);
// Adds the serving A/B arm to a response's or chunk's usage object: usage.arm (an extension).
void add_arm_to_usage(nlohmann::json& response, const std::string& arm);

}  // namespace specd::server

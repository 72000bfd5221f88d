// POST /tokenize and POST /detokenize (vLLM's endpoints; docs/server.md): the server's own
// tokenizer and chat template, so a client counts tokens exactly as the server will.
#pragma once

#include <nlohmann/json.hpp>

#include "server/openai_api.hpp"

namespace specd::server {

// {"prompt": text[, "add_special_tokens": bool]} or a chat's {"messages": [...], tools, ...}:
// {"count", "max_model_len", "tokens"}. Throws ApiError (400 bad input, 404 another model).
nlohmann::json tokenize_response(const nlohmann::ordered_json& body, const ApiLimits& limits,
                                 const tokenizer::Tokenizer& tok, const ChatPrompter& prompter);
// {"tokens": [ids]}: {"prompt": text}.
nlohmann::json detokenize_response(const nlohmann::ordered_json& body, const ApiLimits& limits,
                                   const tokenizer::Tokenizer& tok);

}  // namespace specd::server

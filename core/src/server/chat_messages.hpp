// OpenAI chat messages and tools → the values a chat template renders, as vLLM hands them to
// transformers: text content parts joined with "\n", a null content read as "", assistant
// tool_calls kept (their `arguments` JSON text parsed into an object), tool messages with
// tool_call_id. Shared by the server and `specd template render`, so both render the same prompt.
#pragma once

#include <nlohmann/json.hpp>

#include "template/value.hpp"

namespace specd::server {

// Throws ApiError (400 naming the field, e.g. messages[2].tool_calls[0].function.name).
jinja::Value template_messages(const nlohmann::ordered_json& messages);
// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?}}].
jinja::Value template_tools(const nlohmann::ordered_json& tools);

}  // namespace specd::server

// The request fields that ask for structured output (docs/structured-output.md), OpenAI's and
// vLLM's, read into one specd::StructuredOutput:
//   response_format {"type": "text" | "json_object" | "json_schema", "json_schema": {name,
//     schema, strict, description}}
//   guided_json (schema object or its text), guided_regex, guided_choice, guided_grammar (vLLM)
//   structured_outputs {json | regex | choice | grammar | json_object} (vLLM's newer form)
// At most one of them may constrain a request; two are a 400 naming both. The constraint is
// compiled here as well, so that one that cannot be (an unsupported schema keyword, a regex
// construct, a grammar error) is a 400 with the compiler's message.
#pragma once

#include <nlohmann/json.hpp>

#include "specd/request.hpp"

namespace specd::server {

// Throws ApiError (400) naming the field.
StructuredOutput read_structured_output(const nlohmann::ordered_json& body);

// tool_choice "required" (name "") or a named function: the output is one call, in `format`, of
// one of `tools` (the request's, already checked) with arguments that satisfy its parameters
// schema: hermes `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`, llama3_json
// `{"name": ..., "parameters": {...}}`. Throws ApiError (400) for an unknown name or a parameters
// schema that does not compile.
StructuredOutput tool_call_output(const nlohmann::ordered_json& tools, const std::string& name, ToolCallFormat format);

}  // namespace specd::server

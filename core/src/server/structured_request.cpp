// Request fields → StructuredOutput (structured_request.hpp).
#include "server/structured_request.hpp"

#include <string>
#include <vector>

#include "common/untrusted.hpp"
#include "constrain/constraint.hpp"
#include "constrain/grammar.hpp"
#include "server/openai_api.hpp"
#include "specd/error.hpp"

namespace specd::server {
namespace {

using nlohmann::ordered_json;
using Kind = StructuredOutput::Kind;

bool given(const ordered_json& body, const char* key) {
  return body.contains(key) && !body[key].is_null();
}

std::string string_field(const ordered_json& v, const std::string& name) {
  if (!v.is_string()) throw bad_request(name + " must be a string", name);
  return v.get<std::string>();
}

// A schema as an object (or, as vLLM also takes, its JSON text).
std::string schema_field(const ordered_json& v, const std::string& name) {
  if (v.is_object() || v.is_boolean()) return v.dump();
  if (v.is_string()) {
    const ordered_json parsed = ordered_json::parse(v.get<std::string>(), nullptr, false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean()))
      throw bad_request(name + " must be a JSON Schema (an object, or its JSON text)", name);
    return parsed.dump();
  }
  throw bad_request(name + " must be a JSON Schema object", name);
}

std::vector<std::string> choice_field(const ordered_json& v, const std::string& name) {
  if (!v.is_array() || v.empty()) throw bad_request(name + " must be a non-empty array of strings", name);
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(string_field(v[i], name + "[" + std::to_string(i) + "]"));
  return out;
}

StructuredOutput from_response_format(const ordered_json& v) {
  if (!v.is_object() || !v.contains("type") || !v["type"].is_string())
    throw bad_request("response_format must be an object with a string 'type'", "response_format");
  const std::string type = v["type"].get<std::string>();
  StructuredOutput so;
  if (type == "text") return so;
  if (type == "json_object") {
    so.kind = Kind::kJsonObject;
    return so;
  }
  if (type != "json_schema")
    throw bad_request(
        "response_format.type must be \"text\", \"json_object\" or \"json_schema\", got \"" + clip(type) + "\"",
        "response_format.type");
  if (!v.contains("json_schema") || !v["json_schema"].is_object())
    throw bad_request("response_format.json_schema must be an object with the schema", "response_format.json_schema");
  const ordered_json& js = v["json_schema"];
  if (js.contains("name")) string_field(js["name"], "response_format.json_schema.name");
  if (js.contains("strict") && !js["strict"].is_null() && !js["strict"].is_boolean())
    throw bad_request("response_format.json_schema.strict must be a boolean", "response_format.json_schema.strict");
  if (!js.contains("schema") || js["schema"].is_null()) {  // OpenAI: no schema = any JSON object
    so.kind = Kind::kJsonObject;
    return so;
  }
  so.kind = Kind::kJsonSchema;
  so.spec = schema_field(js["schema"], "response_format.json_schema.schema");
  return so;
}

// vLLM's structured_outputs object: exactly one of its constraint keys.
StructuredOutput from_structured_outputs(const ordered_json& v) {
  if (!v.is_object()) throw bad_request("structured_outputs must be an object", "structured_outputs");
  StructuredOutput so;
  std::string chosen;
  for (const auto& [key, value] : v.items()) {
    if (value.is_null()) continue;
    const std::string name = "structured_outputs." + key;
    StructuredOutput next;
    if (key == "json") {
      next.kind = Kind::kJsonSchema;
      next.spec = schema_field(value, name);
    } else if (key == "regex") {
      next.kind = Kind::kRegex;
      next.spec = string_field(value, name);
    } else if (key == "choice") {
      next.kind = Kind::kChoice;
      next.choices = choice_field(value, name);
    } else if (key == "grammar") {
      next.kind = Kind::kGrammar;
      next.spec = string_field(value, name);
    } else if (key == "json_object") {
      if (!value.is_boolean()) throw bad_request(name + " must be a boolean", name);
      if (!value.get<bool>()) continue;
      next.kind = Kind::kJsonObject;
    } else {
      continue;  // vLLM's options that do not constrain (backend choices, whitespace) are not read
    }
    if (so.active())
      throw bad_request(
          "structured_outputs: give one of json, regex, choice, grammar, json_object; got " + chosen + " and " + key,
          name);
    so = std::move(next);
    chosen = key;
  }
  return so;
}

void check_compiles(const StructuredOutput& so, const std::string& field) {
  // Compiled here too, so that a constraint that cannot be is the client's 400, not the
  // engine's failure (the engine keeps its own compiled copy, with the token masks).
  try {
    (void)constrain::compile_structured(so);
  } catch (const Error& e) {
    throw bad_request(std::string(e.what()), field);
  }
}

}  // namespace

StructuredOutput tool_call_output(const ordered_json& tools, const std::string& name, ToolCallFormat format) {
  const char* args = format == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
  ordered_json calls = ordered_json::array();
  for (const ordered_json& t : tools) {
    const ordered_json& fn = t["function"];
    const std::string& fn_name = fn["name"].get_ref<const std::string&>();
    if (!name.empty() && fn_name != name) continue;
    const bool has_params = fn.contains("parameters") && !fn["parameters"].is_null();
    ordered_json call = {
        {"type", "object"},
        {"properties",
         {{"name", {{"const", fn_name}}}, {args, has_params ? fn["parameters"] : ordered_json{{"type", "object"}}}}},
        {"required", {"name", args}},
        {"additionalProperties", false}};
    calls.push_back(std::move(call));
  }
  if (calls.empty())
    throw bad_request("tool_choice names the function '" + name + "', which is not in tools", "tool_choice");
  StructuredOutput so;
  so.kind = StructuredOutput::Kind::kJsonSchema;
  so.spec = (calls.size() == 1 ? calls[0] : ordered_json{{"anyOf", calls}}).dump();
  if (format == ToolCallFormat::kHermes) {
    so.prefix = "<tool_call>\n";
    so.suffix = "\n</tool_call>";
  }
  check_compiles(so, "tool_choice");
  return so;
}

StructuredOutput read_structured_output(const ordered_json& body) {
  StructuredOutput so;
  std::string from;
  auto take = [&](StructuredOutput next, const std::string& field) {
    if (!next.active()) return;
    if (so.active())
      throw bad_request("both " + from + " and " + field + " ask for structured output; give one", field);
    so = std::move(next);
    from = field;
  };
  if (given(body, "response_format")) take(from_response_format(body["response_format"]), "response_format");
  // vLLM's guided_* fields: one constraint each.
  for (const auto& [key, kind] :
       {std::pair{"guided_json", Kind::kJsonSchema}, std::pair{"guided_regex", Kind::kRegex},
        std::pair{"guided_choice", Kind::kChoice}, std::pair{"guided_grammar", Kind::kGrammar}}) {
    if (!given(body, key)) continue;
    StructuredOutput s;
    s.kind = kind;
    const ordered_json& v = body[key];
    if (kind == Kind::kJsonSchema) {
      s.spec = schema_field(v, key);
    } else if (kind == Kind::kChoice) {
      s.choices = choice_field(v, key);
    } else {
      s.spec = string_field(v, key);
    }
    take(std::move(s), key);
  }
  if (given(body, "structured_outputs"))
    take(from_structured_outputs(body["structured_outputs"]), "structured_outputs");
  if (so.active()) check_compiles(so, from);
  return so;
}

}  // namespace specd::server

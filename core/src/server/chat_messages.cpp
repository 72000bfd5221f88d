#include "server/chat_messages.hpp"

#include "common/untrusted.hpp"
#include "server/openai_api.hpp"
#include "template/value.hpp"

namespace specd::server {
namespace {

using jinja::Value;
using nlohmann::ordered_json;

const std::string& string_field(const ordered_json& v, const std::string& name) {
  if (!v.is_string()) throw bad_request(name + " must be a string", name);
  return v.get_ref<const std::string&>();
}

// A string, null (""), or text parts joined with "\n".
std::string content_text(const ordered_json& v, const std::string& at) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) throw bad_request(at + " must be a string, null or an array of text parts", at);
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const ordered_json& part = v[i];
    const std::string p = at + "[" + std::to_string(i) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      throw bad_request(p + " must be an object with a type", p);
    if (part["type"] != "text")
      throw bad_request(p + ": only parts of type \"text\" are supported (this server runs text-only models)", p);
    if (!part.contains("text")) throw bad_request(p + ".text is required", p + ".text");
    if (i > 0) out += "\n";
    out += string_field(part["text"], p + ".text");
  }
  return out;
}

Value tool_calls(const ordered_json& v, const std::string& at) {
  if (!v.is_array()) throw bad_request(at + " must be an array", at);
  jinja::List calls;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string c = at + "[" + std::to_string(i) + "]";
    const ordered_json& call = v[i];
    if (!call.is_object()) throw bad_request(c + " must be an object", c);
    auto out = jinja::make_dict();
    if (call.contains("id")) out->set(Value("id"), Value(string_field(call["id"], c + ".id")));
    out->set(Value("type"), Value("function"));
    if (call.contains("type") && call["type"] != "function")
      throw bad_request(c + ".type must be \"function\"", c + ".type");
    if (!call.contains("function") || !call["function"].is_object())
      throw bad_request(c + ".function must be an object", c + ".function");
    const ordered_json& fn = call["function"];
    if (!fn.contains("name")) throw bad_request(c + ".function.name is required", c + ".function.name");
    auto f = jinja::make_dict();
    f->set(Value("name"), Value(string_field(fn["name"], c + ".function.name")));
    const std::string args = fn.contains("arguments") ? string_field(fn["arguments"], c + ".function.arguments") : "{}";
    // As vLLM does: templates expect the arguments as an object.
    ordered_json parsed;
    try {
      parsed = parse_ordered_json(args);
    } catch (const JsonError&) {
      // not JSON (or nested too deep): the template gets the string
    }
    try {
      f->set(Value("arguments"), parsed.is_object() ? jinja::from_json(parsed, 3) : Value(args));
    } catch (const jinja::TemplateError& e) {
      throw bad_request(c + ".function.arguments: " + e.what(), c + ".function.arguments");
    }
    out->set(Value("function"), Value(std::move(f)));
    calls.emplace_back(std::move(out));
  }
  return Value(std::move(calls));
}

}  // namespace

jinja::Value template_messages(const ordered_json& messages) {
  if (!messages.is_array() || messages.empty()) throw bad_request("messages must be a non-empty array", "messages");
  jinja::List out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const ordered_json& m = messages[i];
    if (!m.is_object()) throw bad_request(at + " must be an object", at);
    if (!m.contains("role")) throw bad_request(at + ".role is required", at + ".role");
    auto msg = jinja::make_dict();
    msg->set(Value("role"), Value(string_field(m["role"], at + ".role")));
    msg->set(Value("content"),
             Value(content_text(m.contains("content") ? m["content"] : ordered_json(), at + ".content")));
    for (const auto& [key, value] : m.items()) {
      if (key == "role" || key == "content") continue;
      if (key == "name" || key == "tool_call_id" || key == "reasoning_content") {
        if (!value.is_null()) msg->set(Value(key), Value(string_field(value, at + "." + key)));
      } else if (key == "tool_calls") {
        if (!value.is_null()) msg->set(Value(key), tool_calls(value, at + ".tool_calls"));
      } else {
        throw bad_request(at + ": unsupported field (expected role, content, name, tool_calls, tool_call_id, "
                               "reasoning_content)",
                          at);
      }
    }
    out.emplace_back(std::move(msg));
  }
  return Value(std::move(out));
}

jinja::Value template_tools(const ordered_json& tools) {
  if (!tools.is_array()) throw bad_request("tools must be an array", "tools");
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    const ordered_json& t = tools[i];
    if (!t.is_object() || !t.contains("type") || t["type"] != "function")
      throw bad_request(at + " must be an object with type \"function\"", at);
    if (!t.contains("function") || !t["function"].is_object())
      throw bad_request(at + ".function must be an object", at + ".function");
    const ordered_json& fn = t["function"];
    if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get_ref<const std::string&>().empty())
      throw bad_request(at + ".function.name must be a non-empty string", at + ".function.name");
    if (fn.contains("parameters") && !fn["parameters"].is_object() && !fn["parameters"].is_null())
      throw bad_request(at + ".function.parameters must be an object (a JSON schema)", at + ".function.parameters");
  }
  try {
    return jinja::from_json(tools);
  } catch (const jinja::TemplateError& e) {
    throw bad_request(std::string("tools: ") + e.what(), "tools");
  }
}

}  // namespace specd::server

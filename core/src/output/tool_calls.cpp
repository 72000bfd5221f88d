#include "output/tool_calls.hpp"

#include <nlohmann/json.hpp>

#include "common/untrusted.hpp"

namespace specd::output {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

// Length of the longest tail of `s` that is a proper prefix of `tag`.
size_t partial_tail(std::string_view s, std::string_view tag) {
  for (size_t len = std::min(s.size(), tag.size() - 1); len > 0; --len)
    if (s.substr(s.size() - len) == tag.substr(0, len)) return len;
  return 0;
}

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

std::string_view tool_call_format_name(ToolCallFormat format) noexcept {
  switch (format) {
    case ToolCallFormat::kNone:
      return "none";
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3Json:
      return "llama3_json";
  }
  return "none";
}

// {"name": string, "arguments" | "parameters": object or JSON text} → a call.
bool ToolCallParser::parse_call(std::string_view text, Result& out) {
  nlohmann::ordered_json j;
  try {
    j = parse_ordered_json(trim(text));  // model output: nesting-limited before it is dumped
  } catch (const JsonError&) {
    return false;
  }
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  const nlohmann::ordered_json* args = nullptr;
  for (const char* key : {"arguments", "parameters"})
    if (j.contains(key)) args = &j[key];
  ToolCall call;
  call.index = num_calls_;
  call.name = j["name"].get<std::string>();
  if (args == nullptr) {
    call.arguments = "{}";
  } else if (args->is_string()) {
    call.arguments = args->get<std::string>();
  } else {
    call.arguments = args->dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  out.calls.push_back(std::move(call));
  ++num_calls_;
  return true;
}

ToolCallParser::Result ToolCallParser::push_hermes(std::string_view text) {
  Result r;
  held_.append(text);
  for (;;) {
    if (!in_call_) {
      const size_t at = held_.find(kOpen);
      if (at == std::string::npos) {
        const size_t keep = partial_tail(held_, kOpen);
        r.content += held_.substr(0, held_.size() - keep);
        held_.erase(0, held_.size() - keep);
        return r;
      }
      r.content += held_.substr(0, at);
      held_.erase(0, at);
      in_call_ = true;
    }
    const size_t close = held_.find(kClose, kOpen.size());
    if (close == std::string::npos) return r;
    const std::string_view body = std::string_view(held_).substr(kOpen.size(), close - kOpen.size());
    if (!parse_call(body, r)) r.content += held_.substr(0, close + kClose.size());
    held_.erase(0, close + kClose.size());
    in_call_ = false;
  }
}

ToolCallParser::Result ToolCallParser::push(std::string_view text) {
  if (format_ == ToolCallFormat::kHermes) return push_hermes(text);
  Result r;
  if (format_ == ToolCallFormat::kNone) {
    r.content = std::string(text);
    return r;
  }
  if (decided_ && !json_output_) {
    r.content = std::string(text);
    return r;
  }
  held_.append(text);
  if (!decided_) {
    const std::string_view t = trim(held_);
    if (t.empty() || (t.size() < kPythonTag.size() && kPythonTag.substr(0, t.size()) == t)) return r;
    decided_ = true;
    json_output_ = t.front() == '{' || t.substr(0, kPythonTag.size()) == kPythonTag;
    if (!json_output_) r.content = std::exchange(held_, {});
  }
  return r;
}

ToolCallParser::Result ToolCallParser::finish() {
  Result r;
  if (format_ == ToolCallFormat::kLlama3Json && json_output_) {
    std::string_view body = trim(held_);
    if (body.substr(0, kPythonTag.size()) == kPythonTag) body.remove_prefix(kPythonTag.size());
    // One call, or several separated by ';'.
    Result calls;
    const int before = num_calls_;
    bool all = true;
    size_t start = 0;
    while (all && start <= body.size()) {
      size_t end = body.find(';', start);
      // A ';' inside a string argument: extend until the piece parses.
      while (end != std::string_view::npos && !nlohmann::json::accept(trim(body.substr(start, end - start))))
        end = body.find(';', end + 1);
      const std::string_view piece =
          body.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
      all = parse_call(piece, calls);
      if (end == std::string_view::npos) break;
      start = end + 1;
    }
    if (all) return calls;
    num_calls_ = before;
  } else if (format_ == ToolCallFormat::kHermes && in_call_) {
    // The model stopped inside a block (no closing tag): a complete call still counts.
    if (parse_call(std::string_view(held_).substr(kOpen.size()), r)) {
      held_.clear();
      in_call_ = false;
      return r;
    }
  }
  r.content = std::exchange(held_, {});
  in_call_ = false;
  return r;
}

}  // namespace specd::output

// Chat templates as Hugging Face transformers renders them (apply_chat_template): the model's own
// Jinja template, compiled once, rendered per request with `messages`, `tools`,
// `add_generation_prompt`, the tokenizer's special-token strings (bos_token, eos_token, ...) and
// the request's chat_template_kwargs, in a sandbox (interpreter.hpp) with transformers' globals
// (raise_exception, strftime_now) and tojson. The rendered text is tokenized without adding
// special tokens: the template writes BOS itself where the model wants one.
//
//   ChatTemplates t = ChatTemplates::for_tokenizer(tok, cfg.server.chat_template);
//   std::string prompt = t.render({.messages = ..., .add_generation_prompt = true});
//
// Models without a template get one of three built-in templates (chatml, llama2, llama3, chosen
// by the tokenizer's special tokens) with a warning. Templates are the Jinja module of this
// folder: no C++ Jinja library is packaged for Debian 12.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "template/ast.hpp"
#include "template/interpreter.hpp"
#include "template/value.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::jinja {

struct ChatInput {
  Value messages;               // a list of dicts (role, content, tool_calls, ...)
  Value tools = Value::none();  // a list of tool dicts, or none
  bool add_generation_prompt = true;
  std::vector<std::pair<std::string, Value>> kwargs;  // chat_template_kwargs (override the rest)
  // What strftime_now formats (tests fix it; unset = the current time).
  std::optional<std::chrono::system_clock::time_point> now;
};

class ChatTemplates {
 public:
  // The model's templates (config.templates); none → the built-in fallback the tokenizer's
  // special tokens suggest, with a warning naming config.origin. `override_file`, when not
  // empty, replaces them with that file's template. Throws specd::Error (kModelFormat) on a
  // template that does not compile, naming its origin and line; kNotFound for a missing file.
  static ChatTemplates load(const tokenizer::ChatTemplateConfig& config, const tokenizer::Tokenizer& tok,
                            const std::filesystem::path& override_file = {});
  // For tests and `specd template render`: one template from source.
  static ChatTemplates from_source(const std::string& source, const tokenizer::ChatTemplateConfig& config,
                                   std::string origin);

  // The prompt for `input`. The template is the "tool_use" one when tools are given and the model
  // names one, else "default" (as transformers picks). Throws TemplateError with the template's
  // message (raise_exception) or the rendering error.
  std::string render(const ChatInput& input, const RenderLimits& limits = {}) const;

  // Where the templates came from ("<dir>/tokenizer_config.json", a file, "built-in chatml").
  const std::string& origin() const { return origin_; }
  bool is_fallback() const { return fallback_; }
  // Source of the template render() uses without tools, for detection (tool-call format,
  // end-of-turn tokens).
  const std::string& default_source() const;

 private:
  struct Named {
    std::string name;
    std::string source;
    std::shared_ptr<const Program> program;
  };
  static Named compile(std::string name, std::string source, const std::string& origin);
  const Named& pick(bool has_tools) const;

  std::vector<Named> templates_;
  std::vector<std::pair<std::string, Value>> special_tokens_;
  std::string origin_;
  bool fallback_ = false;
};

// The built-in templates, by name (chatml | llama2 | llama3), as Jinja source.
const std::string& builtin_template(const std::string& name);

}  // namespace specd::jinja

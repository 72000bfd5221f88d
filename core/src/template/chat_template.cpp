#include "template/chat_template.hpp"

#include <map>

#include "common/untrusted.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::jinja {
namespace {

// The fallbacks keep what specd rendered before models' own templates were read: ChatML, Meta's
// Llama 2 [INST] format (system prompt folded into the first user turn, turns must alternate)
// and the Llama 3 header format. "developer" reads as "system".
const std::map<std::string, std::string>& builtins() {
  static const std::map<std::string, std::string> kTemplates = {
      {"chatml",
       "{%- for message in messages %}"
       "{%- set role = 'system' if message['role'] == 'developer' else message['role'] %}"
       "{{- '<|im_start|>' + role + '\\n' + message['content'] + '<|im_end|>\\n' }}"
       "{%- endfor %}"
       "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"},
      {"llama3",
       "{{- bos_token }}"
       "{%- for message in messages %}"
       "{%- set role = 'system' if message['role'] == 'developer' else message['role'] %}"
       "{{- '<|start_header_id|>' + role + '<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}"
       "{%- endfor %}"
       "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"},
      {"llama2",
       "{%- if messages[0]['role'] in ['system', 'developer'] %}"
       "{%- set system = messages[0]['content'] %}{%- set turns = messages[1:] %}"
       "{%- else %}{%- set system = '' %}{%- set turns = messages %}{%- endif %}"
       "{%- if not turns %}{{- raise_exception('the llama2 chat template needs at least one user message') }}"
       "{%- endif %}"
       "{%- for message in turns %}"
       "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
       "{{- raise_exception('the llama2 chat template needs user and assistant turns alternating after an optional "
       "system message') }}{%- endif %}"
       "{%- if message['role'] == 'user' %}"
       "{%- set content = message['content'] %}"
       "{%- if loop.first and system %}{%- set content = '<<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' + content %}"
       "{%- endif %}"
       "{{- bos_token + '[INST] ' + content + ' [/INST]' }}"
       "{%- else %}{{- ' ' + message['content'] + ' ' + eos_token }}{%- endif %}"
       "{%- endfor %}"
       "{%- if turns[-1]['role'] != 'user' %}"
       "{{- raise_exception('the llama2 chat template needs the last message from the user') }}{%- endif %}"},
  };
  return kTemplates;
}

// Which built-in a tokenizer without a template most likely wants.
std::string guess_builtin(const tokenizer::Tokenizer& tok) {
  if (tok.token_to_id("<|im_start|>")) return "chatml";
  if (tok.token_to_id("<|begin_of_text|>") || tok.token_to_id("<|start_header_id|>")) return "llama3";
  return "llama2";
}

// A template file: a regular file of at most 16 MiB (a FIFO or a huge file is refused unread).
std::string read_file(const std::filesystem::path& file) {
  return read_file_limited(file, kMaxSmallJsonBytes, "a chat template");
}

std::vector<std::pair<std::string, Value>> special_token_values(const tokenizer::ChatTemplateConfig& config) {
  std::vector<std::pair<std::string, Value>> out;
  for (const auto& [key, content] : config.special_tokens) out.emplace_back(key, Value(content));
  if (!config.additional_special_tokens.empty()) {
    List extra;
    for (const std::string& s : config.additional_special_tokens) extra.emplace_back(s);
    out.emplace_back("additional_special_tokens", Value(std::move(extra)));
  }
  return out;
}

}  // namespace

const std::string& builtin_template(const std::string& name) {
  const auto it = builtins().find(name);
  if (it == builtins().end()) throw Error(ErrorCode::kInvalidArgument, "no built-in chat template '" + name + "'");
  return it->second;
}

ChatTemplates::Named ChatTemplates::compile(std::string name, std::string source, const std::string& origin) {
  try {
    auto program = parse(source);
    return Named{std::move(name), std::move(source), std::move(program)};
  } catch (const TemplateError& e) {
    throw Error(ErrorCode::kModelFormat, origin + ": chat template '" + name + "' does not compile: " + e.what());
  }
}

ChatTemplates ChatTemplates::from_source(const std::string& source, const tokenizer::ChatTemplateConfig& config,
                                         std::string origin) {
  ChatTemplates t;
  t.origin_ = std::move(origin);
  t.templates_.push_back(compile("default", source, t.origin_));
  t.special_tokens_ = special_token_values(config);
  return t;
}

ChatTemplates ChatTemplates::load(const tokenizer::ChatTemplateConfig& config, const tokenizer::Tokenizer& tok,
                                  const std::filesystem::path& override_file) {
  if (!override_file.empty()) return from_source(read_file(override_file), config, override_file.string());
  ChatTemplates t;
  t.special_tokens_ = special_token_values(config);
  if (!config.templates.empty()) {
    t.origin_ = config.origin;
    for (const auto& [name, source] : config.templates) t.templates_.push_back(compile(name, source, t.origin_));
    return t;
  }
  const std::string name = guess_builtin(tok);
  t.fallback_ = true;
  t.origin_ = "built-in " + name;
  t.templates_.push_back(compile(name, builtin_template(name), t.origin_));
  log::get("server").warn(
      "{} has no chat template: using the built-in '{}' template (set server.chat_template to a "
      "Jinja file to choose)",
      config.origin.empty() ? tok.source().string() : config.origin, name);
  return t;
}

const ChatTemplates::Named& ChatTemplates::pick(bool has_tools) const {
  if (templates_.size() == 1) return templates_.front();
  const Named* fallback = nullptr;
  for (const Named& n : templates_) {
    if (has_tools && n.name == "tool_use") return n;
    if (n.name == "default") fallback = &n;
  }
  if (fallback == nullptr) throw TemplateError("the model has several chat templates and none is named 'default'");
  return *fallback;
}

const std::string& ChatTemplates::default_source() const {
  return pick(false).source;
}

std::string ChatTemplates::render(const ChatInput& input, const RenderLimits& limits) const {
  const Named& t = pick(!input.tools.is_none() && !input.tools.is_undefined());
  std::unordered_map<std::string, Value> vars;
  for (const auto& [k, v] : special_tokens_) vars[k] = v;
  vars["messages"] = input.messages;
  vars["tools"] = input.tools;
  vars["documents"] = Value::none();
  vars["add_generation_prompt"] = Value(input.add_generation_prompt);
  for (const auto& [k, v] : input.kwargs) vars[k] = v;
  Interpreter interp(limits, input.now.value_or(std::chrono::system_clock::now()));
  return interp.render(*t.program, vars);
}

}  // namespace specd::jinja

// specd template render: print a chat prompt exactly as the server renders it, to debug templates.
//
//   specd template render --model DIR|FILE.gguf [--template FILE] --messages FILE.json
//                         [--tools FILE.json] [--add-generation-prompt] [--kwargs JSON]
//
// --messages holds the OpenAI `messages` array, --tools the `tools` array, --kwargs the
// `chat_template_kwargs` object. The model's own template (tokenizer_config.json, or the GGUF
// file's) renders unless --template names a Jinja file. The prompt is printed without a newline
// added; a template error (raise_exception included) is printed as `specd: error: ...`.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <string>

#include "common/untrusted.hpp"
#include "server/chat_messages.hpp"
#include "server/openai_api.hpp"
#include "specd/error.hpp"
#include "template/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::cli {

void add_template_command(CLI::App& app);

namespace {

using nlohmann::ordered_json;

struct TemplateOptions {
  std::string model;
  std::string template_file;
  std::string messages_file;
  std::string tools_file;
  bool add_generation_prompt = false;
  std::string kwargs;
};

ordered_json read_json_file(const std::string& file, const char* flag) {
  const std::string text = read_file_limited(file, kMaxSmallJsonBytes, std::string(flag) + " JSON");
  try {
    return parse_ordered_json(text);
  } catch (const JsonError& e) {
    throw Error(ErrorCode::kInvalidArgument, std::string(flag) + ": " + file + " is not valid JSON: " + e.what());
  }
}

void render(const TemplateOptions& o) {
  const auto tok = tokenizer::Tokenizer::load(o.model);
  const jinja::ChatTemplates templates = jinja::ChatTemplates::load(tok->chat_template_config(), *tok, o.template_file);
  jinja::ChatInput in;
  in.add_generation_prompt = o.add_generation_prompt;
  try {
    in.messages = server::template_messages(read_json_file(o.messages_file, "--messages"));
    if (!o.tools_file.empty()) in.tools = server::template_tools(read_json_file(o.tools_file, "--tools"));
  } catch (const server::ApiError& e) {
    throw Error(ErrorCode::kInvalidArgument, e.what());
  }
  if (!o.kwargs.empty()) {
    ordered_json k;
    try {
      k = parse_ordered_json(o.kwargs);
    } catch (const JsonError& e) {
      throw Error(ErrorCode::kInvalidArgument, std::string("--kwargs is not valid JSON: ") + e.what());
    }
    if (!k.is_object()) throw Error(ErrorCode::kInvalidArgument, "--kwargs must be a JSON object");
    for (auto it = k.begin(); it != k.end(); ++it) in.kwargs.emplace_back(it.key(), jinja::from_json(it.value()));
  }
  try {
    std::cout << templates.render(in) << std::flush;
  } catch (const jinja::TemplateError& e) {
    throw Error(ErrorCode::kInvalidArgument, std::string("chat template (") + templates.origin() + "): " + e.what());
  }
}

}  // namespace

void add_template_command(CLI::App& app) {
  CLI::App* tmpl = app.add_subcommand("template", "Chat templates");
  tmpl->require_subcommand(1);
  auto o = std::make_shared<TemplateOptions>();
  CLI::App* r =
      tmpl->add_subcommand("render", "Render a chat prompt with a model's chat template and print it exactly");
  r->add_option("--model", o->model, "Model directory or GGUF file (its tokenizer and chat template)")->required();
  r->add_option("--template", o->template_file, "A Jinja chat template file to use instead of the model's");
  r->add_option("--messages", o->messages_file, "JSON file with the OpenAI messages array")->required();
  r->add_option("--tools", o->tools_file, "JSON file with the OpenAI tools array");
  r->add_flag("--add-generation-prompt", o->add_generation_prompt, "End with the assistant's generation prompt");
  r->add_option("--kwargs", o->kwargs, "chat_template_kwargs as a JSON object, e.g. '{\"enable_thinking\": false}'");
  r->callback([o] { render(*o); });
}

}  // namespace specd::cli

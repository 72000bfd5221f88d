// The server's chat prompts (docs/server.md "Chat templates"): the model's own Jinja chat template
// (core/src/template/), or the file `server.chat_template` names, rendered and tokenized as
// transformers and vLLM do: the rendered text is encoded without adding special tokens (the
// template writes BOS where the model wants it) and with special-token text recognised.
//
// Also read from the template: the tokens that end an assistant turn (chat requests stop at
// them) and the format the model writes tool calls in (server.tool_call_parser: auto).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "output/tool_calls.hpp"
#include "template/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::server {

class ChatPrompter {
 public:
  // template_setting: "auto" (the model's templates, else a built-in fallback with a warning) or a
  // Jinja file. tool_parser: auto | hermes | llama3_json | none. Throws specd::Error on a missing
  // file, a template that does not compile or an unknown parser name.
  ChatPrompter(const tokenizer::Tokenizer& tok, const std::string& template_setting, const std::string& tool_parser);

  std::string render(const jinja::ChatInput& input, const jinja::RenderLimits& limits = {}) const {
    return templates_.render(input, limits);
  }
  // render(), tokenized. Throws jinja::TemplateError (the template's message) on a failed render.
  std::vector<int32_t> tokenize(const jinja::ChatInput& input) const;
  // Tokenizes text render() produced.
  // max_tokens: EncodeOptions::max_tokens (0 = no limit).
  std::vector<int32_t> encode(const std::string& rendered, int64_t max_tokens = 0) const;

  // End-of-turn tokens the template writes (<|im_end|>, <|eot_id|>, <|eom_id|>, <|end|>,
  // <end_of_turn>) that the tokenizer has; the model's EOS ids stop generation anyway.
  const std::vector<int32_t>& stop_token_ids() const { return stop_ids_; }
  ToolCallFormat tool_call_format() const { return tool_format_; }
  const jinja::ChatTemplates& templates() const { return templates_; }
  std::string description() const;

 private:
  const tokenizer::Tokenizer& tok_;
  jinja::ChatTemplates templates_;
  std::vector<int32_t> stop_ids_;
  ToolCallFormat tool_format_ = ToolCallFormat::kNone;
};

}  // namespace specd::server

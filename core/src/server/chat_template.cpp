#include "server/chat_template.hpp"

#include "specd/error.hpp"
#include "specd/log.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::server {
namespace {

ToolCallFormat detect_tool_format(const std::string& source) {
  if (source.find("<tool_call>") != std::string::npos) return ToolCallFormat::kHermes;
  if (source.find("<|python_tag|>") != std::string::npos || source.find("ipython") != std::string::npos)
    return ToolCallFormat::kLlama3Json;
  return ToolCallFormat::kNone;
}

}  // namespace

ChatPrompter::ChatPrompter(const tokenizer::Tokenizer& tok, const std::string& template_setting,
                           const std::string& tool_parser)
    : tok_(tok),
      templates_(jinja::ChatTemplates::load(tok.chat_template_config(), tok,
                                            template_setting == "auto" ? std::string() : template_setting)) {
  const std::string& source = templates_.default_source();
  for (const char* marker : {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>"}) {
    if (source.find(marker) == std::string::npos) continue;
    if (const auto id = tok.token_to_id(marker)) stop_ids_.push_back(*id);
  }
  if (tool_parser == "auto") {
    tool_format_ = detect_tool_format(source);
    for (const auto& [name, src] : tok.chat_template_config().templates)
      if (tool_format_ == ToolCallFormat::kNone && name == "tool_use") tool_format_ = detect_tool_format(src);
  } else if (tool_parser == "hermes") {
    tool_format_ = ToolCallFormat::kHermes;
  } else if (tool_parser == "llama3_json") {
    tool_format_ = ToolCallFormat::kLlama3Json;
  } else if (tool_parser != "none") {
    throw Error(ErrorCode::kInvalidArgument,
                "server.tool_call_parser: expected auto, hermes, llama3_json or none, got '" + tool_parser + "'");
  }
}

std::vector<int32_t> ChatPrompter::tokenize(const jinja::ChatInput& input) const {
  return encode(render(input));
}

std::vector<int32_t> ChatPrompter::encode(const std::string& rendered, int64_t max_tokens) const {
  tokenizer::EncodeOptions opts;
  opts.max_tokens = max_tokens;
  opts.add_special_tokens = false;  // the template writes BOS itself
  opts.parse_special = true;        // its markers are special tokens
  return tok_.encode(rendered, opts);
}

std::string ChatPrompter::description() const {
  return templates_.origin() + ", tool calls " + std::string(output::tool_call_format_name(tool_format_));
}

}  // namespace specd::server

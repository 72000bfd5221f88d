// Tool calls in generated text, parsed as they stream (vLLM's hermes and llama3_json parsers):
//  - hermes (Hermes, Qwen): <tool_call>{"name": ..., "arguments": {...}}</tool_call> blocks, with
//    content before, between and after them;
//  - llama3_json (Llama 3.1+): the whole output is {"name": ..., "parameters"|"arguments": ...}
//    (optionally after <|python_tag|>), several separated by ';'.
// A block that does not parse as a call stays text: the user sees exactly what the model wrote.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "specd/request.hpp"

namespace specd::output {

std::string_view tool_call_format_name(ToolCallFormat format) noexcept;

class ToolCallParser {
 public:
  explicit ToolCallParser(ToolCallFormat format) : format_(format) {}

  struct Result {
    std::string content;          // text to release now
    std::vector<ToolCall> calls;  // calls completed by this text
  };
  // Feeds newly final text. Text that may still become part of a call is held back.
  Result push(std::string_view text);
  // End of the output: held text is parsed one last time; what does not parse is content.
  Result finish();

 private:
  Result push_hermes(std::string_view text);
  bool parse_call(std::string_view json, Result& out);

  ToolCallFormat format_;
  std::string held_;
  bool in_call_ = false;      // hermes: inside <tool_call>
  bool decided_ = false;      // llama3_json: the output's first text decided call or content
  bool json_output_ = false;  // llama3_json: the output is held as a call
  int num_calls_ = 0;
};

}  // namespace specd::output

// Jinja's lexer as transformers configures it: {{ }}, {% %}, {# #}, whitespace control (- and
// +), trim_blocks (the newline after a block or comment tag is dropped), lstrip_blocks (spaces
// before a block or comment tag on its own line are dropped), {% raw %}, newlines normalized to
// \n and one trailing newline of the source dropped (keep_trailing_newline off).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specd::jinja {

struct Token {
  enum class Type { kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };
  Type type = Type::kEof;
  std::string text;  // data, name, operator, or the unescaped string
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

// Throws TemplateError("line N: ...") on a lexical error (unterminated tag or string, an
// unexpected character, unbalanced brackets).
std::vector<Token> tokenize(std::string_view source);

}  // namespace specd::jinja

// specd tokenize / specd detokenize: run a model's Hugging Face tokenizer from the command line.
//
//   specd tokenize --tokenizer PATH [--special] [--no-add-special] [--json] [--text TEXT]
//   specd detokenize --tokenizer PATH [--skip-special] [--ids "1 2 3"]
//
// PATH is a model directory or a tokenizer.json. Without --text / --ids the input is read from
// stdin verbatim (a trailing newline is part of the text). tokenize prints the ids separated by
// spaces (or a JSON array); detokenize accepts that output back (whitespace, commas and
// brackets separate ids) and prints the text exactly, without adding a newline.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "specd/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::cli {

void add_tokenize_commands(CLI::App& app);

namespace {

std::string read_stdin() {
  std::cin >> std::noskipws;
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  auto is_separator = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == '[' || c == ']';
  };
  while (pos < text.size()) {
    if (is_separator(text[pos])) {
      ++pos;
      continue;
    }
    size_t end = pos;
    while (end < text.size() && !is_separator(text[end])) ++end;
    const std::string word = text.substr(pos, end - pos);
    errno = 0;
    char* stop = nullptr;
    const long long value = std::strtoll(word.c_str(), &stop, 10);
    if (stop != word.c_str() + word.size() || errno != 0 || value < INT32_MIN || value > INT32_MAX)
      throw Error(ErrorCode::kInvalidArgument, "detokenize: '" + word + "' is not a token id");
    ids.push_back(static_cast<int32_t>(value));
    pos = end;
  }
  return ids;
}

struct TokenizeOptions {
  std::string tokenizer;
  bool special = false;
  bool no_add_special = false;
  bool json = false;
  std::optional<std::string> text;
};

struct DetokenizeOptions {
  std::string tokenizer;
  bool skip_special = false;
  std::optional<std::string> ids;
};

}  // namespace

void add_tokenize_commands(CLI::App& app) {
  auto topts = std::make_shared<TokenizeOptions>();
  CLI::App* tokenize = app.add_subcommand("tokenize", "Encode text with a model's tokenizer and print the token ids");
  tokenize->add_option("--tokenizer", topts->tokenizer, "Model directory, tokenizer.json or GGUF file")->required();
  tokenize->add_flag("--special", topts->special,
                     "Read special-token text in the input (e.g. <|im_start|>) as the special token");
  tokenize->add_flag("--no-add-special", topts->no_add_special, "Do not add BOS/EOS from the post-processor template");
  tokenize->add_flag("--json", topts->json, "Print a JSON array");
  tokenize->add_option("--text", topts->text, "Text to encode (default: stdin, verbatim)");
  tokenize->callback([topts] {
    const auto tok = tokenizer::Tokenizer::load(topts->tokenizer);
    const std::string text = topts->text ? *topts->text : read_stdin();
    const auto ids = tok->encode(text, {.add_special_tokens = !topts->no_add_special, .parse_special = topts->special});
    std::string out = topts->json ? "[" : "";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out += topts->json ? ", " : " ";
      out += std::to_string(ids[i]);
    }
    if (topts->json) out += "]";
    std::cout << out << "\n";
  });

  auto dopts = std::make_shared<DetokenizeOptions>();
  CLI::App* detokenize =
      app.add_subcommand("detokenize", "Decode token ids with a model's tokenizer and print the text");
  detokenize->add_option("--tokenizer", dopts->tokenizer, "Model directory, tokenizer.json or GGUF file")->required();
  detokenize->add_flag("--skip-special", dopts->skip_special, "Leave special tokens out of the text");
  detokenize->add_option("--ids", dopts->ids, "Token ids, e.g. \"1 15043 3186\" (default: stdin)");
  detokenize->callback([dopts] {
    const auto tok = tokenizer::Tokenizer::load(dopts->tokenizer);
    const auto ids = parse_ids(dopts->ids ? *dopts->ids : read_stdin());
    for (const int32_t id : ids) tok->id_to_token(id);  // an id with no token is an error naming it
    std::cout << tok->decode(ids, dopts->skip_special) << std::flush;
  });
}

}  // namespace specd::cli

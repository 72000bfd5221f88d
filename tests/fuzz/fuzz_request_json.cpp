// libFuzzer target: an HTTP request body as /v1/completions and /v1/chat/completions parse it
// (parse_body, then the typed request parsers with a small byte-level tokenizer and its built-in
// ChatML template, tools parsed as Hermes calls). Anything but an ApiError (a 4xx) is a finding:
// a crash, a sanitizer report or another exception.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_tokenizer.hpp"
#include "server/chat_template.hpp"
#include "server/openai_api.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace specd::server;
  static const auto tok = specd::fuzz::small_tokenizer();
  static const ApiLimits limits = [] {
    ApiLimits l;
    l.model_name = "tiny";
    l.max_model_len = 256;
    l.max_prompt_tokens = 255;
    l.max_tokens_limit = 2000;
    l.vocab_size = tok->vocab_size();
    return l;
  }();
  static const ChatPrompter prompter(*tok, "auto", "hermes");
  try {
    const nlohmann::ordered_json body = parse_body(std::string(reinterpret_cast<const char*>(data), size));
    try {
      parse_completion_request(body, limits, *tok);
    } catch (const ApiError&) {
    }
    parse_chat_request(body, limits, *tok, prompter);
  } catch (const ApiError&) {
  }
  return 0;
}

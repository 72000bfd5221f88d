#include "server/tokenize_api.hpp"

#include "common/untrusted.hpp"
#include "server/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::server {

using nlohmann::json;
using nlohmann::ordered_json;

namespace {

void check_model(const ordered_json& body, const ApiLimits& limits) {
  if (!body.contains("model")) return;
  const ordered_json& m = body["model"];
  if (!m.is_string()) throw ApiError(400, "model must be a string", "invalid_request_error", "model");
  if (m.get<std::string>() != limits.model_name)
    throw ApiError(
        404,
        "the model '" + clip(m.get<std::string>()) + "' does not exist; this server serves '" + limits.model_name + "'",
        "invalid_request_error", "model", "model_not_found");
}

bool read_flag(const ordered_json& body, const char* key, bool fallback) {
  if (!body.contains(key) || body[key].is_null()) return fallback;
  if (!body[key].is_boolean())
    throw ApiError(400, std::string(key) + " must be a boolean, got " + json_type_name(body[key]),
                   "invalid_request_error", key);
  return body[key].get<bool>();
}

}  // namespace

json tokenize_response(const ordered_json& body, const ApiLimits& limits, const tokenizer::Tokenizer& tok,
                       const ChatPrompter& prompter) {
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object", "invalid_request_error");
  check_model(body, limits);
  const bool has_prompt = body.contains("prompt"), has_messages = body.contains("messages");
  if (has_prompt == has_messages)
    throw ApiError(400, "give exactly one of prompt (text) and messages (a chat, rendered with the chat template)",
                   "invalid_request_error", has_prompt ? "messages" : "prompt");
  std::vector<int32_t> ids;
  if (has_prompt) {
    const ordered_json& p = body["prompt"];
    if (!p.is_string())
      throw ApiError(400, std::string("prompt must be a string, got ") + json_type_name(p), "invalid_request_error",
                     "prompt");
    EncodeOptions opts;  // special-token text is plain text, as in a completion's prompt
    opts.add_special_tokens = read_flag(body, "add_special_tokens", true);
    // A text longer than the context could never be a prompt; refused as soon as that is
    // certain, so tokenizing a huge body costs neither its time nor its memory.
    opts.max_tokens = limits.max_model_len;
    try {
      ids = tok.encode(p.get<std::string>(), opts);
    } catch (const TokenLimitExceeded&) {
      throw ApiError(400,
                     "the prompt has more than " + std::to_string(limits.max_model_len) +
                         " tokens, the context length: /tokenize counts what could be a prompt",
                     "invalid_request_error", "prompt");
    }
  } else {
    // The chat request's own parsing: the same template, tools and limits as a chat completion.
    ordered_json chat = body;
    chat.erase("add_special_tokens");
    if (!chat.contains("model")) chat["model"] = limits.model_name;  // optional here, as in vLLM
    ids = parse_chat_request(chat, limits, tok, prompter).prompt_ids;
  }
  return json{{"count", ids.size()}, {"max_model_len", limits.max_model_len}, {"tokens", ids}};
}

json detokenize_response(const ordered_json& body, const ApiLimits& limits, const tokenizer::Tokenizer& tok) {
  if (!body.is_object()) throw ApiError(400, "the body must be a JSON object", "invalid_request_error");
  check_model(body, limits);
  if (!body.contains("tokens") || !body["tokens"].is_array())
    throw ApiError(400, "tokens must be an array of token ids", "invalid_request_error", "tokens");
  // No sequence the model holds is longer than its context: more ids are refused before decoding.
  if (static_cast<int64_t>(body["tokens"].size()) > limits.max_model_len)
    throw ApiError(400,
                   "tokens has " + std::to_string(body["tokens"].size()) + " ids, more than the context length " +
                       std::to_string(limits.max_model_len),
                   "invalid_request_error", "tokens");
  std::vector<int32_t> ids;
  ids.reserve(body["tokens"].size());
  for (const ordered_json& t : body["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= limits.vocab_size)
      throw ApiError(400, "tokens must be token ids in [0, " + std::to_string(limits.vocab_size - 1) + "]",
                     "invalid_request_error", "tokens");
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return json{{"prompt", tok.decode(ids, false)}};
}

}  // namespace specd::server

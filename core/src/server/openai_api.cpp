#include "server/openai_api.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "common/untrusted.hpp"
#include "config/config.hpp"
#include "specd/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::server {

using nlohmann::json;

ApiError bad_request(const std::string& message, const std::string& param) {
  return ApiError(400, message, "invalid_request_error", param);
}

json error_body(const ApiError& e) {
  json err = {{"message", e.what()}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return json{{"error", std::move(err)}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json parse_body(const std::string& body) {
  json j;
  try {
    j = parse_json(body);
  } catch (const JsonError& e) {
    if (e.invalid_utf8) throw bad_request(std::string("the request body is not valid UTF-8: ") + e.what());
    if (e.number_overflow && !e.path.empty()) {
      throw bad_request(e.path + " must be a finite number; the value overflows a double", e.path);
    }
    throw bad_request(std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw bad_request("the request body must be a JSON object");
  return j;
}

namespace {

// ---- typed field readers: each names the field in its message -------------------------------

bool is_null_or_absent(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null();
}

int64_t read_int(const json& v, const std::string& name, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) {
    if (v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>() &&
        std::fabs(v.get<double>()) > 9.0e15) {
      throw bad_request(name + " is out of range: must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                            "]",
                        name);
    }
    throw bad_request(name + " must be an integer, got " + json_type_name(v), name);
  }
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw bad_request(name + " is out of range: must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                      name);
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) {
    throw bad_request(name + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                          std::to_string(x),
                      name);
  }
  return x;
}

double read_number(const json& v, const std::string& name, double lo, double hi, bool lo_open = false) {
  if (!v.is_number()) throw bad_request(name + " must be a number, got " + json_type_name(v), name);
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || (lo_open && x == lo) || x > hi) {
    throw bad_request(name + " must be in " + (lo_open ? "(" : "[") + json(lo).dump() + ", " + json(hi).dump() +
                          "], got " + v.dump(),
                      name);
  }
  return x;
}

// A number the engine keeps as a float: besides the range, a non-zero value must stay non-zero
// and normal as a float (1e-300 would silently become 0, a different request).
float read_float(const json& v, const std::string& name, double lo, double hi, bool lo_open = false) {
  const double x = read_number(v, name, lo, hi, lo_open);
  const auto f = static_cast<float>(x);
  if (x != 0.0 && !std::isnormal(f)) {
    throw bad_request(fmt::format("{} must be {}at least {:.3g} (the smallest normal float; the engine computes in "
                                  "float), got {}",
                                  name, lo_open ? "" : "0 or ", std::numeric_limits<float>::min(), v.dump()),
                      name);
  }
  return f;
}

bool read_bool(const json& v, const std::string& name) {
  if (!v.is_boolean()) throw bad_request(name + " must be a boolean, got " + json_type_name(v), name);
  return v.get<bool>();
}

const std::string& read_string(const json& v, const std::string& name) {
  if (!v.is_string()) throw bad_request(name + " must be a string, got " + json_type_name(v), name);
  return v.get_ref<const std::string&>();
}

// ---- fields shared by both endpoints ---------------------------------------------------------

// OpenAI fields specd accepts without acting on them (they do not change the tokens produced).
const std::set<std::string>& ignored_fields() {
  static const std::set<std::string> s = {"store", "metadata", "service_tier", "parallel_tool_calls"};
  return s;
}

// Fields that change generation in ways specd does not implement: accepted only with their
// neutral value (the one that means "off"); anything else is a 400 naming the field.
void check_neutral(const json& body, const std::string& key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return;
  const json& v = *it;
  bool neutral = false;
  if (key == "logit_bias") {
    neutral = v.is_object() && v.empty();
  } else if (key == "presence_penalty" || key == "frequency_penalty") {
    neutral = v.is_number() && v.get<double>() == 0.0;
  } else if (key == "repetition_penalty") {
    neutral = v.is_number() && v.get<double>() == 1.0;
  } else if (key == "logprobs") {
    neutral = (v.is_boolean() && !v.get<bool>()) || (v.is_number_integer() && v.get<int64_t>() == 0);
  } else if (key == "top_logprobs") {
    neutral = v.is_number_integer() && v.get<int64_t>() == 0;
  } else if (key == "echo") {
    neutral = v.is_boolean() && !v.get<bool>();
  } else if (key == "best_of") {
    neutral = v.is_number_integer() && v.get<int64_t>() == 1;
  } else if (key == "suffix") {
    neutral = v.is_string() && v.get_ref<const std::string&>().empty();
  } else if (key == "response_format") {
    neutral = v.is_object() && v.size() == 1 && v.contains("type") && v["type"] == "text";
  } else if (key == "tools" || key == "functions") {
    neutral = v.is_array() && v.empty();
  } else if (key == "tool_choice" || key == "function_call") {
    neutral = v.is_string() && v.get_ref<const std::string&>() == "none";
  }
  if (!neutral) {
    throw bad_request("'" + key + "' is not supported by specd (got " + (v.empty() ? "an empty " : "a non-neutral ") +
                          json_type_name(v) + "); omit it or pass its neutral value",
                      key);
  }
}

const std::set<std::string>& neutral_fields() {
  static const std::set<std::string> s = {"logit_bias", "presence_penalty", "frequency_penalty", "repetition_penalty",
                                          "logprobs", "top_logprobs", "echo", "best_of", "suffix",
                                          "response_format", "tools", "functions", "tool_choice", "function_call"};
  return s;
}

SpeculativeOptions read_speculative(const json& v) {
  SpeculativeOptions s;
  if (v.is_null()) return s;
  if (!v.is_object()) throw bad_request(std::string("speculative must be an object, got ") + json_type_name(v), "speculative");
  for (const auto& [key, value] : v.items()) {
    if (value.is_null()) continue;
    if (key == "enabled") {
      s.enabled = read_bool(value, "speculative.enabled");
    } else if (key == "num_speculative_tokens") {
      s.num_speculative_tokens = static_cast<int32_t>(read_int(value, "speculative.num_speculative_tokens", 0, 32));
    } else if (key == "arm") {
      s.arm = read_string(value, "speculative.arm");
    } else {
      throw bad_request("unknown field speculative." + clip(key) + " (expected enabled, num_speculative_tokens, arm)",
                        "speculative." + clip(key));
    }
  }
  return s;
}

std::vector<std::string> read_stop(const json& v) {
  std::vector<std::string> out;
  if (v.is_null()) return out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.size() > 16) throw bad_request("stop may hold at most 16 strings, got " + std::to_string(v.size()), "stop");
    for (const json& s : v) out.push_back(read_string(s, "stop[]"));
  } else {
    throw bad_request(std::string("stop must be a string or an array of strings, got ") + json_type_name(v), "stop");
  }
  for (const std::string& s : out) {
    if (s.empty()) throw bad_request("stop strings must not be empty", "stop");
  }
  return out;
}

// Reads every shared field into `req`; `allowed` are the endpoint's own fields, handled by the
// caller. Unknown fields are a 400: a misspelt sampling field must not silently do nothing.
void read_common(const json& body, const ApiLimits& limits, const std::set<std::string>& allowed,
                 GenerationRequest& req, std::optional<int64_t>& max_tokens) {
  static const std::set<std::string> kCommon = {
      "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "stop_token_ids",
      "stream", "stream_options", "n", "ignore_eos", "speculative", "user"};
  for (const auto& [key, value] : body.items()) {
    if (kCommon.count(key) || allowed.count(key) || ignored_fields().count(key)) continue;
    if (neutral_fields().count(key)) {
      check_neutral(body, key);
      continue;
    }
    throw bad_request("unknown field '" + clip(key) + "'", clip(key));
  }

  if (is_null_or_absent(body, "model")) throw bad_request("model is required", "model");
  const std::string& model = read_string(body["model"], "model");
  if (model != limits.model_name) {
    throw ApiError(404, "the model '" + clip(model) + "' does not exist; this server serves '" + limits.model_name + "'",
                   "invalid_request_error", "model", "model_not_found");
  }

  SamplingParams& sp = req.sampling;
  if (!is_null_or_absent(body, "max_tokens")) {
    max_tokens = read_int(body["max_tokens"], "max_tokens", 1, limits.max_tokens_limit);
  }
  if (!is_null_or_absent(body, "temperature")) {
    sp.temperature = read_float(body["temperature"], "temperature", 0.0, 2.0);
  }
  if (!is_null_or_absent(body, "top_p")) sp.top_p = read_float(body["top_p"], "top_p", 0.0, 1.0, true);
  if (!is_null_or_absent(body, "top_k")) {
    sp.top_k = static_cast<int32_t>(read_int(body["top_k"], "top_k", -1, limits.vocab_size));
  }
  if (!is_null_or_absent(body, "min_p")) sp.min_p = read_float(body["min_p"], "min_p", 0.0, 1.0);
  if (!is_null_or_absent(body, "seed")) {
    sp.seed = static_cast<uint64_t>(
        read_int(body["seed"], "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  }
  if (body.contains("stop")) sp.stop = read_stop(body["stop"]);
  if (!is_null_or_absent(body, "stop_token_ids")) {
    const json& v = body["stop_token_ids"];
    if (!v.is_array()) throw bad_request("stop_token_ids must be an array of integers", "stop_token_ids");
    for (const json& id : v) {
      sp.stop_token_ids.push_back(static_cast<int32_t>(read_int(id, "stop_token_ids[]", 0, limits.vocab_size - 1)));
    }
  }
  if (!is_null_or_absent(body, "ignore_eos")) sp.ignore_eos = read_bool(body["ignore_eos"], "ignore_eos");
  if (!is_null_or_absent(body, "n")) {
    const int64_t n = read_int(body["n"], "n", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    if (n != 1) throw bad_request("n must be 1 (specd returns one choice per request), got " + std::to_string(n), "n");
  }
  if (!is_null_or_absent(body, "stream")) req.stream = read_bool(body["stream"], "stream");
  if (!is_null_or_absent(body, "stream_options")) {
    const json& so = body["stream_options"];
    if (!req.stream) throw bad_request("stream_options is only allowed when stream is true", "stream_options");
    if (!so.is_object()) throw bad_request("stream_options must be an object", "stream_options");
    for (const auto& [key, value] : so.items()) {
      if (key == "include_usage") {
        if (!value.is_null()) req.include_usage = read_bool(value, "stream_options.include_usage");
      } else {
        throw bad_request("unknown field stream_options." + clip(key), "stream_options." + clip(key));
      }
    }
  }
  if (body.contains("speculative")) req.speculative = read_speculative(body["speculative"]);
  if (!is_null_or_absent(body, "user")) req.user = read_string(body["user"], "user");
}

void check_prompt_length(const GenerationRequest& req, const ApiLimits& limits, const std::string& param) {
  const auto n = static_cast<int64_t>(req.prompt_ids.size());
  if (n > limits.max_prompt_tokens) {
    throw bad_request("the prompt has " + std::to_string(n) + " tokens, more than the limit of " +
                          std::to_string(limits.max_prompt_tokens) + " (context length " +
                          std::to_string(limits.max_model_len) + ")",
                      param);
  }
}

// Default and clamp for max_tokens: an explicit value is kept (the engine stops at the context
// length with finish_reason "length"); an absent one is `fallback`, capped by the room left.
void apply_max_tokens(GenerationRequest& req, const ApiLimits& limits, std::optional<int64_t> max_tokens,
                      int64_t fallback) {
  if (max_tokens) {
    req.sampling.max_tokens = static_cast<int32_t>(*max_tokens);
    return;
  }
  const int64_t room = limits.max_model_len - static_cast<int64_t>(req.prompt_ids.size());
  req.sampling.max_tokens = static_cast<int32_t>(std::max<int64_t>(1, std::min(fallback, room)));
}

// The engine's own check of the sampling parameters: whatever it would refuse is a 400 here,
// never a failed generation (500) later.
void check_sampling(const GenerationRequest& req) {
  if (std::string err = validate_sampling_params(req.sampling); !err.empty()) throw bad_request(err);
}

std::vector<int32_t> read_token_ids(const json& arr, const ApiLimits& limits) {
  std::vector<int32_t> ids;
  for (const json& t : arr) ids.push_back(static_cast<int32_t>(read_int(t, "prompt[]", 0, limits.vocab_size - 1)));
  return ids;
}

}  // namespace

GenerationRequest parse_completion_request(const json& body, const ApiLimits& limits, const tokenizer::Tokenizer& tok) {
  GenerationRequest req;
  std::optional<int64_t> max_tokens;
  read_common(body, limits, {"prompt"}, req, max_tokens);

  if (is_null_or_absent(body, "prompt")) throw bad_request("prompt is required", "prompt");
  const json& p = body["prompt"];
  tokenizer::EncodeOptions opts;  // BOS from the post-processor; special-token text is plain text
  if (p.is_string()) {
    req.prompt_ids = tok.encode(p.get_ref<const std::string&>(), opts);
  } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
    req.prompt_ids = read_token_ids(p, limits);
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    req.prompt_ids = tok.encode(p[0].get_ref<const std::string&>(), opts);
  } else if (p.is_array() && p.size() == 1 && p[0].is_array()) {
    req.prompt_ids = read_token_ids(p[0], limits);
  } else if (p.is_array() && p.size() > 1 && (p[0].is_string() || p[0].is_array())) {
    throw bad_request("only one prompt per request is supported, got " + std::to_string(p.size()), "prompt");
  } else {
    throw bad_request("prompt must be a string, an array of token ids, or an array holding one of those", "prompt");
  }
  if (req.prompt_ids.empty()) throw bad_request("prompt must not be empty", "prompt");
  check_prompt_length(req, limits, "prompt");
  apply_max_tokens(req, limits, max_tokens, 16);
  check_sampling(req);
  return req;
}

GenerationRequest parse_chat_request(const json& body, const ApiLimits& limits, const tokenizer::Tokenizer& tok,
                                     ChatTemplateKind chat_template) {
  GenerationRequest req;
  req.chat = true;
  std::optional<int64_t> max_tokens;
  read_common(body, limits, {"messages", "max_completion_tokens"}, req, max_tokens);
  if (!is_null_or_absent(body, "max_completion_tokens")) {
    const int64_t mct = read_int(body["max_completion_tokens"], "max_completion_tokens", 1, limits.max_tokens_limit);
    if (max_tokens && *max_tokens != mct) {
      throw bad_request("max_tokens and max_completion_tokens disagree; pass one of them", "max_completion_tokens");
    }
    max_tokens = mct;
  }

  if (is_null_or_absent(body, "messages")) throw bad_request("messages is required", "messages");
  const json& msgs = body["messages"];
  if (!msgs.is_array() || msgs.empty()) throw bad_request("messages must be a non-empty array", "messages");
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const json& m = msgs[i];
    if (!m.is_object()) throw bad_request(at + " must be an object", at);
    ChatMessage cm;
    for (const auto& [key, value] : m.items()) {
      if (key == "role") {
        cm.role = read_string(value, at + ".role");
      } else if (key == "content") {
        if (value.is_string()) {
          cm.content = value.get<std::string>();
        } else if (value.is_array()) {
          for (const json& part : value) {
            if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text")) {
              throw bad_request(at + ".content: only parts of type \"text\" are supported", at + ".content");
            }
            cm.content += read_string(part["text"], at + ".content[].text");
          }
        } else if (!value.is_null()) {
          throw bad_request(at + ".content must be a string or an array of text parts", at + ".content");
        }
      } else if (key == "name") {
        (void)read_string(value, at + ".name");
      } else {
        throw bad_request(at + ": unsupported field '" + clip(key) + "'", at + "." + clip(key));
      }
    }
    if (cm.role.empty()) throw bad_request(at + ".role is required", at + ".role");
    messages.push_back(std::move(cm));
  }
  try {
    req.prompt_ids = tokenize_chat(chat_template, tok, messages);
  } catch (const Error& e) {
    throw bad_request(e.what(), "messages");
  }
  check_prompt_length(req, limits, "messages");
  for (int32_t id : chat_stop_token_ids(chat_template, tok)) req.sampling.stop_token_ids.push_back(id);
  apply_max_tokens(req, limits, max_tokens, limits.max_tokens_limit);
  check_sampling(req);
  return req;
}

void resolve_arm(GenerationRequest& req, const std::string& header, const ApiLimits& limits) {
  std::string& arm = req.speculative.arm;
  const std::string param = arm.empty() && !header.empty() ? "X-Specd-Arm" : "speculative.arm";
  if (!header.empty() && !arm.empty() && header != arm)
    throw bad_request("speculative.arm and the X-Specd-Arm header name different arms; give one", "speculative.arm");
  if (arm.empty()) arm = header;
  if (arm.empty()) return;
  if (!config::valid_arm_name(arm))
    throw bad_request(param + " must be 1 to 64 characters of A-Z a-z 0-9 _ - .", param);
  if (std::find(limits.arms.begin(), limits.arms.end(), arm) == limits.arms.end()) {
    std::string known;
    for (const std::string& a : limits.arms) known += (known.empty() ? "" : ", ") + a;
    throw bad_request("unknown A/B arm '" + arm + "'" +
                          (known.empty() ? std::string(": this server has no speculative decoding")
                                         : " (arms: " + known + ")"),
                      param);
  }
}

// ---- responses --------------------------------------------------------------------------------

namespace {
json reason_json(const std::string& r) { return r.empty() ? json(nullptr) : json(r); }
}  // namespace

json usage_json(int32_t prompt_tokens, int32_t completion_tokens) {
  return json{{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens}};
}

json completion_response(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                         int32_t prompt_tokens, int32_t completion_tokens) {
  return json{{"id", m.id},
              {"object", "text_completion"},
              {"created", m.created},
              {"model", m.model},
              {"choices", json::array({json{{"index", 0},
                                            {"text", text},
                                            {"logprobs", nullptr},
                                            {"finish_reason", reason_json(finish_reason)}}})},
              {"usage", usage_json(prompt_tokens, completion_tokens)}};
}

json chat_response(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                   int32_t prompt_tokens, int32_t completion_tokens) {
  return json{{"id", m.id},
              {"object", "chat.completion"},
              {"created", m.created},
              {"model", m.model},
              {"choices", json::array({json{{"index", 0},
                                            {"message", json{{"role", "assistant"}, {"content", text}}},
                                            {"logprobs", nullptr},
                                            {"finish_reason", reason_json(finish_reason)}}})},
              {"usage", usage_json(prompt_tokens, completion_tokens)}};
}

json completion_chunk(const ResponseMeta& m, const std::string& text, const std::string& finish_reason) {
  return json{{"id", m.id},
              {"object", "text_completion"},
              {"created", m.created},
              {"model", m.model},
              {"choices", json::array({json{{"index", 0},
                                            {"text", text},
                                            {"logprobs", nullptr},
                                            {"finish_reason", reason_json(finish_reason)}}})}};
}

json chat_chunk(const ResponseMeta& m, const std::string& text, const std::string& finish_reason, bool first) {
  json delta = json::object();
  if (first) delta["role"] = "assistant";
  if (first || !text.empty()) delta["content"] = text;
  return json{{"id", m.id},
              {"object", "chat.completion.chunk"},
              {"created", m.created},
              {"model", m.model},
              {"choices", json::array({json{{"index", 0},
                                            {"delta", std::move(delta)},
                                            {"logprobs", nullptr},
                                            {"finish_reason", reason_json(finish_reason)}}})}};
}

json usage_chunk(const ResponseMeta& m, bool chat, int32_t prompt_tokens, int32_t completion_tokens) {
  return json{{"id", m.id},
              {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", m.created},
              {"model", m.model},
              {"choices", json::array()},
              {"usage", usage_json(prompt_tokens, completion_tokens)}};
}

void add_arm_to_usage(json& response, const std::string& arm) {
  if (auto it = response.find("usage"); it != response.end() && it->is_object()) (*it)["arm"] = arm;
}

}  // namespace specd::server

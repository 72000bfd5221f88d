#include "server/openai_api.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <mutex>
#include <set>

#include "common/untrusted.hpp"
#include "config/config.hpp"
#include "server/chat_messages.hpp"
#include "server/chat_template.hpp"
#include "server/structured_request.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::server {

using nlohmann::json;
using nlohmann::ordered_json;

ApiError bad_request(const std::string& message, const std::string& param) {
  return ApiError(400, message, "invalid_request_error", param);
}

json error_body(const ApiError& e) {
  json err = {{"message", e.what()}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return json{{"error", std::move(err)}};
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

ordered_json parse_body(const std::string& body) {
  ordered_json j;
  try {
    j = parse_ordered_json(body);
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

bool present(const ordered_json& body, const char* key) {
  auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

int64_t read_int(const ordered_json& v, const std::string& name, int64_t lo, int64_t hi) {
  const std::string range = fmt::format("[{}, {}]", lo, hi);
  if (!v.is_number_integer()) {
    if (v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>() &&
        std::fabs(v.get<double>()) > 9.0e15) {
      throw bad_request(name + " is out of range: must be in " + range, name);
    }
    throw bad_request(name + " must be an integer, got " + json_type_name(v), name);
  }
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw bad_request(name + " is out of range: must be in " + range, name);
  }
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) throw bad_request(name + " must be in " + range + ", got " + std::to_string(x), name);
  return x;
}

double read_number(const ordered_json& v, const std::string& name, double lo, double hi, bool lo_open = false) {
  if (!v.is_number()) throw bad_request(name + " must be a number, got " + json_type_name(v), name);
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || (lo_open && x == lo) || x > hi) {
    throw bad_request(
        name + " must be in " + (lo_open ? "(" : "[") + json(lo).dump() + ", " + json(hi).dump() + "], got " + v.dump(),
        name);
  }
  return x;
}

// A number the engine keeps as a float: besides the range, a non-zero value must stay non-zero
// and normal as a float (1e-300 would silently become 0, a different request).
float read_float(const ordered_json& v, const std::string& name, double lo, double hi, bool lo_open = false) {
  const double x = read_number(v, name, lo, hi, lo_open);
  const auto f = static_cast<float>(x);
  if (x != 0.0 && !std::isnormal(f)) {
    throw bad_request(fmt::format("{} must be {}at least {:.3g}{} (the smallest normal float; the engine computes in "
                                  "float), got {}",
                                  name, lo_open ? "" : "0 or ", std::numeric_limits<float>::min(),
                                  lo < 0 ? " in magnitude" : "", v.dump()),
                      name);
  }
  return f;
}

bool read_bool(const ordered_json& v, const std::string& name) {
  if (!v.is_boolean()) throw bad_request(name + " must be a boolean, got " + json_type_name(v), name);
  return v.get<bool>();
}

const std::string& read_string(const ordered_json& v, const std::string& name) {
  if (!v.is_string()) throw bad_request(name + " must be a string, got " + json_type_name(v), name);
  return v.get_ref<const std::string&>();
}

// ---- unknown and unsupported fields -----------------------------------------------------------

// vLLM's convention: a field the server does not know is ignored, logged once per name.
void warn_unknown_field(const std::string& key) {
  static std::mutex mu;
  static std::set<std::string> warned;
  const std::string name = key.size() > 64 ? key.substr(0, 64) + "..." : key;
  std::lock_guard lock(mu);
  if (warned.size() >= 1024 || !warned.insert(name).second) return;
  log::get("server").warn("ignoring the unknown request field '{}' (logged once per field name)", name);
}

// OpenAI and vLLM fields that change the output in ways specd does not implement: accepted only
// with the value that means "off"; anything else is a 400 naming the field.
void check_unsupported(const ordered_json& body) {
  auto fail = [](const std::string& key, const std::string& why) {
    throw bad_request("'" + key + "' is not supported by specd: " + why, key);
  };
  if (present(body, "suffix") && !(body["suffix"].is_string() && body["suffix"].get_ref<const std::string&>().empty()))
    fail("suffix", "insertion (fill-in-the-middle) is not implemented");
  if (present(body, "functions") && !(body["functions"].is_array() && body["functions"].empty()))
    fail("functions", "use 'tools' (the deprecated functions field is not read)");
  if (present(body, "function_call") && body["function_call"] != "none") fail("function_call", "use 'tool_choice'");
  for (const char* key : {"chat_template", "logits_processors", "prediction", "audio"})
    if (present(body, key)) fail(key, "not implemented");
  if (present(body, "modalities") && body["modalities"] != ordered_json::array({"text"}))
    fail("modalities", "only [\"text\"] output is produced");
}

// tool_choice: "none" (parse_tools off; the template still sees the tools, as in vLLM), "auto",
// or a forced call: "required" ("") or {"type": "function", "function": {"name": N}} (N).
std::optional<std::string> read_tool_choice(const ordered_json& tc, bool& parse_tools) {
  if (tc == "none") {
    parse_tools = false;
    return std::nullopt;
  }
  if (tc == "auto") return std::nullopt;
  if (tc == "required") return std::string();
  if (tc.is_object() && tc.contains("function") && tc["function"].is_object() && tc["function"].contains("name") &&
      tc["function"]["name"].is_string() && (!tc.contains("type") || tc["type"] == "function"))
    return tc["function"]["name"].get<std::string>();
  throw bad_request(
      "tool_choice must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}",
      "tool_choice");
}

SpeculativeOptions read_speculative(const ordered_json& v) {
  SpeculativeOptions s;
  if (v.is_null()) return s;
  if (!v.is_object())
    throw bad_request(std::string("speculative must be an object, got ") + json_type_name(v), "speculative");
  for (const auto& [key, value] : v.items()) {
    if (value.is_null()) continue;
    if (key == "enabled") {
      s.enabled = read_bool(value, "speculative.enabled");
    } else if (key == "num_speculative_tokens") {
      s.num_speculative_tokens =
          static_cast<int32_t>(read_int(value, "speculative.num_speculative_tokens", 0, kMaxSpeculativeTokens));
    } else if (key == "dynamic") {
      s.dynamic = read_bool(value, "speculative.dynamic");
    } else if (key == "arm") {
      s.arm = read_string(value, "speculative.arm");
    } else {
      throw bad_request(
          "unknown field speculative." + clip(key) + " (expected enabled, num_speculative_tokens, dynamic, arm)",
          "speculative." + clip(key));
    }
  }
  return s;
}

std::vector<std::string> read_stop(const ordered_json& v) {
  std::vector<std::string> out;
  if (v.is_null()) return out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.size() > 16) throw bad_request("stop may hold at most 16 strings, got " + std::to_string(v.size()), "stop");
    for (const ordered_json& s : v) out.push_back(read_string(s, "stop[]"));
  } else {
    throw bad_request(std::string("stop must be a string or an array of strings, got ") + json_type_name(v), "stop");
  }
  for (const std::string& s : out)
    if (s.empty()) throw bad_request("stop strings must not be empty", "stop");
  return out;
}

std::vector<int32_t> read_token_list(const ordered_json& v, const std::string& name, int64_t vocab) {
  if (!v.is_array()) throw bad_request(name + " must be an array of token ids", name);
  std::vector<int32_t> ids;
  for (const ordered_json& id : v) ids.push_back(static_cast<int32_t>(read_int(id, name + "[]", 0, vocab - 1)));
  return ids;
}

void read_logit_bias(const ordered_json& v, const ApiLimits& limits, SamplingParams& sp) {
  if (!v.is_object()) throw bad_request("logit_bias must be an object of token id -> bias", "logit_bias");
  if (v.size() > 300) throw bad_request("logit_bias may name at most 300 tokens", "logit_bias");
  for (const auto& [key, value] : v.items()) {
    // Decimal digits only, as OpenAI's token ids: no sign, space or embedded NUL ("7\u00009").
    uint64_t id = 0;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    const bool digits = !key.empty() && key.size() <= 10 && key.front() >= '0' && key.front() <= '9';
    if (!digits || ec != std::errc() || end != key.data() + key.size() ||
        id >= static_cast<uint64_t>(limits.vocab_size))
      throw bad_request("logit_bias keys must be token ids in [0, " + std::to_string(limits.vocab_size - 1) +
                            "] written in decimal digits, got \"" + clip(key) + "\"",
                        "logit_bias");
    sp.logit_bias.emplace_back(static_cast<int32_t>(id), read_float(value, "logit_bias." + key, -100.0, 100.0));
  }
}

// Sampling fields, with the model's generation_config.json defaults for omitted ones.
void read_sampling(const ordered_json& body, const ApiLimits& limits, SamplingParams& sp) {
  const SamplingDefaults& d = limits.defaults;
  if (d.temperature) sp.temperature = static_cast<float>(*d.temperature);
  if (d.top_p) sp.top_p = static_cast<float>(*d.top_p);
  if (d.top_k) sp.top_k = static_cast<int32_t>(*d.top_k);
  if (d.min_p) sp.min_p = static_cast<float>(*d.min_p);
  if (d.repetition_penalty) sp.repetition_penalty = static_cast<float>(*d.repetition_penalty);
  auto number = [&](const char* key, double lo, double hi, bool lo_open, float& out) {
    if (present(body, key)) out = read_float(body[key], key, lo, hi, lo_open);
  };
  number("temperature", 0.0, 2.0, false, sp.temperature);
  number("top_p", 0.0, 1.0, true, sp.top_p);
  number("min_p", 0.0, 1.0, false, sp.min_p);
  number("presence_penalty", -2.0, 2.0, false, sp.presence_penalty);
  number("frequency_penalty", -2.0, 2.0, false, sp.frequency_penalty);
  number("repetition_penalty", 0.0, 2.0, true, sp.repetition_penalty);
  if (present(body, "top_k")) sp.top_k = static_cast<int32_t>(read_int(body["top_k"], "top_k", -1, limits.vocab_size));
  if (present(body, "seed"))
    sp.seed = static_cast<uint64_t>(
        read_int(body["seed"], "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  if (body.contains("stop")) sp.stop = read_stop(body["stop"]);
  if (present(body, "stop_token_ids"))
    sp.stop_token_ids = read_token_list(body["stop_token_ids"], "stop_token_ids", limits.vocab_size);
  if (present(body, "ignore_eos")) sp.ignore_eos = read_bool(body["ignore_eos"], "ignore_eos");
  if (present(body, "min_tokens"))
    sp.min_tokens = static_cast<int32_t>(read_int(body["min_tokens"], "min_tokens", 0, 1 << 24));
  if (present(body, "skip_special_tokens"))
    sp.skip_special_tokens = read_bool(body["skip_special_tokens"], "skip_special_tokens");
  if (present(body, "include_stop_str_in_output"))
    sp.include_stop_str_in_output = read_bool(body["include_stop_str_in_output"], "include_stop_str_in_output");
  if (present(body, "logit_bias")) read_logit_bias(body["logit_bias"], limits, sp);
}

void read_stream_options(const ordered_json& body, GenerationRequest& req) {
  if (present(body, "stream")) req.stream = read_bool(body["stream"], "stream");
  if (!present(body, "stream_options")) return;
  const ordered_json& so = body["stream_options"];
  if (!req.stream) throw bad_request("stream_options is only allowed when stream is true", "stream_options");
  if (!so.is_object()) throw bad_request("stream_options must be an object", "stream_options");
  for (const auto& [key, value] : so.items()) {
    if (value.is_null()) continue;
    if (key == "include_usage") {
      req.include_usage = read_bool(value, "stream_options.include_usage");
    } else if (key == "continuous_usage_stats") {
      req.continuous_usage = read_bool(value, "stream_options.continuous_usage_stats");
    } else {
      warn_unknown_field("stream_options." + key);
    }
  }
}

// Fields of both endpoints; `own` are the endpoint's, read by the caller. Unknown fields are
// logged and ignored (vLLM's convention).
void read_common(const ordered_json& body, const ApiLimits& limits, const std::set<std::string>& own,
                 GenerationRequest& req) {
  static const std::set<std::string> kCommon = {
      "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "stop_token_ids", "stream",
      "stream_options", "n", "best_of", "ignore_eos", "speculative", "presence_penalty", "frequency_penalty",
      "repetition_penalty", "logit_bias", "min_tokens", "skip_special_tokens", "include_stop_str_in_output",
      "response_format", "suffix", "functions", "function_call", "guided_json", "guided_regex", "guided_choice",
      "guided_grammar", "structured_outputs", "chat_template", "logits_processors", "prediction", "audio", "modalities",
      // Accepted without effect on the tokens produced.
      "user", "store", "metadata", "service_tier", "parallel_tool_calls", "request_id", "priority"};
  for (const auto& [key, value] : body.items())
    if (!kCommon.count(key) && !own.count(key)) warn_unknown_field(key);
  check_unsupported(body);

  if (!present(body, "model")) throw bad_request("model is required", "model");
  const std::string& model = read_string(body["model"], "model");
  if (model != limits.model_name) {
    throw ApiError(404,
                   "the model '" + clip(model) + "' does not exist; this server serves '" + limits.model_name + "'",
                   "invalid_request_error", "model", "model_not_found");
  }
  read_sampling(body, limits, req.sampling);
  if (present(body, "n")) req.n = static_cast<int32_t>(read_int(body["n"], "n", 1, kMaxChoices));
  if (present(body, "best_of") && read_int(body["best_of"], "best_of", 1, kMaxChoices) != req.n)
    throw bad_request("best_of must equal n: specd returns every choice it generates", "best_of");
  read_stream_options(body, req);
  if (body.contains("speculative")) req.speculative = read_speculative(body["speculative"]);
  req.structured = read_structured_output(body);
  if (present(body, "user")) req.user = read_string(body["user"], "user");
}

[[noreturn]] void prompt_too_long(const ApiLimits& limits, const std::string& param) {
  throw bad_request("the prompt is more than the limit of " + std::to_string(limits.max_prompt_tokens) +
                        " tokens (context length " + std::to_string(limits.max_model_len) + ")",
                    param);
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

// max_tokens: an explicit value is capped by the room the context leaves; an absent one is
// `fallback` (0 = the room), capped the same way. server.max_tokens_limit, when set, refuses more.
void apply_max_tokens(GenerationRequest& req, const ApiLimits& limits, const std::string& field,
                      std::optional<int64_t> requested, int64_t fallback) {
  if (requested && limits.max_tokens_limit > 0 && *requested > limits.max_tokens_limit)
    throw bad_request(field + " must be at most " + std::to_string(limits.max_tokens_limit) +
                          " (server.max_tokens_limit), got " + std::to_string(*requested),
                      field);
  const int64_t room = std::max<int64_t>(1, limits.max_model_len - static_cast<int64_t>(req.prompt_ids.size()));
  int64_t want = requested ? *requested : (fallback > 0 ? fallback : room);
  if (!requested && limits.max_tokens_limit > 0) want = std::min<int64_t>(want, limits.max_tokens_limit);
  req.sampling.max_tokens = static_cast<int32_t>(std::min(want, room));
}

// The engine's own check of the sampling parameters: whatever it would refuse is a 400 here,
// never a failed generation (500) later.
void check_sampling(const GenerationRequest& req) {
  if (std::string err = validate_sampling_params(req.sampling); !err.empty()) throw bad_request(err);
}

std::vector<int32_t> read_prompt(const ordered_json& p, const ApiLimits& limits, const tokenizer::Tokenizer& tok,
                                 std::string& text) {
  tokenizer::EncodeOptions opts;  // BOS from the post-processor; special-token text is plain text
  // A prompt past the limit is refused as soon as that is certain (check_prompt_length words it
  // when the whole prompt was tokenized), not after tokenizing megabytes that cannot fit.
  opts.max_tokens = limits.max_prompt_tokens;
  auto ids = [&](const ordered_json& arr) {
    // Refused before the ids are copied and decoded to text (64 prompts of 40k ids each).
    if (static_cast<int64_t>(arr.size()) > limits.max_prompt_tokens) prompt_too_long(limits, "prompt");
    std::vector<int32_t> out = read_token_list(arr, "prompt", limits.vocab_size);
    text = tok.decode(out, false);
    return out;
  };
  auto encode = [&](const ordered_json& s) {
    text = s.get<std::string>();
    try {
      return tok.encode(text, opts);
    } catch (const TokenLimitExceeded&) {
      prompt_too_long(limits, "prompt");
    }
  };
  if (p.is_string()) return encode(p);
  if (p.is_array() && !p.empty() && p[0].is_number_integer()) return ids(p);
  if (p.is_array() && p.size() == 1 && p[0].is_string()) return encode(p[0]);
  if (p.is_array() && p.size() == 1 && p[0].is_array()) return ids(p[0]);
  throw bad_request("prompt must be a string, an array of token ids, or an array holding one of those", "prompt");
}

}  // namespace

GenerationRequest parse_completion_request(const ordered_json& body, const ApiLimits& limits,
                                           const tokenizer::Tokenizer& tok) {
  GenerationRequest req;
  read_common(body, limits, {"prompt", "echo", "logprobs", "prompt_logprobs"}, req);
  if (!present(body, "prompt")) throw bad_request("prompt is required", "prompt");
  req.prompt_ids = read_prompt(body["prompt"], limits, tok, req.prompt_text);
  if (req.prompt_ids.empty()) throw bad_request("prompt must not be empty", "prompt");
  check_prompt_length(req, limits, "prompt");
  if (present(body, "echo")) req.echo = read_bool(body["echo"], "echo");
  if (present(body, "logprobs")) {
    req.sampling.logprobs = static_cast<int32_t>(read_int(body["logprobs"], "logprobs", 0, kMaxLogprobs));
    req.want_logprobs = true;
  }
  if (present(body, "prompt_logprobs"))
    req.sampling.prompt_logprobs =
        static_cast<int32_t>(read_int(body["prompt_logprobs"], "prompt_logprobs", 0, kMaxLogprobs));
  if (req.echo && req.want_logprobs) req.sampling.prompt_logprobs = req.sampling.logprobs;
  std::optional<int64_t> max_tokens;
  if (present(body, "max_tokens")) max_tokens = read_int(body["max_tokens"], "max_tokens", 0, 1 << 24);
  apply_max_tokens(req, limits, "max_tokens", max_tokens, 16);
  if (max_tokens == 0) {
    // Scoring: the prompt only (lm-eval's log-likelihood requests).
    if (!req.echo) throw bad_request("max_tokens 0 generates nothing; it needs echo: true", "max_tokens");
    if (req.n != 1) throw bad_request("max_tokens 0 takes n = 1", "n");
    req.sampling.max_tokens = 0;
    req.sampling.prompt_logprobs = std::max(req.sampling.prompt_logprobs, 0);
  }
  check_sampling(req);
  return req;
}

std::vector<GenerationRequest> parse_completion_requests(const ordered_json& body, const ApiLimits& limits,
                                                         const tokenizer::Tokenizer& tok) {
  const bool list = present(body, "prompt") && body["prompt"].is_array() && body["prompt"].size() > 1 &&
                    (body["prompt"][0].is_string() || body["prompt"][0].is_array());
  if (!list) return {parse_completion_request(body, limits, tok)};
  const ordered_json& prompts = body["prompt"];
  if (prompts.size() > kMaxPrompts)
    throw bad_request("a list of at most " + std::to_string(kMaxPrompts) + " prompts is accepted, got " +
                          std::to_string(prompts.size()),
                      "prompt");
  std::vector<GenerationRequest> out;
  int64_t choices = 0;
  // The body without its prompts (a copy of all of them held 41 MB for 64 prompts of 40k ids);
  // its keys are unique already, so members are appended without a lookup each.
  ordered_json one = ordered_json::object();
  auto& members = one.get_ref<ordered_json::object_t&>();
  for (const auto& [key, value] : body.items())
    if (key != "prompt") members.emplace_back(key, value);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const ordered_json& p = prompts[i];
    if (!p.is_string() && !p.is_array())
      throw bad_request("prompt[" + std::to_string(i) + "]: a list of prompts holds strings or arrays of token ids",
                        "prompt");
    one["prompt"] = ordered_json::array({p});
    try {
      out.push_back(parse_completion_request(one, limits, tok));
    } catch (const ApiError& e) {
      if (!e.param.starts_with("prompt")) throw;
      throw ApiError(e.status, "prompt[" + std::to_string(i) + "]: " + e.what(), e.type, e.param, e.code);
    }
    choices += out.back().n;
  }
  if (choices > kMaxChoices)
    throw bad_request("the prompts ask for " + std::to_string(choices) + " choices in all (prompts x n); at most " +
                          std::to_string(kMaxChoices) + " are accepted",
                      "n");
  return out;
}

GenerationRequest parse_chat_request(const ordered_json& body, const ApiLimits& limits, const tokenizer::Tokenizer& tok,
                                     const ChatPrompter& prompter) {
  (void)tok;
  GenerationRequest req;
  req.chat = true;
  read_common(body, limits,
              {"messages", "max_completion_tokens", "logprobs", "top_logprobs", "tools", "tool_choice",
               "chat_template_kwargs", "add_generation_prompt", "continue_final_message", "echo"},
              req);
  for (const char* key : {"continue_final_message", "echo"})
    if (present(body, key) && read_bool(body[key], key))
      throw bad_request(std::string("'") + key + "' is not supported by specd", key);
  std::optional<int64_t> max_tokens;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!present(body, key)) continue;
    const int64_t v = read_int(body[key], key, 1, 1 << 24);
    if (max_tokens && *max_tokens != v)
      throw bad_request("max_tokens and max_completion_tokens disagree; pass one of them", "max_completion_tokens");
    max_tokens = v;
  }
  if (present(body, "logprobs")) req.want_logprobs = read_bool(body["logprobs"], "logprobs");
  if (present(body, "top_logprobs")) {
    const auto top = static_cast<int32_t>(read_int(body["top_logprobs"], "top_logprobs", 0, kMaxLogprobs));
    if (!req.want_logprobs) throw bad_request("top_logprobs needs logprobs: true", "top_logprobs");
    req.sampling.logprobs = top;
  }
  if (req.want_logprobs) req.sampling.logprobs = std::max(req.sampling.logprobs, 0);

  jinja::ChatInput in;
  if (!present(body, "messages")) throw bad_request("messages is required", "messages");
  // A chat of more messages than the context has tokens cannot be a prompt: refused before the
  // messages become template values (100k one-letter messages took 145 MB to render and fail).
  if (body["messages"].is_array() && static_cast<int64_t>(body["messages"].size()) > limits.max_model_len)
    throw bad_request("messages has " + std::to_string(body["messages"].size()) +
                          " entries, more than the context length " + std::to_string(limits.max_model_len) +
                          " has tokens",
                      "messages");
  in.messages = template_messages(body["messages"]);
  bool parse_tools = false;
  if (present(body, "tools") && !body["tools"].empty()) {
    in.tools = template_tools(body["tools"]);
    parse_tools = true;
  }
  std::optional<std::string> forced_call;  // tool_choice "required" ("") or a named function
  if (present(body, "tool_choice")) forced_call = read_tool_choice(body["tool_choice"], parse_tools);
  if (parse_tools) req.tool_calls = prompter.tool_call_format();
  if (forced_call) {
    if (!parse_tools) throw bad_request("tool_choice \"required\" or a named function needs tools", "tool_choice");
    if (req.tool_calls == ToolCallFormat::kNone)
      throw bad_request(
          "tool_choice \"required\" or a named function needs a tool-call format, and this server "
          "has none for this model (server.tool_call_parser)",
          "tool_choice");
    if (req.structured.active())
      throw bad_request(
          "tool_choice \"required\" or a named function constrains the output already; drop the "
          "other structured-output field",
          "tool_choice");
    req.structured = tool_call_output(body["tools"], *forced_call, req.tool_calls);
  }
  if (parse_tools && req.tool_calls == ToolCallFormat::kNone && !limits.allow_unsupported_tools)
    throw bad_request(
        "tools need a tool-call parser and this server has none (server.tool_call_parser: none, or auto with a "
        "chat template that writes no known tool-call format), so the model's calls could not come back as "
        "tool_calls; send tool_choice: \"none\", or the operator sets server.allow_unsupported_tools: true",
        "tools");
  if (present(body, "add_generation_prompt"))
    in.add_generation_prompt = read_bool(body["add_generation_prompt"], "add_generation_prompt");
  if (present(body, "chat_template_kwargs")) {
    const ordered_json& kw = body["chat_template_kwargs"];
    if (!kw.is_object()) throw bad_request("chat_template_kwargs must be an object", "chat_template_kwargs");
    try {
      for (auto it = kw.begin(); it != kw.end(); ++it) in.kwargs.emplace_back(it.key(), jinja::from_json(it.value()));
    } catch (const jinja::TemplateError& e) {
      throw bad_request(std::string("chat_template_kwargs: ") + e.what(), "chat_template_kwargs");
    }
  }
  try {
    jinja::RenderLimits render_limits;
    render_limits.timeout = std::chrono::milliseconds(limits.template_timeout_ms);
    render_limits.cancel = limits.cancel_renders;
    const std::string text = prompter.render(in, render_limits);
    if (!in.tools.is_none() && !limits.allow_unsupported_tools) {
      jinja::ChatInput bare = in;
      bare.tools = jinja::Value::none();
      if (prompter.render(bare, render_limits) == text)
        throw bad_request(
            "the chat template does not render tools (the prompt is the same without them), so the model would "
            "never see them; use a template that does (server.chat_template), or the operator sets "
            "server.allow_unsupported_tools: true",
            "tools");
    }
    req.prompt_ids = prompter.encode(text, limits.max_prompt_tokens);
  } catch (const TokenLimitExceeded&) {
    prompt_too_long(limits, "messages");
  } catch (const jinja::TemplateError& e) {
    // A template's own message (raise_exception) may be as long as the template made it.
    throw bad_request("the chat template failed: " + clip(e.what(), 1000), "messages");
  }
  if (req.prompt_ids.empty()) throw bad_request("the chat template rendered an empty prompt", "messages");
  check_prompt_length(req, limits, "messages");
  for (int32_t id : prompter.stop_token_ids()) req.sampling.stop_token_ids.push_back(id);
  apply_max_tokens(req, limits, "max_tokens", max_tokens, limits.defaults.max_tokens.value_or(0));
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
    throw bad_request(
        "unknown A/B arm '" + arm + "'" +
            (known.empty() ? std::string(": this server has no speculative decoding") : " (arms: " + known + ")"),
        param);
  }
}

}  // namespace specd::server

#include "server/openai_response.hpp"

#include <fmt/format.h>

#include "tokenizer/tokenizer.hpp"

namespace specd::server {

using nlohmann::json;

namespace {

json reason_json(const std::string& r) {
  return r.empty() ? json(nullptr) : json(r);
}

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

json bytes_of(const std::string& s) {
  json out = json::array();
  for (char c : s) out.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

ResponseBuilder::ResponseBuilder(const GenerationRequest& request, ResponseMeta meta, const tokenizer::Tokenizer& tok,
                                 ResponseOptions options)
    : req_(request), meta_(std::move(meta)), tok_(tok), opts_(std::move(options)) {
  req_.sampling = {};
  choices_.resize(static_cast<size_t>(std::max(1, req_.n)));
  prompt_tokens_ = static_cast<int32_t>(req_.prompt_ids.size());
  text_offset_ = req_.echo ? 0 : code_points(req_.prompt_text);
}

// The text a token adds after the tokens before it (the last few suffice): a SentencePiece
// token's leading space comes out as in the full text, as vLLM's incremental detokenizer
// reports it, so that the tokens of a completion concatenate to its text.
std::string ResponseBuilder::token_text(int32_t id, std::vector<int32_t> before) const {
  constexpr size_t kContext = 4;
  if (before.size() > kContext) before.erase(before.begin(), before.end() - kContext);
  const std::string base = tok_.decode(before, false);
  before.push_back(id);
  std::string full = tok_.decode(before, false);
  if (full.compare(0, base.size(), base) == 0) return full.substr(base.size());
  return tok_.decode({&id, 1}, false);
}

// The last tokens before choice c's next token: the prompt's, then the choice's own.
std::vector<int32_t> ResponseBuilder::context(const Choice& c) const {
  constexpr size_t kContext = 4;
  std::vector<int32_t> out;
  const size_t from_prompt =
      c.tokens.size() >= kContext ? 0 : std::min(req_.prompt_ids.size(), kContext - c.tokens.size());
  out.insert(out.end(), req_.prompt_ids.end() - static_cast<std::ptrdiff_t>(from_prompt), req_.prompt_ids.end());
  out.insert(out.end(), c.tokens.end() - static_cast<std::ptrdiff_t>(std::min(c.tokens.size(), kContext)),
             c.tokens.end());
  return out;
}

ResponseBuilder::Choice& ResponseBuilder::choice(const RequestOutput& out) {
  const auto i = static_cast<size_t>(out.index);
  if (i >= choices_.size()) choices_.resize(i + 1);
  return choices_[i];
}

void ResponseBuilder::count(Choice& c, const RequestOutput& out) {
  if (!out.prompt_logprobs.empty())
    prompt_logprobs_.insert(prompt_logprobs_.end(), out.prompt_logprobs.begin(), out.prompt_logprobs.end());
  if (out.finish_reason != FinishReason::kNone) c.finish = out.finish_reason;
  c.generated = out.num_generated_tokens;
  cached_tokens_ = std::max(cached_tokens_, out.num_cached_tokens);
  c.drafts = out.num_draft_tokens;
  c.accepted = out.num_accepted_tokens;
  c.spec_steps = out.num_spec_steps;
  if (!out.drafted_at.empty()) {
    c.drafted_at = out.drafted_at;
    c.accepted_at = out.accepted_at;
  }
}

std::string ResponseBuilder::finish_reason(const Choice& c) const {
  if (c.finish == FinishReason::kNone) return "";
  if (c.finish == FinishReason::kStop && !c.tool_calls.empty()) return "tool_calls";
  return std::string(finish_reason_name(c.finish));
}

std::string ResponseBuilder::call_id(const ToolCall& call, int32_t choice) const {
  const std::string base = meta_.id.substr(meta_.id.find('-') + 1);
  return "call_" + base + "_" + std::to_string(choice) + "_" + std::to_string(call.index);
}

json ResponseBuilder::usage() const {
  int32_t completion = 0, drafts = 0, accepted = 0, steps = 0;
  std::vector<int64_t> drafted_at, accepted_at;
  for (const Choice& c : choices_) {
    completion += c.generated;
    drafts += c.drafts;
    accepted += c.accepted;
    steps += c.spec_steps;
    if (drafted_at.size() < c.drafted_at.size()) {
      drafted_at.resize(c.drafted_at.size(), 0);
      accepted_at.resize(c.drafted_at.size(), 0);
    }
    for (size_t i = 0; i < c.drafted_at.size(); ++i) {
      drafted_at[i] += c.drafted_at[i];
      accepted_at[i] += c.accepted_at[i];
    }
  }
  json u = {{"prompt_tokens", prompt_tokens_},
            {"completion_tokens", completion},
            {"total_tokens", prompt_tokens_ + completion},
            {"prompt_tokens_details", {{"cached_tokens", cached_tokens_}}}};
  if (opts_.speculative) {
    u["speculative"] = {{"draft_tokens", drafts},
                        {"accepted_tokens", accepted},
                        {"spec_steps", steps},
                        {"acceptance_rate", drafts > 0 ? static_cast<double>(accepted) / drafts : 0.0},
                        {"drafted_at_position", drafted_at},
                        {"accepted_at_position", accepted_at}};
  }
  if (!opts_.arm.empty()) u["arm"] = opts_.arm;
  return u;
}

// Completions: {tokens, token_logprobs, top_logprobs, text_offset}; echo puts the prompt first
// (its first token has no logprob). Chat: {"content": [{token, logprob, bytes, top_logprobs}]}.
json ResponseBuilder::logprobs_json(const std::vector<TokenLogprobs>& lps, size_t first_offset, bool with_prompt,
                                    std::vector<int32_t> before) const {
  if (req_.chat) {
    json content = json::array();
    for (const TokenLogprobs& t : lps) {
      const std::string s = token_text(t.token, before);
      json top = json::array();
      for (const TokenLogprob& alt : t.top) {
        const std::string a = token_text(alt.token, before);
        top.push_back({{"token", a}, {"logprob", alt.logprob}, {"bytes", bytes_of(a)}});
      }
      content.push_back({{"token", s}, {"logprob", t.logprob}, {"bytes", bytes_of(s)}, {"top_logprobs", top}});
      before.push_back(t.token);
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
  size_t offset = first_offset;
  auto push = [&](int32_t token, const TokenLogprobs* t) {
    const std::string s = token_text(token, before);
    tokens.push_back(s);
    offsets.push_back(offset);
    offset += code_points(s);
    if (t == nullptr) {
      values.push_back(nullptr);
      tops.push_back(nullptr);
      before.push_back(token);
      return;
    }
    values.push_back(t->logprob);
    json top = json::object();
    for (const TokenLogprob& alt : t->top) top[token_text(alt.token, before)] = alt.logprob;
    if (!top.contains(s)) top[s] = t->logprob;  // vLLM: the chosen token is always listed
    tops.push_back(std::move(top));
    before.push_back(token);
  };
  if (with_prompt && !req_.prompt_ids.empty()) {
    push(req_.prompt_ids[0], nullptr);
    for (const TokenLogprobs& t : prompt_logprobs_) push(t.token, &t);
  }
  for (const TokenLogprobs& t : lps) push(t.token, &t);
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

void ResponseBuilder::add(const RequestOutput& out) {
  Choice& c = choice(out);
  c.text += out.text_delta;
  c.logprobs.insert(c.logprobs.end(), out.logprobs.begin(), out.logprobs.end());
  c.tokens.insert(c.tokens.end(), out.new_token_ids.begin(), out.new_token_ids.end());
  c.tool_calls.insert(c.tool_calls.end(), out.tool_calls.begin(), out.tool_calls.end());
  count(c, out);
}

json ResponseBuilder::response() const {
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    json entry = {{"index", opts_.first_index + static_cast<int32_t>(i)},
                  {"finish_reason", reason_json(finish_reason(c))},
                  {"logprobs", nullptr}};
    if (req_.chat) {
      json message = {{"role", "assistant"}, {"content", c.text}};
      if (!c.tool_calls.empty()) {
        if (c.text.empty()) message["content"] = nullptr;
        json calls = json::array();
        for (const ToolCall& t : c.tool_calls)
          calls.push_back({{"id", call_id(t, static_cast<int32_t>(i))},
                           {"type", "function"},
                           {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
        message["tool_calls"] = std::move(calls);
      }
      entry["message"] = std::move(message);
      if (req_.want_logprobs) entry["logprobs"] = logprobs_json(c.logprobs, 0, false, req_.prompt_ids);
    } else {
      entry["text"] = (req_.echo ? req_.prompt_text : std::string()) + c.text;
      if (req_.want_logprobs)
        entry["logprobs"] =
            logprobs_json(c.logprobs, text_offset_, req_.echo, req_.echo ? std::vector<int32_t>{} : req_.prompt_ids);
    }
    choices.push_back(std::move(entry));
  }
  json out = {{"id", meta_.id},
              {"object", req_.chat ? "chat.completion" : "text_completion"},
              {"created", meta_.created},
              {"model", meta_.model},
              {"choices", std::move(choices)},
              {"usage", usage()}};
  if (!meta_.system_fingerprint.empty()) out["system_fingerprint"] = meta_.system_fingerprint;
  return out;
}

json ResponseBuilder::chunk(int32_t index, json delta_or_text, const json& logprobs, const std::string& finish) const {
  json c = {{"index", opts_.first_index + index}, {"logprobs", logprobs}, {"finish_reason", reason_json(finish)}};
  c[req_.chat ? "delta" : "text"] = std::move(delta_or_text);
  json out = {{"id", meta_.id},
              {"object", req_.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", meta_.created},
              {"model", meta_.model},
              {"choices", json::array({std::move(c)})}};
  if (!meta_.system_fingerprint.empty()) out["system_fingerprint"] = meta_.system_fingerprint;
  if (req_.continuous_usage) out["usage"] = usage();
  return out;
}

void ResponseBuilder::stream_piece(Choice& c, int32_t index, const std::string& text,
                                   const std::vector<TokenLogprobs>& lps, const std::vector<ToolCall>& calls, bool last,
                                   std::vector<json>& chunks) {
  c.tool_calls.insert(c.tool_calls.end(), calls.begin(), calls.end());
  const std::string finish = last ? finish_reason(c) : "";
  const bool has_lps = req_.want_logprobs && !lps.empty();
  json lp = nullptr;
  if (has_lps) {
    lp = logprobs_json(lps, text_offset_ + code_points(c.text), false, context(c));
    for (const TokenLogprobs& t : lps) c.tokens.push_back(t.token);
  }
  if (!req_.chat) {
    if (!text.empty() || has_lps) chunks.push_back(chunk(index, text, lp, ""));
  } else {
    for (const ToolCall& t : calls) {
      chunks.push_back(chunk(index,
                             {{"tool_calls", json::array({{{"index", t.index},
                                                           {"id", call_id(t, index)},
                                                           {"type", "function"},
                                                           {"function", {{"name", t.name}, {"arguments", ""}}}}})}},
                             nullptr, ""));
      chunks.push_back(chunk(
          index, {{"tool_calls", json::array({{{"index", t.index}, {"function", {{"arguments", t.arguments}}}}})}},
          nullptr, ""));
    }
    json delta = json::object();
    if (!text.empty()) delta["content"] = text;
    if (!text.empty() || has_lps) chunks.push_back(chunk(index, std::move(delta), lp, ""));
  }
  c.text += text;
  // The choice's end comes in a chunk of its own, as OpenAI and llama-server send it: an empty
  // delta (chat) or text (completions) with finish_reason.
  if (!finish.empty()) chunks.push_back(chunk(index, req_.chat ? json::object() : json(""), nullptr, finish));
}

void ResponseBuilder::stream(const RequestOutput& out, std::vector<json>& chunks) {
  Choice& c = choice(out);
  const int32_t index = out.index;
  count(c, out);
  const FinishReason finish = c.finish;
  c.finish = FinishReason::kNone;  // reported with the last piece only
  if (!c.started) {
    c.started = true;
    if (req_.chat) {
      chunks.push_back(chunk(index, {{"role", "assistant"}, {"content", ""}}, nullptr, ""));
    } else if (req_.echo) {
      json lp = req_.want_logprobs ? logprobs_json({}, 0, true, {}) : json(nullptr);
      chunks.push_back(chunk(index, req_.prompt_text, lp, ""));
    }
  }
  const size_t n = out.new_token_ids.size();
  std::vector<TokenLogprobs> lps = out.logprobs;
  if (!opts_.token_by_token || n <= 1 || out.token_text_ends.size() != n) {
    c.finish = finish;
    stream_piece(c, index, out.text_delta, lps, out.tool_calls, true, chunks);
    return;
  }
  size_t from = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool last = i + 1 == n;
    const size_t to = last ? out.text_delta.size() : std::min<size_t>(out.token_text_ends[i], out.text_delta.size());
    std::vector<TokenLogprobs> one;
    if (i < lps.size()) one.push_back(lps[i]);
    if (last) c.finish = finish;
    stream_piece(c, index, out.text_delta.substr(from, to - from), one, last ? out.tool_calls : std::vector<ToolCall>{},
                 last, chunks);
    from = to;
  }
}

json ResponseBuilder::usage_chunk() const {
  json out = {{"id", meta_.id},           {"object", req_.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", meta_.created}, {"model", meta_.model},
              {"choices", json::array()}, {"usage", usage()}};
  if (!meta_.system_fingerprint.empty()) out["system_fingerprint"] = meta_.system_fingerprint;
  return out;
}

json merge_usage(const std::vector<json>& usages) {
  json total = usages.front();
  for (size_t r = 1; r < usages.size(); ++r) {
    const json& u = usages[r];
    for (const char* key : {"prompt_tokens", "completion_tokens", "total_tokens"})
      total[key] = total[key].get<int64_t>() + u[key].get<int64_t>();
    json& cached = total["prompt_tokens_details"]["cached_tokens"];
    cached = cached.get<int64_t>() + u["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
    if (!total.contains("speculative")) continue;
    json& s = total["speculative"];
    const json& o = u["speculative"];
    for (const char* key : {"draft_tokens", "accepted_tokens", "spec_steps"})
      s[key] = s[key].get<int64_t>() + o[key].get<int64_t>();
    for (const char* key : {"drafted_at_position", "accepted_at_position"}) {
      std::vector<int64_t> a = s[key].get<std::vector<int64_t>>();
      const std::vector<int64_t> b = o[key].get<std::vector<int64_t>>();
      if (a.size() < b.size()) a.resize(b.size(), 0);
      for (size_t i = 0; i < b.size(); ++i) a[i] += b[i];
      s[key] = a;
    }
    const auto drafts = s["draft_tokens"].get<int64_t>();
    s["acceptance_rate"] = drafts > 0 ? static_cast<double>(s["accepted_tokens"].get<int64_t>()) / drafts : 0.0;
  }
  return total;
}

json merge_responses(const std::vector<json>& responses) {
  json out = responses.front();
  std::vector<json> usages;
  for (size_t r = 0; r < responses.size(); ++r) {
    usages.push_back(responses[r]["usage"]);
    if (r == 0) continue;
    for (const json& c : responses[r]["choices"]) out["choices"].push_back(c);
  }
  out["usage"] = merge_usage(usages);
  return out;
}

std::string system_fingerprint(const config::EngineConfig& cfg) {
  std::string what =
      std::string(SPECD_VERSION) + "\n" + cfg.model.path + "\n" + cfg.model.dtype + "\n" + cfg.kv_cache.dtype + "\n";
  const config::SpeculativeConfig& s = cfg.speculative;
  if (s.enabled) {
    what +=
        s.proposer.name + "\n" + std::to_string(s.num_speculative_tokens) + (s.dynamic ? " dynamic\n" : " static\n");
    for (const plugin::Params::Entry& e : s.proposer.params.entries()) what += e.key + "=" + e.text + "\n";
    for (const config::ArmConfig& a : s.arms)
      what += a.name + " " + a.verifier.name + " " + std::to_string(a.num_speculative_tokens) + "\n";
  }
  uint64_t h = 14695981039346656037ull;  // FNV-1a 64
  for (const unsigned char c : what) h = (h ^ c) * 1099511628211ull;
  return fmt::format("specd-{}-{:016x}", SPECD_VERSION, h);
}

}  // namespace specd::server

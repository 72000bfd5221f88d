// The A/B log's line format (docs/ab-testing.md): one JSON object per request, written by
// AbLogWriter (ab_log.cpp) and read back by `specd ab report` (ab/report.cpp). Parsing depends on
// nothing but the record types, so the libFuzzer target `ab_log` builds it alone.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

#include "common/untrusted.hpp"
#include "specd/error.hpp"
#include "speculative/ab_log.hpp"

namespace specd::speculative {

using nlohmann::json;

namespace {

// [position] how many steps drafted (or accepted) a token there.
json per_position(const std::vector<int32_t>& counts) {
  std::vector<int64_t> at;
  for (int32_t n : counts) {
    if (n > static_cast<int32_t>(at.size())) at.resize(static_cast<size_t>(n), 0);
    for (int32_t i = 0; i < n; ++i) ++at[static_cast<size_t>(i)];
  }
  return at;
}

// Typed field readers for parse_ab_line: a missing or mistyped field names itself.
class Fields {
 public:
  Fields(const json& j, std::string where) : j_(j), where_(std::move(where)) {}
  const json& at(const char* key) const {
    const auto it = j_.find(key);
    if (it == j_.end()) fail(key, "is missing");
    return *it;
  }
  std::string str(const char* key) const {
    const json& v = at(key);
    if (!v.is_string()) fail(key, "must be a string");
    return v.get<std::string>();
  }
  double num(const char* key) const {
    const json& v = at(key);
    if (!v.is_number()) fail(key, "must be a number");
    return v.get<double>();
  }
  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    const json& v = at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      fail(key, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v.get<int64_t>();
  }
  bool boolean(const char* key) const {
    const json& v = at(key);
    if (!v.is_boolean()) fail(key, "must be a boolean");
    return v.get<bool>();
  }
  std::vector<int32_t> ints(const char* key, int32_t lo) const {
    const json& v = at(key);
    if (!v.is_array()) fail(key, "must be an array of integers");
    std::vector<int32_t> out;
    out.reserve(v.size());
    for (const json& x : v) {
      if (!x.is_number_integer() || x.get<int64_t>() < lo || x.get<int64_t>() > 1024) fail(key, "holds a bad count");
      out.push_back(static_cast<int32_t>(x.get<int64_t>()));
    }
    return out;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(ErrorCode::kInvalidArgument, where_ + ": field '" + key + "' " + what);
  }

 private:
  const json& j_;
  std::string where_;
};

AbShadowTrace parse_shadow(const std::string& name, const json& j, const std::string& where, size_t steps) {
  const std::string at = where + ": shadow." + name;
  if (!j.is_object()) throw Error(ErrorCode::kInvalidArgument, at + " must be an object");
  const Fields f(j, at);
  AbShadowTrace s;
  s.arm = name;
  s.verifier = f.str("verifier");
  s.lossless = f.boolean("lossless");
  s.k = static_cast<int32_t>(f.integer("k", 0, 1024));
  s.drafted = f.ints("drafted", 0);
  s.accepted = f.ints("accepted", -1);
  if (s.drafted.size() != steps || s.accepted.size() != steps)
    f.fail("accepted", "must have one entry per verified step of the request (" + std::to_string(steps) + ")");
  for (size_t i = 0; i < steps; ++i)
    if (s.accepted[i] > s.drafted[i]) f.fail("accepted", "has a step that accepted more than it drafted");
  s.compared_tokens = f.integer("compared", 0, INT64_MAX);
  s.differing_tokens = f.integer("differing", 0, s.compared_tokens);
  s.logprob_sum = f.num("logprob_sum");
  s.logprob_tokens = f.integer("logprob_tokens", 0, INT64_MAX);
  s.verify_s = f.num("verify_s");
  return s;
}

}  // namespace

std::string to_json_line(const AbRecord& r) {
  json shadow = json::object();
  for (const AbShadowTrace& s : r.shadows) {
    shadow[s.arm] = {{"verifier", s.verifier},
                     {"lossless", s.lossless},
                     {"k", s.k},
                     {"drafted", s.drafted},
                     {"accepted", s.accepted},
                     {"compared", s.compared_tokens},
                     {"differing", s.differing_tokens},
                     {"logprob_sum", s.logprob_sum},
                     {"logprob_tokens", s.logprob_tokens},
                     {"verify_s", s.verify_s}};
  }
  const json j = {{"v", 1},
                  {"id", r.id},
                  {"arm", r.arm},
                  {"verifier", r.verifier},
                  {"lossless", r.lossless},
                  {"assigned", r.assigned},
                  {"finish", r.finish},
                  {"temperature", r.temperature},
                  {"k", r.k},
                  {"prompt_tokens", r.prompt_tokens},
                  {"generated_tokens", r.generated_tokens},
                  {"decode_steps", r.decode_steps},
                  {"ttft_s", r.ttft_s},
                  {"tpot_s", r.tpot_s},
                  {"latency_s", r.latency_s},
                  {"step_s", r.step_s},
                  {"drafted", r.drafted},
                  {"accepted", r.accepted},
                  {"drafted_at", per_position(r.drafted)},
                  {"accepted_at", per_position(r.accepted)},
                  {"logprob_sum", r.logprob_sum},
                  {"logprob_tokens", r.logprob_tokens},
                  {"shadow", std::move(shadow)}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

AbRecord parse_ab_line(const std::string& line, const std::string& where) {
  json j;
  try {
    j = parse_json(line);  // the requests' nesting limit: a 30 MB "[[[..." line is refused unbuilt
  } catch (const JsonError& e) {
    throw Error(ErrorCode::kInvalidArgument, where + ": not a JSON line: " + e.what());
  }
  if (!j.is_object()) throw Error(ErrorCode::kInvalidArgument, where + ": expected a JSON object");
  const Fields f(j, where);
  if (f.integer("v", 0, INT32_MAX) != 1) f.fail("v", "is not a version this specd reads (1)");
  AbRecord r;
  r.id = static_cast<uint64_t>(f.integer("id", 0, INT64_MAX));
  r.arm = f.str("arm");
  r.verifier = f.str("verifier");
  r.lossless = f.boolean("lossless");
  r.assigned = f.str("assigned");
  r.finish = f.str("finish");
  r.temperature = f.num("temperature");
  r.k = static_cast<int32_t>(f.integer("k", 0, 1024));
  r.prompt_tokens = static_cast<int32_t>(f.integer("prompt_tokens", 0, INT32_MAX));
  r.generated_tokens = static_cast<int32_t>(f.integer("generated_tokens", 0, INT32_MAX));
  r.decode_steps = static_cast<int32_t>(f.integer("decode_steps", 0, INT32_MAX));
  r.ttft_s = f.num("ttft_s");
  r.tpot_s = f.num("tpot_s");
  r.latency_s = f.num("latency_s");
  r.step_s = f.num("step_s");
  r.drafted = f.ints("drafted", 0);
  r.accepted = f.ints("accepted", 0);
  if (r.accepted.size() != r.drafted.size()) f.fail("accepted", "must have as many entries as 'drafted'");
  for (size_t i = 0; i < r.drafted.size(); ++i)
    if (r.accepted[i] > r.drafted[i]) f.fail("accepted", "has a step that accepted more than it drafted");
  r.logprob_sum = f.num("logprob_sum");
  r.logprob_tokens = f.integer("logprob_tokens", 0, INT64_MAX);
  const json& shadow = f.at("shadow");
  if (!shadow.is_object()) f.fail("shadow", "must be an object");
  for (const auto& [name, s] : shadow.items()) r.shadows.push_back(parse_shadow(name, s, where, r.drafted.size()));
  return r;
}

}  // namespace specd::speculative

#include "speculative/ab_log.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/untrusted.hpp"
#include "sched/scheduler.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"
#include "speculative/arm_verifiers.hpp"
#include "speculative/arms.hpp"

namespace specd::speculative {

using nlohmann::json;

// ---- the line format ----------------------------------------------------------------------------

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

// ---- the writer ---------------------------------------------------------------------------------

AbLogWriter::AbLogWriter(std::string path, int64_t max_bytes, int32_t keep)
    : path_(std::move(path)), max_bytes_(max_bytes), keep_(keep) {
  std::error_code dir_error;  // a missing directory is created; fopen reports what still fails
  if (const std::filesystem::path dir = std::filesystem::path(path_).parent_path(); !dir.empty())
    std::filesystem::create_directories(dir, dir_error);
  file_ = std::fopen(path_.c_str(), "a");
  if (file_ == nullptr)
    throw Error(ErrorCode::kInvalidArgument,
                "speculative.ab_log: cannot open " + path_ + " for appending: " + std::strerror(errno));
  std::error_code ec;
  const auto size = std::filesystem::file_size(path_, ec);
  bytes_ = ec ? 0 : static_cast<int64_t>(size);
  thread_ = std::thread([this] { run(); });
}

AbLogWriter::~AbLogWriter() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (file_ != nullptr) std::fclose(file_);
}

void AbLogWriter::push(AbRecord record) {
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= kMaxQueued) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(record));
  }
  cv_.notify_one();
}

uint64_t AbLogWriter::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

void AbLogWriter::run() {
  std::vector<AbRecord> batch;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty() && stop_) return;
      batch.swap(queue_);
    }
    for (const AbRecord& r : batch) write(r);
    batch.clear();
    if (file_ != nullptr) std::fflush(file_);
  }
}

void AbLogWriter::write(const AbRecord& r) {
  if (file_ == nullptr) return;
  const std::string line = to_json_line(r) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size()) {
    if (!write_failed_) log::get("spec").error("A/B log {}: write failed: {}", path_, std::strerror(errno));
    write_failed_ = true;
    return;
  }
  bytes_ += static_cast<int64_t>(line.size());
  if (bytes_ >= max_bytes_) rotate();
}

void AbLogWriter::rotate() {
  std::fclose(file_);
  std::error_code ec;
  namespace fs = std::filesystem;
  fs::remove(path_ + "." + std::to_string(keep_), ec);
  for (int32_t i = keep_ - 1; i >= 1; --i)
    if (fs::exists(path_ + "." + std::to_string(i), ec))
      fs::rename(path_ + "." + std::to_string(i), path_ + "." + std::to_string(i + 1), ec);
  fs::rename(path_, path_ + ".1", ec);
  if (ec) log::get("spec").error("A/B log {}: rotation failed: {}", path_, ec.message());
  file_ = std::fopen(path_.c_str(), "w");
  bytes_ = 0;
  if (file_ == nullptr) log::get("spec").error("A/B log {}: cannot reopen after rotation", path_);
}

// ---- the recorder -------------------------------------------------------------------------------

AbRecorder::AbRecorder(const ArmVerifiers& arms, const std::string& path, int64_t max_bytes, int32_t keep)
    : arms_(arms), writer_(path, max_bytes, keep) {}

void AbRecorder::add(RequestId id, const ArmAssignment& a, const SamplingParams& params, int32_t k,
                     Clock::time_point now) {
  Trace& t = traces_[id];
  t.arrival = now;
  AbRecord& r = t.record;
  const Arm& arm = arms_.arm(static_cast<size_t>(a.arm));
  r.id = id;
  r.arm = arm.name;
  r.verifier = arm.verifier->name();
  r.lossless = arm.verifier->capabilities().lossless != 0;
  r.assigned = std::string(arm_choice_name(a.choice));
  r.temperature = params.temperature;
  r.k = k;
  for (size_t s = 0; s < arms_.size(); ++s) {
    const Arm& shadow = arms_.arm(s);
    if (!shadow.shadow || static_cast<int32_t>(s) == a.arm) continue;
    AbShadowTrace st;
    st.arm = shadow.name;
    st.verifier = shadow.verifier->name();
    st.lossless = shadow.verifier->capabilities().lossless != 0;
    st.k = shadow.k;
    r.shadows.push_back(std::move(st));
    t.shadow_arms.push_back(static_cast<int32_t>(s));
  }
}

void AbRecorder::verified(RequestId id, int32_t drafted, int32_t accepted, float emitted_logprob,
                          std::span<const ShadowOutcome> shadows, double step_s) {
  const auto it = traces_.find(id);
  if (it == traces_.end()) return;
  Trace& t = it->second;
  AbRecord& r = t.record;
  r.drafted.push_back(drafted);
  r.accepted.push_back(accepted);
  r.logprob_sum += emitted_logprob;
  r.logprob_tokens += accepted + 1;
  r.step_s += step_s;
  for (size_t i = 0; i < r.shadows.size(); ++i) {
    AbShadowTrace& st = r.shadows[i];
    const auto s = static_cast<size_t>(t.shadow_arms[i]);
    const ShadowOutcome o = s < shadows.size() ? shadows[s] : ShadowOutcome{};
    st.drafted.push_back(o.accepted >= 0 ? o.drafted : 0);
    st.accepted.push_back(o.accepted);
    if (o.accepted < 0) continue;
    st.compared_tokens += o.compared;
    st.differing_tokens += o.differs ? 1 : 0;
    st.logprob_sum += o.logprob;
    st.logprob_tokens += o.accepted + 1;
    st.verify_s += o.seconds;
  }
}

void AbRecorder::outputs(std::span<const RequestOutput> outs, Clock::time_point now) {
  for (const RequestOutput& out : outs) output(out, now);
}

void AbRecorder::output(const RequestOutput& out, Clock::time_point now) {
  const auto it = traces_.find(out.id);
  if (it == traces_.end()) return;
  Trace& t = it->second;
  AbRecord& r = t.record;
  if (!out.new_token_ids.empty()) {
    ++r.decode_steps;
    if (!t.first_token) t.first_token = now;
  }
  if (!out.finished) return;
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  r.finish = std::string(finish_reason_name(out.finish_reason));
  r.prompt_tokens = out.num_prompt_tokens;
  r.generated_tokens = out.num_generated_tokens;
  r.latency_s = seconds(now - t.arrival);
  r.ttft_s = t.first_token ? seconds(*t.first_token - t.arrival) : r.latency_s;
  if (t.first_token && out.num_generated_tokens > 1)
    r.tpot_s = seconds(now - *t.first_token) / (out.num_generated_tokens - 1);
  writer_.push(std::move(r));
  traces_.erase(it);
}

}  // namespace specd::speculative

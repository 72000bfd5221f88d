#include "speculative/ab_log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "sched/scheduler.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"
#include "speculative/arm_verifiers.hpp"
#include "speculative/arms.hpp"

namespace specd::speculative {

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

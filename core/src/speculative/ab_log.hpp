// The A/B log (speculative.ab_log, docs/ab-testing.md): one JSON line per finished request
// that an A/B arm served, with what `specd ab report` needs to compare arms per request: the
// arm, tokens, timings, the drafted / accepted counts of every verified step, and each shadow
// arm's counterfactual accepted length for the same steps.
//
//   AbRecord      one line; to_json_line / parse_ab_line are the only (de)serializers
//   AbLogWriter   appends lines on its own thread, rotates the file by size; push() never
//                 waits for I/O, so the engine step is never blocked by the disk
//   AbRecorder    builds records from the engine's step results and outputs (engine thread)
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "specd/request.hpp"
#include "speculative/arm_record.hpp"

namespace specd::speculative {

class ArmVerifiers;
struct ArmAssignment;

// A shadow arm's view of one request: per verified step of the request, what it would have
// accepted (-1: it did not verify that step, e.g. its verifier failed).
struct AbShadowTrace {
  std::string arm;
  std::string verifier;
  bool lossless = false;
  int32_t k = 0;
  std::vector<int32_t> drafted;   // [steps] drafts it verified (the serving drafts cut to k)
  std::vector<int32_t> accepted;  // [steps]
  int64_t compared_tokens = 0;    // quality: positions both arms emit, and those that differ
  int64_t differing_tokens = 0;
  double logprob_sum = 0;  // Σ log p of the tokens it would have emitted
  int64_t logprob_tokens = 0;
  double verify_s = 0;  // its share of the shadow verifier calls
};

struct AbRecord {
  uint64_t id = 0;
  std::string arm;
  std::string verifier;
  bool lossless = false;
  std::string assigned;  // explicit | user | random
  std::string finish;    // stop | length | error | abort
  double temperature = 0;
  int32_t k = 0;  // the request's k cap
  int32_t prompt_tokens = 0;
  int32_t generated_tokens = 0;
  int32_t decode_steps = 0;  // engine steps that emitted tokens for the request
  // Seconds from the request's arrival in the engine: to the first token, per output token
  // after the first ((last - first) / (tokens - 1); 0 below 2 tokens), to the last token.
  double ttft_s = 0;
  double tpot_s = 0;
  double latency_s = 0;
  // Σ its share of the wall time (propose + score + verify, / rows in the step) of the steps that
  // verified its drafts; shadow verify_s is a share of the shadow call the same way.
  double step_s = 0;
  std::vector<int32_t> drafted;   // [steps] per step that verified a draft
  std::vector<int32_t> accepted;  // [steps]
  double logprob_sum = 0;         // Σ log p of the tokens its verifier emitted
  int64_t logprob_tokens = 0;
  std::vector<AbShadowTrace> shadows;

  bool completed() const { return finish == "stop" || finish == "length"; }
};

// One line of JSON (no newline). Per-position counts (drafted_at, accepted_at) are added for
// people reading the file; the parser recomputes them.
std::string to_json_line(const AbRecord& r);
// Throws specd::Error naming `where` (file:line) and the field on a malformed line.
AbRecord parse_ab_line(const std::string& line, const std::string& where);

class AbLogWriter {
 public:
  // Opens `path` for appending; throws specd::Error naming it when it cannot. The file is
  // rotated (path → path.1 → ... → path.<keep>, the oldest dropped) when it reaches max_bytes.
  AbLogWriter(std::string path, int64_t max_bytes, int32_t keep);
  // Writes every queued record, then stops the thread.
  ~AbLogWriter();
  AbLogWriter(const AbLogWriter&) = delete;
  AbLogWriter& operator=(const AbLogWriter&) = delete;

  // Queues a record; drops it (counted) when kMaxQueued records are already waiting.
  void push(AbRecord record);
  uint64_t dropped() const;

  static constexpr size_t kMaxQueued = 65536;

 private:
  void run();
  void write(const AbRecord& r);
  void rotate();

  std::string path_;
  int64_t max_bytes_;
  int32_t keep_;
  std::FILE* file_ = nullptr;
  int64_t bytes_ = 0;
  bool write_failed_ = false;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<AbRecord> queue_;
  uint64_t dropped_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

class AbRecorder {
 public:
  using Clock = std::chrono::steady_clock;
  // arms must outlive the recorder.
  AbRecorder(const ArmVerifiers& arms, const std::string& path, int64_t max_bytes, int32_t keep);

  // A request entered the engine on arm a.
  void add(RequestId id, const ArmAssignment& a, const SamplingParams& params, int32_t k, Clock::time_point now);
  // A step of the request that its arm verified: drafts, accepted, Σ log p of the emitted
  // tokens, the shadow arms' outcomes (one per arm; empty without shadows); step_s = the row's
  // share of the step's wall time.
  void verified(RequestId id, int32_t drafted, int32_t accepted, float emitted_logprob,
                std::span<const ShadowOutcome> shadows, double step_s);
  // Every output of a step (now = the step's end): first token, steps, and at the end the line.
  void outputs(std::span<const RequestOutput> outs, Clock::time_point now);

 private:
  struct Trace {
    AbRecord record;
    std::vector<int32_t> shadow_arms;  // arm index of record.shadows[i]
    Clock::time_point arrival;
    std::optional<Clock::time_point> first_token;
  };
  void output(const RequestOutput& out, Clock::time_point now);

  const ArmVerifiers& arms_;
  std::unordered_map<RequestId, Trace> traces_;
  AbLogWriter writer_;
};

}  // namespace specd::speculative

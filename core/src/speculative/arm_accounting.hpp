// ArmAccounting: A/B testing's engine-thread side in one place (docs/ab-testing.md): which arm
// serves a request (ArmAssigner: explicit, sticky user, seeded draw), the per-arm metrics, and
// the A/B log (AbRecorder). The verifiers themselves run where the step executes (ArmVerifiers);
// what they did reaches this object as the step's ArmStepRecord, and a row carries only its
// index into that record (StepRow::ab_row), which the engine passes along untouched:
//
//   assign(request)            Engine::add_request: the arm, k and dynamic-k of its sequence
//   step(record, row_s)        a step was collected: its verifier calls (per-arm seconds, shadow
//                              failures), and each row's share of the step's time (A/B log)
//   row(record, ab_row, ...)   a verified row's output was processed: its arm's counters and the
//                              shadow arms' counterfactual ones, and the request's A/B log trace
//   outputs(outs, now)         every output of a step: first token, steps, and the log line of
//                              each finished request
//
// Without speculation there are no arms: every request runs without one, and a request that
// names an arm fails with a message that says so. Engine thread only; the arms it reads (names,
// k, weights, verifier names and capabilities) never change after construction.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "sched/scheduler.hpp"
#include "specd/request.hpp"
#include "specd/spec_metrics.hpp"
#include "speculative/ab_log.hpp"
#include "speculative/arm_record.hpp"
#include "speculative/arms.hpp"

namespace specd::speculative {

class ArmVerifiers;

// A verified row's outcome as the output processor committed it.
struct RowOutcome {
  int32_t k = 0;  // the row's k cap (lookahead)
  int32_t drafted = 0;
  int32_t accepted = 0;
  int32_t emitted = 0;  // tokens appended (stop conditions may cut the accepted + 1 verified)
};

class ArmAccounting {
 public:
  using Clock = std::chrono::steady_clock;
  // arms: null when speculation is off. They must outlive the accounting. Opens the A/B log
  // (speculative.ab_log) when configured; throws specd::Error naming the file when it cannot.
  ArmAccounting(const ArmVerifiers* arms, const config::EngineConfig& cfg);
  ~ArmAccounting();

  // Sets seq.arm, seq.spec_k and seq.dynamic_k for `request` (id: the caller's). Returns "" or
  // why the request fails (an unknown or invalid arm name).
  std::string assign(RequestId id, const Request& request, sched::Sequence& seq);
  void step(const ArmStepRecord& record, double row_s);
  // `out` is the row's output (its arm, and for the A/B log its request and choice).
  void row(const ArmStepRecord& record, int32_t ab_row, const RequestOutput& out, const RowOutcome& o);
  void outputs(std::span<const RequestOutput> outs, Clock::time_point now);

  // Per arm (indexed like EngineInfo::arms), since construction; empty without arms.
  const std::vector<spec::ArmMetrics>& metrics() const { return metrics_; }

 private:
  const ArmVerifiers* arms_;
  bool dynamic_default_;
  std::optional<ArmAssigner> assigner_;
  std::vector<spec::ArmMetrics> metrics_;
  std::unique_ptr<AbRecorder> log_;  // speculative.ab_log; null when off
  double row_s_ = 0;                 // the collected step's time per row
};

}  // namespace specd::speculative

// The Prometheus series of speculative decoding (docs/server.md "Metrics"): engine-wide
// counters labelled {proposer, verifier}, per A/B arm {arm}, and the shadow arms' counterfactual
// counters {arm, serving_arm}, and dynamic speculation's policy {proposer, verifier} (chosen k,
// predicted vs observed acceptance and step time). Counters only mirror the engine's own totals (set_total in a
// collect hook); ratios are derived as docs/speculative.md says, plus three engine-wide gauges.
#pragma once

#include <string>
#include <vector>

#include "server/metrics.hpp"
#include "specd/engine.hpp"
#include "specd/spec_metrics.hpp"

namespace specd::server {

class SpecExporter {
 public:
  // Registers the families (no series until the engine is known).
  explicit SpecExporter(MetricsRegistry& registry);
  // The loaded engine: proposer, verifiers and arm names for the labels. No-op without
  // speculative decoding.
  void set_engine(const EngineInfo& info);
  // Copies the engine's totals into the series (from a collect hook).
  void collect(const spec::SpecMetrics& engine, const std::vector<spec::ArmMetrics>& arms);

 private:
  void collect_arm(size_t a, const spec::ArmMetrics& m);
  void collect_shadow(size_t s, size_t served, const spec::ShadowMetrics& m);
  void collect_policy(const spec::PolicyMetrics& m);

  std::string proposer_, verifier_;
  std::vector<std::string> arms_;
  Family<Counter>& drafts_;
  Family<Counter>& draft_tokens_;
  Family<Counter>& accepted_tokens_;
  Family<Counter>& emitted_tokens_;
  Family<Counter>& drafted_at_;
  Family<Counter>& accepted_at_;
  Family<Counter>& seconds_;
  Family<Gauge>& acceptance_rate_;
  Family<Gauge>& mean_length_;
  Family<Gauge>& efficiency_;
  Family<Counter>& observations_;
  Family<Counter>& observation_sum_;
  // Per arm {arm}.
  Family<Counter>& arm_requests_;
  Family<Counter>& arm_drafts_;
  Family<Counter>& arm_draft_tokens_;
  Family<Counter>& arm_accepted_tokens_;
  Family<Counter>& arm_emitted_tokens_;
  Family<Counter>& arm_drafted_at_;
  Family<Counter>& arm_accepted_at_;
  Family<Counter>& arm_verify_seconds_;
  // Shadow arm {arm} on the steps of {serving_arm}.
  Family<Counter>& shadow_drafts_;
  Family<Counter>& shadow_draft_tokens_;
  Family<Counter>& shadow_accepted_tokens_;
  Family<Counter>& shadow_drafted_at_;
  Family<Counter>& shadow_accepted_at_;
  Family<Counter>& shadow_compared_tokens_;
  Family<Counter>& shadow_differing_tokens_;
  Family<Counter>& shadow_verify_seconds_;
  Family<Counter>& shadow_failures_;
  // Dynamic speculation (spec::PolicyMetrics), {proposer, verifier} plus:
  Family<Counter>& policy_chosen_k_;  // k
  Family<Counter>& policy_steps_;
  Family<Counter>& policy_trimmed_;
  Family<Counter>& policy_accepted_;  // source: predicted | observed
  Family<Counter>& policy_seconds_;   // source: predicted | observed | abs_error | *_propose
};

}  // namespace specd::server

// The Prometheus series of the engine's own state (docs/server.md "Metrics"): the KV cache
// (blocks, blocks in use, usage ratio), preemptions, the prefix cache (cached blocks, tokens
// looked up and found) and step time by phase. Counters mirror the engine's totals (set_total
// in a collect hook).
#pragma once

#include "server/metrics.hpp"
#include "specd/engine.hpp"

namespace specd::server {

class EngineExporter {
 public:
  explicit EngineExporter(MetricsRegistry& registry);
  // The loaded engine's fixed sizes.
  void set_engine(const EngineInfo& info);
  // Copies the engine's state into the series (from a collect hook).
  void collect(const EngineStats& engine, const StepStats& steps);

 private:
  Gauge& kv_blocks_;
  Gauge& kv_blocks_used_;
  Gauge& kv_usage_;
  Gauge& kv_blocks_cached_;
  Counter& preemptions_;
  Counter& prefix_queries_;
  Counter& prefix_hits_;
  Family<Counter>& step_seconds_;
  Counter& structured_requests_;
  Family<Counter>& grammar_masks_;
  Counter& grammar_mask_seconds_;
  Family<Counter>& grammar_drafts_;
  Counter& moe_layer_passes_;
  Counter& moe_experts_read_;
  Counter& moe_expert_rows_;
  Gauge& moe_read_ratio_;
};

}  // namespace specd::server

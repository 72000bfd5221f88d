// Continuous batching over a paged KV cache: every step, running sequences get their next
// tokens first (a decode, or the next chunk of an unfinished prefill), then waiting sequences
// are admitted in arrival order while the token budget, the sequence limit and the free KV
// blocks allow. A running sequence that cannot get a block preempts the most recently
// admitted running sequence (recompute: its KV is dropped and it re-prefills later, generated
// tokens included); a sequence that cannot fit even alone fails with a clear message.
//
// A sequence is uniformly "tokens + how many are in the KV cache": prefill, decode and
// re-prefill after preemption are the same operation. Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kv/kv_cache.hpp"
#include "sampling/stop.hpp"
#include "specd/request.hpp"
#include "specd/spec_metrics.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::sched {

struct Sequence {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // prompt, then every generated token
  int32_t num_prompt = 0;
  int32_t num_computed = 0;     // tokens whose K/V are in the cache
  SamplingParams params;
  uint64_t seed = 0;
  uint64_t step = 0;            // decode steps taken (the Philox step counter)
  std::unique_ptr<tokenizer::IncrementalDetokenizer> detok;
  sampling::StopStringMatcher stops;
  int32_t spec_k = 0;           // this request's speculative proposal length (0 = plain decode)
  spec::SpecMetrics spec_stats;  // this request's speculative counters

  int32_t num_generated() const { return static_cast<int32_t>(tokens.size()) - num_prompt; }
  int32_t num_uncomputed() const { return static_cast<int32_t>(tokens.size()) - num_computed; }
};

struct SchedulerLimits {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 2048;
  bool chunked_prefill = true;
};

// One sequence's share of a step: tokens [start, start + n) go through the forward; when
// `sample` is set they end the sequence's known tokens and the step samples the next one.
// `lookahead` KV slots past them are reserved for speculative tokens (decodes only).
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int32_t start = 0;
  int32_t n = 0;
  bool sample = false;
  int32_t lookahead = 0;
};

struct SchedulePlan {
  std::vector<ScheduledChunk> chunks;
  std::vector<std::pair<RequestId, std::string>> failed;  // already removed from the scheduler
  int32_t num_preempted = 0;
  std::vector<RequestId> preempted;  // their KV was dropped; they re-prefill later
};

// Speculative lookahead wanted by a decoding sequence this step (0 = none), given how many
// sequences are running. The scheduler reserves that many extra KV slots and counts them
// against the token budget, shrinking the lookahead when the budget is short.
using LookaheadFn = std::function<int32_t(const Sequence& seq, size_t num_running)>;

class Scheduler {
 public:
  Scheduler(const SchedulerLimits& limits, kv::KvCache& kv);

  void add(std::unique_ptr<Sequence> seq);
  void set_lookahead(LookaheadFn fn) { lookahead_ = std::move(fn); }
  SchedulePlan schedule();
  // Removes a sequence (finished, failed or aborted) and frees its KV blocks; returns it, or
  // null for an unknown id.
  std::unique_ptr<Sequence> remove(RequestId id);
  Sequence* find(RequestId id);

  bool empty() const { return waiting_.empty() && running_.empty(); }
  size_t num_running() const { return running_.size(); }
  size_t num_waiting() const { return waiting_.size(); }

 private:
  void preempt(size_t running_index);
  std::string too_large_message(const Sequence& seq) const;

  SchedulerLimits limits_;
  kv::KvCache& kv_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order
  LookaheadFn lookahead_;
  std::vector<RequestId> preempted_;  // collected during schedule()
};

}  // namespace specd::sched

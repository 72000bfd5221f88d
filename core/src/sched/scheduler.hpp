// Continuous batching over a paged KV cache: every step, running sequences get their next
// tokens first (a decode, or the next chunk of an unfinished prefill), then waiting sequences
// are admitted in arrival order while the token budget, the sequence limit and the free KV
// blocks allow. A running sequence that cannot get a block preempts the most recently
// admitted running sequence (recompute: its KV is dropped and it re-prefills later, generated
// tokens included); a sequence that cannot fit even alone fails with a clear message.
//
// Whoever schedules also commits (as vLLM's scheduler does): commit(row) appends what the
// step emitted for a row, applies the token-level stop conditions (stop token ids, max_tokens,
// the context length) and rolls the KV back to the accepted tokens, in the target's cache and
// in every hosted model's (HostedKv). The scheduler knows token ids and KV only: text, stop
// strings and per-request statistics belong to the output processor (core/src/output/).
//
// A sequence is uniformly "tokens + how many are in the KV cache": prefill, decode and
// re-prefill after preemption are the same operation. A preempted sequence that had generated
// tokens re-prefills all but its last token, so its next step is the decode (with speculation)
// it would have run anyway: what a request emits per step, and so its acceptance counts and its
// sampled tokens, does not depend on memory pressure.
//
// Multi-step scheduling (num_scheduler_steps = n > 1, docs/scheduling.md): when a schedule holds
// a decode row for every running sequence and nothing else, and the pool holds KV for
// n × (k_i + 1) more tokens of each of them, it becomes the first of n sub-steps. The next n - 1
// schedule() calls return one decode row per remaining sequence of the multi-step without
// admitting, reserving or preempting; the first full schedule after it gives back the KV the
// sequences did not use. Prefill chunks and new arrivals wait for that schedule: a request added
// during a multi-step is scheduled within n steps.
//
// Prefix caching (kv_cache.prefix_caching, docs/scheduling.md): a sequence admitted without KV
// (new, or preempted) first takes the cached blocks its tokens start with
// (KvCache::match_prefix) and prefills from there; commit() publishes every full block of
// accepted tokens (KvCache::publish), after the rollback of rejected drafts.
//
// Threading: the scheduler is used by one thread at a time. With async scheduling, commit() runs
// on the model worker while the engine thread may call add(), num_running() and num_waiting()
// (commit touches only the row's Sequence and the KV caches, never the queues).
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "constrain/constraint.hpp"
#include "kv/kv_cache.hpp"
#include "sampling/sampling.hpp"
#include "sched/step_batch.hpp"
#include "specd/request.hpp"

namespace specd::sched {

struct Sequence {
  SeqId id = 0;                 // the engine's id of this sequence
  RequestId request = 0;        // the caller's id of the request it is a choice of
  int32_t index = 0;            // which choice
  std::vector<int32_t> tokens;  // prompt, then every generated token
  int32_t num_prompt = 0;
  int32_t num_computed = 0;  // tokens whose K/V are in the cache
  int32_t num_cached = 0;    // prompt tokens whose K/V came from the prefix cache at admission
  SamplingParams params;
  uint64_t seed = 0;              // the request's Philox seed
  std::vector<int32_t> stop_ids;  // stop token ids: params.stop_token_ids and, unless ignore_eos, EOS
  int32_t spec_k = 0;             // this request's speculative proposal length (0 = plain decode)
  bool dynamic_k = false;         // the speculation policy picks k in [0, spec_k] every step
  int32_t arm = -1;               // the A/B arm whose verifier serves it (speculative/arms.hpp); -1 = none
  uint64_t tenant = 0;            // whose text it is (SpeculativeOptions::tenant hashed; 0 = nobody else's)
  // Structured output: the grammar state after the generated tokens (a value: each choice its own).
  std::optional<constrain::SequenceConstraint> constraint;
  // KV positions [0, kv_reserved) held for the running multi-step (0 = none): a rollback keeps
  // them; the first full schedule after the multi-step gives back what was not used.
  int32_t kv_reserved = 0;

  int32_t num_generated() const { return static_cast<int32_t>(tokens.size()) - num_prompt; }
  int32_t num_uncomputed() const { return static_cast<int32_t>(tokens.size()) - num_computed; }
  // The Philox step counter of the next token: tokens generated so far.
  uint64_t step() const { return static_cast<uint64_t>(num_generated()); }
  // What penalties and min_tokens see at the next position, after `drafts` (speculative rows).
  sampling::TokenHistory history(std::span<const int32_t> drafts = {}) const {
    const std::span<const int32_t> all(tokens);
    return {all.first(static_cast<size_t>(num_prompt)), all.subspan(static_cast<size_t>(num_prompt)), drafts, stop_ids,
            constraint ? &*constraint : nullptr};
  }
};

struct SchedulerLimits {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 2048;
  bool chunked_prefill = true;
  int64_t max_model_len = std::numeric_limits<int32_t>::max();  // context length: ends a sequence
  // Speculative lookahead (see lookahead() in scheduler.cpp): the proposer's largest k (0 = no
  // limit) and the running-sequence count above which nobody speculates (0 = never).
  int32_t max_lookahead = 0;
  int32_t disable_speculation_above = 0;
  int32_t num_scheduler_steps = 1;  // decode steps per full schedule (multi-step scheduling)
};

// KV caches that shadow the target's sequences: the models a proposer hosts (draft model, MTP
// modules). They never hold more of a sequence than the target's committed length, and they
// free a sequence together with the target.
class HostedKv {
 public:
  virtual ~HostedKv() = default;
  virtual void truncate(kv::SeqId seq, int32_t max_len) = 0;  // keep at most max_len positions
  virtual void drop(kv::SeqId seq) = 0;
  // Prefix caching (kv::KvCache::match_prefix / publish), called next to the target's when it
  // caches: a sequence admitted without KV takes its cached prefix of at most max_len tokens in
  // every hosted cache, and each commit publishes the full blocks of their committed tokens.
  virtual void match_prefix(kv::SeqId seq, std::span<const int32_t> tokens, int32_t max_len) = 0;
  virtual void publish(kv::SeqId seq, std::span<const int32_t> tokens) = 0;
};

class Scheduler {
 public:
  // hosted may be null (no hosted models); it must outlive the scheduler.
  Scheduler(const SchedulerLimits& limits, kv::KvCache& kv, HostedKv* hosted = nullptr);

  void add(std::unique_ptr<Sequence> seq);
  // Adds `seq` (another choice of the request `parent` runs) holding the parent's first `len`
  // KV positions, shared (KvCache::fork); it waits ahead of new requests. len 0: no sharing.
  void add_fork(std::unique_ptr<Sequence> seq, SeqId parent, int32_t len);
  // This step's rows (the batch is cleared first): running sequences, oldest first, then
  // admitted waiting ones; plus the sequences that failed or were preempted. During a multi-step:
  // the next sub-step's decode rows.
  void schedule(StepBatch& batch);
  // Applies a row's outcome (see the file comment). Rows that failed are not committed.
  void commit(StepRow& row);
  // Removes a sequence (finished, failed or aborted) and frees its KV blocks in the target and
  // hosted caches; returns it, or null for an unknown id.
  std::unique_ptr<Sequence> remove(SeqId id);

  // Prefix caching (kv::KvCache::match_prefix), in tokens: those of the sequences admitted with a
  // lookup, and those of them found in the cache.
  struct PrefixCacheStats {
    uint64_t queries = 0;
    uint64_t hits = 0;
  };
  PrefixCacheStats prefix_cache_stats() const { return prefix_stats_; }

  bool empty() const { return waiting_.empty() && running_.empty(); }
  size_t num_running() const { return running_.size(); }
  size_t num_waiting() const { return waiting_.size(); }
  // Sub-steps of the running multi-step still to come (0 = the next schedule is a full one).
  int32_t substeps_left() const { return substeps_left_; }

 private:
  void schedule_running(StepBatch& batch, int32_t& budget);
  void admit_waiting(StepBatch& batch, int32_t& budget);
  void schedule_substep(StepBatch& batch);
  void start_multi_step(const StepBatch& batch);
  void end_multi_step();
  int32_t lookahead(const Sequence& seq, size_t num_running) const;
  int32_t match_cached_prefix(Sequence& seq);
  void release_waiting(Sequence& seq);
  void fail_waiting(StepBatch& batch, std::string message);
  void preempt(size_t running_index, StepBatch& batch);
  void drop_kv(SeqId id);
  std::string too_large_message(const Sequence& seq) const;

  SchedulerLimits limits_;
  kv::KvCache& kv_;
  HostedKv* hosted_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order
  int32_t substeps_left_ = 0;
  bool multi_step_ = false;    // sequences may hold multi-step reservations (kv_reserved)
  std::vector<int32_t> room_;  // start_multi_step's per-row reservation, reused
  PrefixCacheStats prefix_stats_;
};

}  // namespace specd::sched

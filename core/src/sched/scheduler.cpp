#include "sched/scheduler.hpp"

#include <algorithm>

#include "specd/error.hpp"
#include "specd/log.hpp"

namespace specd::sched {

namespace {

// Tokens of `seq` to run through the target, at most: all uncomputed ones, except that a
// preempted sequence that had generated tokens re-prefills all but its last one (see the header).
int32_t tokens_to_run(const Sequence& seq) {
  const int32_t remaining = seq.num_uncomputed();
  return seq.num_generated() > 0 && remaining > 1 ? remaining - 1 : remaining;
}

}  // namespace

Scheduler::Scheduler(const SchedulerLimits& limits, kv::KvCache& kv, HostedKv* hosted)
    : limits_(limits), kv_(kv), hosted_(hosted) {
  SPECD_CHECK(limits.max_num_seqs >= 1 && limits.max_num_batched_tokens >= 1 && limits.max_model_len >= 1 &&
                  limits.num_scheduler_steps >= 1,
              ErrorCode::kInvalidArgument, "scheduler limits must be >= 1");
}

void Scheduler::add(std::unique_ptr<Sequence> seq) {
  waiting_.push_back(std::move(seq));
}

void Scheduler::add_fork(std::unique_ptr<Sequence> seq, SeqId parent, int32_t len) {
  if (len > 0) kv_.fork(static_cast<kv::SeqId>(parent), static_cast<kv::SeqId>(seq->id), len);
  seq->num_computed = len;
  // Behind the forks already waiting, ahead of new requests.
  auto at = std::find_if(waiting_.begin(), waiting_.end(), [](const auto& s) { return s->num_computed == 0; });
  waiting_.insert(at, std::move(seq));
}

void Scheduler::drop_kv(SeqId id) {
  kv_.remove_sequence(static_cast<kv::SeqId>(id));
  if (hosted_ != nullptr) hosted_->drop(static_cast<kv::SeqId>(id));
}

std::unique_ptr<Sequence> Scheduler::remove(SeqId id) {
  std::unique_ptr<Sequence> out;
  if (auto it = std::find_if(running_.begin(), running_.end(), [&](auto& s) { return s->id == id; });
      it != running_.end()) {
    out = std::move(*it);
    running_.erase(it);
  } else if (auto wt = std::find_if(waiting_.begin(), waiting_.end(), [&](auto& s) { return s->id == id; });
             wt != waiting_.end()) {
    out = std::move(*wt);
    waiting_.erase(wt);
  }
  if (out) drop_kv(id);
  return out;
}

void Scheduler::preempt(size_t index, StepBatch& batch) {
  std::unique_ptr<Sequence> seq = std::move(running_[index]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(index));
  drop_kv(seq->id);
  seq->num_computed = 0;
  batch.preempted.push_back(seq->id);
  ++batch.num_preempted;
  log::get("sched").debug("preempted request {} ({} tokens to recompute)", seq->id, seq->tokens.size());
  waiting_.push_front(std::move(seq));
}

std::string Scheduler::too_large_message(const Sequence& seq) const {
  const int64_t need = (static_cast<int64_t>(seq.tokens.size()) + kv_.block_size()) / kv_.block_size();
  return "KV cache out of blocks: the request needs " + std::to_string(need) + " blocks of " +
         std::to_string(kv_.block_size()) + " tokens for " + std::to_string(seq.tokens.size() + 1) +
         " tokens but the cache holds only " + std::to_string(kv_.num_blocks()) + " (raise kv_cache.memory_mib)";
}

// k_i for a decoding sequence this step: the request's k, capped by the proposer's largest k
// and by what max_tokens leaves; 0 (plain decode) above disable_speculation_above running
// sequences or when the step would come within k tokens of the context limit.
int32_t Scheduler::lookahead(const Sequence& seq, size_t num_running) const {
  if (seq.spec_k <= 0) return 0;
  const int32_t limit = limits_.disable_speculation_above;
  if (limit > 0 && num_running > static_cast<size_t>(limit)) return 0;
  int32_t k = seq.spec_k;
  if (limits_.max_lookahead > 0) k = std::min(k, limits_.max_lookahead);
  k = std::min(k, seq.params.max_tokens - seq.num_generated() - 1);
  if (static_cast<int64_t>(seq.tokens.size()) + k + 1 > limits_.max_model_len) return 0;
  return std::max(k, 0);
}

void Scheduler::schedule(StepBatch& batch) {
  batch.clear();
  if (substeps_left_ > 0) {
    --substeps_left_;
    schedule_substep(batch);
    if (!batch.rows.empty()) return;
    substeps_left_ = 0;  // every sequence of the multi-step has finished
  }
  end_multi_step();
  int32_t budget = limits_.max_num_batched_tokens;
  schedule_running(batch, budget);
  admit_waiting(batch, budget);
  if (limits_.num_scheduler_steps > 1) start_multi_step(batch);
}

// A sub-step: one decode row per sequence of the multi-step, on the KV reserved up front.
void Scheduler::schedule_substep(StepBatch& batch) {
  int32_t budget = limits_.max_num_batched_tokens;  // lookahead counts against it as in a full schedule
  for (const std::unique_ptr<Sequence>& s : running_) {
    Sequence& seq = *s;
    if (seq.kv_reserved == 0) continue;
    SPECD_CHECK(seq.num_uncomputed() == 1 && kv_.num_tokens(static_cast<kv::SeqId>(seq.id)) == seq.num_computed,
                ErrorCode::kInternal,
                "scheduler: sequence " + std::to_string(seq.id) + " is not decoding in a multi-step");
    StepRow& row = batch.rows.emplace_back();
    row.seq = &seq;
    row.start = seq.num_computed;
    row.n = 1;
    row.sample = true;
    // The same k_i a full schedule would give (so acceptance does not depend on the mode). The
    // reservation covers k_i + 1 tokens per sub-step (start_multi_step), so its cap never binds;
    // it keeps the forward inside the reserved blocks whatever happens.
    row.lookahead =
        std::max(0, std::min({lookahead(seq, running_.size()), budget - 1, seq.kv_reserved - seq.num_computed - 1}));
    budget -= 1 + row.lookahead;
  }
}

// Makes this schedule the first of n sub-steps when it holds a decode row for every running
// sequence and nothing else, and the pool has KV for n × (k_i + 1) more tokens of each (fewer
// when max_tokens or the context ends the sequence sooner). Otherwise it stays a single step:
// a multi-step never preempts anyone.
void Scheduler::start_multi_step(const StepBatch& batch) {
  if (batch.rows.empty() || batch.rows.size() != running_.size()) return;
  for (const StepRow& row : batch.rows)
    if (!row.sample || row.n != 1) return;
  const int32_t n = limits_.num_scheduler_steps;
  std::vector<int32_t>& room = room_;
  room.clear();
  for (const StepRow& row : batch.rows) {
    const Sequence& seq = *row.seq;
    const int32_t k = lookahead(seq, 0);  // the most any sub-step may propose
    const auto to_context = static_cast<int32_t>(
        std::min<int64_t>(limits_.max_model_len - static_cast<int64_t>(seq.tokens.size()), INT32_MAX));
    const int32_t remaining = std::min(seq.params.max_tokens - seq.num_generated(), to_context);
    room.push_back(std::max(row.n + row.lookahead, std::min(n * (k + 1), remaining + k)));
  }
  for (size_t i = 0; i < batch.rows.size(); ++i) {
    if (kv_.reserve(static_cast<kv::SeqId>(batch.rows[i].seq->id), room[i])) continue;
    for (size_t j = 0; j < i; ++j) {  // give the extensions back: this stays a single step
      const StepRow& row = batch.rows[j];
      const auto sid = static_cast<kv::SeqId>(row.seq->id);
      kv_.truncate(sid, kv_.num_tokens(sid), row.n + row.lookahead);
    }
    return;
  }
  for (size_t i = 0; i < batch.rows.size(); ++i)
    batch.rows[i].seq->kv_reserved = batch.rows[i].seq->num_computed + room[i];
  substeps_left_ = n - 1;
  multi_step_ = true;
}

// The multi-step is over: KV its sequences reserved and did not use goes back to the pool.
void Scheduler::end_multi_step() {
  if (!multi_step_) return;
  multi_step_ = false;
  for (const std::unique_ptr<Sequence>& seq : running_) {
    if (seq->kv_reserved == 0) continue;
    const auto sid = static_cast<kv::SeqId>(seq->id);
    kv_.truncate(sid, kv_.num_tokens(sid));
    seq->kv_reserved = 0;
  }
}

// Running sequences, oldest first.
void Scheduler::schedule_running(StepBatch& batch, int32_t& budget) {
  const size_t num_running = running_.size();
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence& seq = *running_[i];
    const int32_t remaining = seq.num_uncomputed();
    if (!limits_.chunked_prefill && tokens_to_run(seq) > budget) {
      ++i;
      continue;
    }
    const int32_t n = std::min(tokens_to_run(seq), budget);
    // A decode may carry speculative lookahead: k extra slots, counted against the budget.
    int32_t lookahead = remaining == 1 ? std::max(0, std::min(this->lookahead(seq, num_running), budget - n)) : 0;
    const auto sid = static_cast<kv::SeqId>(seq.id);
    bool reserved = kv_.reserve(sid, n + lookahead);
    if (!reserved && lookahead > 0) {
      lookahead = 0;  // never preempt anyone for speculation: decode plainly instead
      reserved = kv_.reserve(sid, n);
    }
    while (!reserved && running_.size() > i + 1) {
      preempt(running_.size() - 1, batch);  // the most recently admitted sequence gives way
      reserved = kv_.reserve(sid, n);
    }
    if (!reserved) {
      if (batch.rows.empty()) {
        // Alone in the cache and still no room: it can never run.
        batch.failed.emplace_back(seq.id, too_large_message(seq));
        const SeqId id = seq.id;
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
        drop_kv(id);
      } else {
        preempt(i, batch);  // wait for the older sequences to finish
      }
      continue;
    }
    StepRow& row = batch.rows.emplace_back();
    row.seq = &seq;
    row.start = seq.num_computed;
    row.n = n;
    row.sample = seq.num_computed + n == static_cast<int32_t>(seq.tokens.size());
    row.lookahead = lookahead;
    budget -= n + lookahead;
    ++i;
  }
}

// Waiting sequences, in arrival order (preempted ones first).
void Scheduler::admit_waiting(StepBatch& batch, int32_t& budget) {
  while (!waiting_.empty() && budget > 0 && running_.size() < static_cast<size_t>(limits_.max_num_seqs)) {
    Sequence& seq = *waiting_.front();
    const auto sid = static_cast<kv::SeqId>(seq.id);
    const int64_t blocks_total = (static_cast<int64_t>(seq.tokens.size()) + kv_.block_size()) / kv_.block_size();
    if (blocks_total > kv_.num_blocks()) {
      fail_waiting(batch, too_large_message(seq));
      continue;
    }
    const bool fresh = !kv_.has_sequence(sid);  // a fork holds its shared prompt already
    if (fresh) {
      kv_.add_sequence(sid);
      seq.num_computed = match_cached_prefix(seq);
    }
    const int32_t remaining = tokens_to_run(seq);
    if (!limits_.chunked_prefill && remaining > budget) {
      if (remaining > limits_.max_num_batched_tokens) {
        fail_waiting(batch,
                     "prompt of " + std::to_string(remaining) + " tokens exceeds scheduler.max_num_batched_tokens = " +
                         std::to_string(limits_.max_num_batched_tokens) + " and scheduler.chunked_prefill is off");
        continue;
      }
      if (fresh) release_waiting(seq);
      break;
    }
    const int32_t n = std::min(remaining, budget);
    if (!kv_.reserve(sid, n)) {
      release_waiting(seq);  // a fork that gives up its shared blocks prefills alone later
      break;                 // wait for blocks to be freed
    }
    if (fresh && kv_.prefix_caching()) {
      prefix_stats_.queries += seq.tokens.size();
      prefix_stats_.hits += static_cast<uint64_t>(seq.num_computed);
      if (seq.num_generated() == 0) seq.num_cached = seq.num_computed;
    }
    StepRow& row = batch.rows.emplace_back();
    row.seq = &seq;
    row.start = seq.num_computed;
    row.n = n;
    row.sample = seq.num_computed + n == static_cast<int32_t>(seq.tokens.size());
    budget -= n;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

// The published KV blocks a newly admitted sequence's tokens start with (KvCache::match_prefix),
// leaving at least one token of its prefill to run: the last prompt token, whose logits the first
// sample needs, or (a preempted sequence re-prefilling all but its last token) the one before it.
// A request that asked for prompt_logprobs computes its whole prompt.
int32_t Scheduler::match_cached_prefix(Sequence& seq) {
  if (!kv_.prefix_caching() || seq.params.prompt_logprobs >= 0) return 0;
  const auto len = static_cast<int32_t>(seq.tokens.size());
  const int32_t limit = len - 1 - (seq.num_generated() > 0 ? 1 : 0);
  const auto sid = static_cast<kv::SeqId>(seq.id);
  if (hosted_ != nullptr) hosted_->match_prefix(sid, seq.tokens, limit);
  return kv_.match_prefix(sid, seq.tokens, limit);
}

void Scheduler::release_waiting(Sequence& seq) {
  const auto sid = static_cast<kv::SeqId>(seq.id);
  kv_.remove_sequence(sid);
  if (hosted_ != nullptr && kv_.prefix_caching()) hosted_->drop(sid);  // what match_cached_prefix gave them
  seq.num_computed = 0;
}

void Scheduler::fail_waiting(StepBatch& batch, std::string message) {
  Sequence& seq = *waiting_.front();
  batch.failed.emplace_back(seq.id, std::move(message));
  release_waiting(seq);
  waiting_.pop_front();
}

void Scheduler::commit(StepRow& row) {
  if (row.failed()) return;
  Sequence& seq = *row.seq;
  const auto sid = static_cast<kv::SeqId>(seq.id);
  // The forward wrote K/V for the chunk and, on a drafted row, for every draft: keep the chunk
  // and the accepted drafts (vLLM: num_computed_tokens -= num_rejected).
  const int32_t keep = row.start + row.n + row.num_accepted;
  // A tree's accepted path moves down behind the chunk first (its nodes were written in node
  // order, each at its own position).
  if (row.tree()) kv_.compact(sid, row.start + row.n, row.accepted_nodes);
  if (row.drafted()) kv_.truncate(sid, keep, std::max(0, seq.kv_reserved - keep));
  if (row.speculates() && hosted_ != nullptr) hosted_->truncate(sid, keep);
  seq.num_computed = keep;
  row.num_appended = 0;
  row.finish = FinishReason::kNone;
  row.grammar_complete = false;
  for (const int32_t token : row.emitted) {
    const bool stop = std::find(seq.stop_ids.begin(), seq.stop_ids.end(), token) != seq.stop_ids.end();
    if (seq.constraint && !stop) {
      if (std::string err = seq.constraint->commit(token); !err.empty()) {
        row.fail(std::move(err));
        return;
      }
    }
    seq.tokens.push_back(token);
    ++row.num_appended;
    // A complete sentence that nothing may follow ends the choice (what comes after it in
    // `emitted`, e.g. a bonus token past a draft that closed the grammar, is dropped).
    if (stop || (seq.constraint && seq.constraint->closed())) {
      row.finish = FinishReason::kStop;
      row.grammar_complete = !stop;
    } else if (seq.num_generated() >= seq.params.max_tokens ||
               static_cast<int64_t>(seq.tokens.size()) >= limits_.max_model_len) {
      row.finish = FinishReason::kLength;
    }
    if (row.finish != FinishReason::kNone) break;
  }
  // Full blocks of accepted tokens become a cached prefix (KvCache::publish) now that the
  // rollback has dropped the rejected drafts.
  kv_.publish(sid, seq.tokens);
  if (hosted_ != nullptr && kv_.prefix_caching()) hosted_->publish(sid, seq.tokens);
  // A request that generates nothing (max_tokens 0: it scores its prompt) ends with its prompt.
  if (row.sample && row.emitted.empty() && seq.num_generated() >= seq.params.max_tokens)
    row.finish = FinishReason::kLength;
}

}  // namespace specd::sched

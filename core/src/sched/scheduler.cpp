#include "sched/scheduler.hpp"

#include <algorithm>

#include "specd/error.hpp"
#include "specd/log.hpp"

namespace specd::sched {

Scheduler::Scheduler(const SchedulerLimits& limits, kv::KvCache& kv) : limits_(limits), kv_(kv) {
  SPECD_CHECK(limits.max_num_seqs >= 1 && limits.max_num_batched_tokens >= 1,
              ErrorCode::kInvalidArgument, "scheduler limits must be >= 1");
}

void Scheduler::add(std::unique_ptr<Sequence> seq) { waiting_.push_back(std::move(seq)); }

Sequence* Scheduler::find(RequestId id) {
  for (auto& s : running_) {
    if (s->id == id) return s.get();
  }
  for (auto& s : waiting_) {
    if (s->id == id) return s.get();
  }
  return nullptr;
}

std::unique_ptr<Sequence> Scheduler::remove(RequestId id) {
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
  if (out) kv_.remove_sequence(static_cast<kv::SeqId>(out->id));
  return out;
}

void Scheduler::preempt(size_t index) {
  std::unique_ptr<Sequence> seq = std::move(running_[index]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(index));
  kv_.remove_sequence(static_cast<kv::SeqId>(seq->id));
  seq->num_computed = 0;
  preempted_.push_back(seq->id);
  log::get("sched").debug("preempted request {} ({} tokens to recompute)", seq->id, seq->tokens.size());
  waiting_.push_front(std::move(seq));
}

std::string Scheduler::too_large_message(const Sequence& seq) const {
  const int64_t need = (static_cast<int64_t>(seq.tokens.size()) + kv_.block_size()) / kv_.block_size();
  return "KV cache out of blocks: the request needs " + std::to_string(need) + " blocks of " +
         std::to_string(kv_.block_size()) + " tokens for " + std::to_string(seq.tokens.size() + 1) +
         " tokens but the cache holds only " + std::to_string(kv_.num_blocks()) +
         " (raise kv_cache.memory_mib)";
}

SchedulePlan Scheduler::schedule() {
  SchedulePlan plan;
  int32_t budget = limits_.max_num_batched_tokens;
  preempted_.clear();
  const size_t num_running = running_.size();

  // 1. Running sequences, oldest first.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence& seq = *running_[i];
    const int32_t remaining = seq.num_uncomputed();
    if (!limits_.chunked_prefill && remaining > budget) {
      ++i;
      continue;
    }
    const int32_t n = std::min(remaining, budget);
    // A decode may carry speculative lookahead: k extra slots, counted against the budget.
    int32_t lookahead = 0;
    if (remaining == 1 && lookahead_) lookahead = std::max(0, std::min(lookahead_(seq, num_running), budget - n));
    const auto sid = static_cast<kv::SeqId>(seq.id);
    bool reserved = kv_.reserve(sid, n + lookahead);
    if (!reserved && lookahead > 0) {
      lookahead = 0;  // never preempt anyone for speculation: decode plainly instead
      reserved = kv_.reserve(sid, n);
    }
    while (!reserved && running_.size() > i + 1) {
      preempt(running_.size() - 1);  // the most recently admitted sequence gives way
      ++plan.num_preempted;
      reserved = kv_.reserve(sid, n);
    }
    if (!reserved) {
      if (plan.chunks.empty()) {
        // Alone in the cache and still no room: it can never run.
        plan.failed.emplace_back(seq.id, too_large_message(seq));
        std::unique_ptr<Sequence> gone = std::move(running_[i]);
        running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
        kv_.remove_sequence(sid);
      } else {
        preempt(i);  // wait for the older sequences to finish
        ++plan.num_preempted;
      }
      continue;
    }
    plan.chunks.push_back(
        {&seq, seq.num_computed, n, seq.num_computed + n == static_cast<int32_t>(seq.tokens.size()), lookahead});
    budget -= n + lookahead;
    ++i;
  }

  // 2. Waiting sequences, in arrival order (preempted ones first).
  while (!waiting_.empty() && budget > 0 &&
         running_.size() < static_cast<size_t>(limits_.max_num_seqs)) {
    Sequence& seq = *waiting_.front();
    const int32_t remaining = seq.num_uncomputed();
    const int64_t blocks_total = (static_cast<int64_t>(seq.tokens.size()) + kv_.block_size()) / kv_.block_size();
    if (blocks_total > kv_.num_blocks()) {
      plan.failed.emplace_back(seq.id, too_large_message(seq));
      waiting_.pop_front();
      continue;
    }
    if (!limits_.chunked_prefill && remaining > budget) {
      if (remaining > limits_.max_num_batched_tokens) {
        plan.failed.emplace_back(
            seq.id, "prompt of " + std::to_string(remaining) +
                        " tokens exceeds scheduler.max_num_batched_tokens = " +
                        std::to_string(limits_.max_num_batched_tokens) +
                        " and scheduler.chunked_prefill is off");
        waiting_.pop_front();
        continue;
      }
      break;
    }
    const int32_t n = std::min(remaining, budget);
    const auto sid = static_cast<kv::SeqId>(seq.id);
    kv_.add_sequence(sid);
    if (!kv_.reserve(sid, n)) {
      kv_.remove_sequence(sid);
      break;  // wait for blocks to be freed
    }
    plan.chunks.push_back({&seq, 0, n, n == static_cast<int32_t>(seq.tokens.size()), 0});
    budget -= n;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  plan.preempted = std::move(preempted_);
  preempted_.clear();
  return plan;
}

}  // namespace specd::sched

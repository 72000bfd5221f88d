// ProposerFeed: what each sequence has fed to the proposer, kept by the Speculator between steps.
//
//   - the positions the proposer has seen (next_pos): prefill chunks reach it through
//     on_prefill, decodes through propose / on_accept;
//   - whether the sequence's prompt (or a preempted sequence's re-prefill) is complete, so that
//     its next rows are decodes the proposer drafts for;
//   - for a proposer that asks for the target's final hidden states (needs_target_hidden), the
//     states of committed positions not handed over yet: a plain decode's, or a scored row's
//     chunk plus accepted drafts, buffered until the sequence's next propose.
//
// Invariant at propose: a sequence of length L has had the hidden states of positions 0..L-2
// handed over or buffered (its last token has not been through the target yet). A row that
// breaks it is an internal error (kInternal), never a silent gap.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sched/step_batch.hpp"

namespace specd::speculative {

class ProposerFeed {
 public:
  // hidden_size: the target's; wants_hidden: the proposer asks for hidden states (final ones, or
  // those of num_aux auxiliary layers). A position's state is one row of feature_width() floats:
  // the final hidden state, then each auxiliary layer's.
  ProposerFeed(int64_t hidden_size, bool wants_hidden, int64_t num_aux)
      : hidden_size_(hidden_size), num_aux_(num_aux), wants_hidden_(wants_hidden) {}
  int64_t feature_width() const { return hidden_size_ * (1 + num_aux_); }

  // The sequence's prompt (re-)prefill went through on_prefill: its rows are decodes now.
  bool prefilled(sched::SeqId id) const;

  // A prefill chunk, before on_prefill: returns how many of its positions are new to the
  // proposer, and appends the chunk's hidden states [n, hidden] to `hidden` when wanted. Throws
  // specd::Error(kInternal) for a chunk that does not continue what the proposer has seen (a
  // choice forked from another's prompt, n > 1, may start past it when no hidden states are
  // wanted).
  int32_t begin_prefill(const sched::StepRow& row, std::vector<float>& hidden);
  // After on_prefill took the chunk.
  void end_prefill(const sched::StepRow& row);

  // A decoding row's newly committed positions [row.start, row.start + n) (a plain decode, or
  // the chunk plus the accepted drafts of a scored row; of a tree, its accepted path): their
  // hidden states are buffered.
  void add_hidden(const sched::StepRow& row, int32_t n);
  // At propose: each row's buffered hidden states, moved to the end of `hidden`; num[i] = the
  // positions of rows[i]. Throws specd::Error(kInternal) when the invariant above is broken.
  void take_hidden(std::span<sched::StepRow* const> rows, std::vector<int32_t>& num, std::vector<float>& hidden);

  void release(sched::SeqId id) { seqs_.erase(id); }

 private:
  struct SeqState {
    bool prefilled = false;   // the chunk that ends the (re-)prefill went through on_prefill
    int64_t next_pos = 0;     // positions < next_pos were seen by the proposer
    std::vector<float> rows;  // feature rows of positions [next_pos - rows/width, next_pos) not yet handed over
  };
  // Appends the feature rows of the row's positions [first, first + count) (row.hidden, row.aux_hidden).
  void append_range(const sched::StepRow& row, int32_t first, int32_t count, std::vector<float>& out) const;

  int64_t hidden_size_;
  int64_t num_aux_;
  bool wants_hidden_;
  std::unordered_map<sched::SeqId, SeqState> seqs_;
};

}  // namespace specd::speculative

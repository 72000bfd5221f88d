// StepBatch: one engine step as a table with one row per scheduled sequence. Each stage fills
// its own columns, in this order (ARCHITECTURE.md "One engine step"):
//
//   Scheduler::schedule   seq, start, n, sample, lookahead         (which tokens run, KV reserved)
//   proposer              drafts, draft_probs, draft_parents       (speculative/, rows with lookahead)
//   scorer                logits, hidden                           (one target forward over every row)
//   sampler / verifier    num_accepted, emitted, accepted_nodes,   (rows that sample)
//                         ab_row
//   Scheduler::commit     num_appended, finish                     (tokens appended, KV rolled back)
//
// A stage that fails for a row sets `error`; later stages skip that row and the engine fails its
// request. Spans point into buffers of the stage that filled them and stay valid until that
// stage runs again (the next step). Rows own no heap memory, so a reused StepBatch does not
// allocate per step.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "specd/request.hpp"

namespace specd::sched {

// The engine's id of one sequence (one choice of a request: output/choices.hpp). Unique for the
// engine's life and never a caller's RequestId; the KV caches and plugins key sequences by it.
using SeqId = uint64_t;

struct Sequence;

struct StepRow {
  // Scheduler::schedule: tokens [start, start + n) of seq->tokens go through the target. A
  // `sample` row ends the sequence's known tokens, so the step emits its next token(s).
  // `lookahead` KV slots past the chunk are reserved for drafts (decodes only; the speculative
  // layer may lower it for a proposer that needs the same k on every row).
  Sequence* seq = nullptr;
  int32_t start = 0;
  int32_t n = 0;
  bool sample = false;
  int32_t lookahead = 0;

  // Proposer: drafts d_0..d_{m-1}, m <= lookahead; their probabilities [m, vocab] when the
  // proposer produces them (else one-hot).
  std::span<const int32_t> drafts;
  const float* draft_probs = nullptr;
  // A draft tree (ABI 1.3): parents of d_0..d_{m-1} (an earlier draft, or -1 for a child of
  // the chunk's last token). Empty for a chain, which every later stage treats as before.
  std::span<const int32_t> draft_parents;
  // Structured output: of a chain's drafts, the last num_forced were added by the host from the
  // text the request's grammar forces (the proposer drafted the others).
  int32_t num_forced = 0;

  // Scorer: raw target logits [1 + m, vocab] of the chunk's last token and each draft (sample
  // rows only), and, when asked for, final hidden states [n + m, hidden] of every position the
  // row ran through the target.
  const float* logits = nullptr;
  const float* hidden = nullptr;
  // With hidden, for a proposer that reads auxiliary layers: [n + m, layers, hidden] of the same
  // positions (model/forward.hpp aux_layers).
  const float* aux_hidden = nullptr;
  // Scorer, for a prompt chunk of a request that asks for prompt logprobs: raw logits [n, vocab]
  // of every chunk position (row j predicts token start + j + 1).
  const float* chunk_logits = nullptr;

  // Sampler (rows without drafts) or verifier: the accepted drafts followed by one more token.
  int32_t num_accepted = 0;
  std::span<const int32_t> emitted;
  // Verifier, tree rows: the accepted drafts' indices, root first (num_accepted of them).
  // Scheduler::commit moves their K/V behind the chunk before rolling back the rest.
  std::span<const int32_t> accepted_nodes;
  // Verifier: this row's index in the step's A/B record (speculative/arm_record.hpp; -1 = not
  // verified). Only the speculative layer reads what it points at.
  int32_t ab_row = -1;

  // Scheduler::commit: tokens of `emitted` appended before a stop token id, max_tokens or the
  // context length ended the sequence (finish kStop / kLength; kNone = it goes on).
  int32_t num_appended = 0;
  FinishReason finish = FinishReason::kNone;
  bool grammar_complete = false;  // finish kStop: the structured-output text is complete

  // Any stage: why this row failed (its request fails; the step goes on).
  std::string error;

  bool failed() const { return !error.empty(); }
  bool drafted() const { return !drafts.empty(); }
  bool tree() const { return !draft_parents.empty(); }
  // Proposed this step (given lookahead), whether or not it drafted anything.
  bool speculates() const { return sample && lookahead > 0; }
  // Sets the error unless an earlier stage already failed the row.
  void fail(std::string message) {
    if (error.empty()) error = std::move(message);
  }
};

struct StepBatch {
  std::vector<StepRow> rows;
  // Sequences that can never run (already removed from the scheduler), with the reason.
  std::vector<std::pair<SeqId, std::string>> failed;
  // Sequences that lost their KV this step (re-prefilled later).
  std::vector<SeqId> preempted;
  int32_t num_preempted = 0;

  void clear() {
    rows.clear();
    failed.clear();
    preempted.clear();
    num_preempted = 0;
  }
};

}  // namespace specd::sched

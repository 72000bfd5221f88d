// StepBatch: one engine step as a table with one row per scheduled sequence. Each stage fills
// its own columns, in this order (ARCHITECTURE.md "One engine step"):
//
//   Scheduler::schedule   seq, start, n, sample, lookahead         (which tokens run, KV reserved)
//   proposer              drafts, draft_probs                      (speculative/, rows with lookahead)
//   scorer                logits, hidden                           (one target forward over every row)
//   sampler / verifier    num_accepted, emitted (+ A/B shadows)    (rows that sample)
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

// What one A/B shadow arm would have done with a row's drafts (speculative.shadow): the same
// drafts (cut to the arm's k), target probabilities and uniforms as the serving arm's verifier.
struct ShadowOutcome {
  int32_t k = 0;           // its k cap for the row: min(row lookahead, the arm's k)
  int32_t drafted = 0;     // drafts it verified
  int32_t accepted = -1;   // drafts it would have accepted; -1 = it did not verify this row
  int32_t compared = 0;    // positions both it and the serving arm emit: min(accepted) + 1
  bool differs = false;    // its token at the last compared position differs from the serving arm's
  float logprob = 0;       // Σ log p of the accepted + 1 tokens it would have emitted
  float seconds = 0;       // this row's share of the shadow verifier call
};

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

  // Scorer: raw target logits [1 + m, vocab] of the chunk's last token and each draft (sample
  // rows only), and, when asked for, final hidden states [n + m, hidden] of every position the
  // row ran through the target.
  const float* logits = nullptr;
  const float* hidden = nullptr;
  // Scorer, for a prompt chunk of a request that asks for prompt logprobs: raw logits [n, vocab]
  // of every chunk position (row j predicts token start + j + 1).
  const float* chunk_logits = nullptr;

  // Sampler (rows without drafts) or verifier: the accepted drafts followed by one more token.
  int32_t num_accepted = 0;
  std::span<const int32_t> emitted;
  // Verifier, for A/B quality: Σ log p of the emitted tokens; and one entry per arm for the
  // shadow arms' counterfactual outcomes (empty without shadow arms).
  float emitted_logprob = 0;
  std::span<const ShadowOutcome> shadows;

  // Scheduler::commit: tokens of `emitted` appended before a stop token id, max_tokens or the
  // context length ended the sequence (finish kStop / kLength; kNone = it goes on).
  int32_t num_appended = 0;
  FinishReason finish = FinishReason::kNone;

  // Any stage: why this row failed (its request fails; the step goes on).
  std::string error;

  bool failed() const { return !error.empty(); }
  bool drafted() const { return !drafts.empty(); }
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

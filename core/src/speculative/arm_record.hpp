// ArmStepRecord: what the verify stage of one step records for A/B testing (docs/ab-testing.md).
// ArmVerifiers writes it where the step executes; a verified row keeps only its index into it
// (StepRow::ab_row). The engine moves the record out when it collects the step and hands it,
// with each row's output, to ArmAccounting on the engine thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace specd::speculative {

// What one shadow arm (speculative.shadow) would have done with a row's drafts: the same drafts
// (cut to the arm's k), target probabilities and uniforms as the serving arm's verifier.
struct ShadowOutcome {
  int32_t k = 0;          // its k cap for the row: min(row lookahead, the arm's k)
  int32_t drafted = 0;    // drafts it verified
  int32_t accepted = -1;  // drafts it would have accepted; -1 = it did not verify this row
  int32_t compared = 0;   // positions both it and the serving arm emit: min(accepted) + 1
  bool differs = false;   // its token at the last compared position differs from the serving arm's
  float logprob = 0;      // Σ log p of the accepted + 1 tokens it would have emitted
  float seconds = 0;      // this row's share of the shadow verifier call
};

// One verifier call of a step: an arm serving its own rows (served == arm), or a shadow arm
// verifying the rows another arm served.
struct VerifierCall {
  int32_t arm = 0;
  int32_t served = 0;
  double seconds = 0;
  bool failed = false;
};

struct ArmStepRecord {
  size_t num_arms = 0;
  std::vector<float> emitted_logprob;  // [rows] Σ log p of the tokens the serving verifier emitted
  std::vector<ShadowOutcome> shadows;  // [rows, num_arms]; empty without shadow arms
  std::vector<VerifierCall> calls;     // in call order

  // Row `ab_row`'s shadow outcomes, one per arm (empty without shadow arms).
  std::span<const ShadowOutcome> shadows_of(int32_t ab_row) const {
    if (shadows.empty()) return {};
    return {shadows.data() + static_cast<size_t>(ab_row) * num_arms, num_arms};
  }
  void clear() {
    emitted_logprob.clear();
    shadows.clear();
    calls.clear();
  }
};

}  // namespace specd::speculative

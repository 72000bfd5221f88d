// Coupled verification (Gumbel-max coupling): the target's token at generated position g is its
// own Gumbel-max draw (sdk/gumbel.hpp) with the request's noise at g, exactly what the engine's
// sampler draws there with model.sampler: gumbel; a draft is accepted iff it equals that draw.
// The emitted tokens are therefore the tokens plain decoding emits, with speculation on or off,
// whatever k, batch or schedule: same seed, same output. Acceptance is the probability that the
// draft's race and the target's race have the same winner, highest when the proposer draws its
// drafts with the same noise (draft_model's draft_sampler: gumbel). CPU only.
#pragma once

#include <cstdint>
#include <vector>

#include "specd/sdk/gumbel.hpp"
#include "verify_common.hpp"
#include "verify_cpu.hpp"

namespace specd::verifiers {

// Seeds and steps key the noise; draft probabilities are not read.
inline constexpr Uses kCoupledUses{.rng = true, .draft_probs = false};

struct CoupledRule {
  // Draft trees (verify_tree.hpp): the deepest path of nodes that equal their position's draw.
  static constexpr bool kTreeResidual = false;

  // The target's draw at view position `pos`: generated position step + counter_base + pos (a
  // chain's position, or a tree node's depth). Cached for the last row and position examined.
  const float* cached_row = nullptr;
  uint64_t cached_g = 0;
  int32_t cached_token = -1;

  template <class Ops>
  int32_t draw(const SequenceView& s, int32_t pos, Ops& /*ops*/) {
    const float* row = s.target_row(pos);
    const uint64_t g = s.step + s.counter_base + static_cast<uint64_t>(pos);
    if (row != cached_row || g != cached_g || cached_token < 0) {
      cached_token = sdk::gumbel_sample(row, s.vocab, s.seed, g);
      cached_row = row;
      cached_g = g;
    }
    return cached_token;
  }

  template <class Ops>
  bool accept(const SequenceView& s, int32_t pos, Ops& ops) {
    return draw(s, pos, ops) == s.draft_token(pos);
  }
  template <class Ops>
  int32_t recover(const SequenceView& s, int32_t pos, Ops& ops) {
    return draw(s, pos, ops);
  }
  template <class Ops>
  int32_t bonus(const SequenceView& s, int32_t pos, Ops& ops) {
    return draw(s, pos, ops);
  }
};

// The CUDA path (coupled_cuda.cu): not built; it refuses with an error naming the verifier.
Status verify_cuda(const specd_verify_batch& batch, const CoupledRule& rule, std::vector<int32_t>& flags);

}  // namespace specd::verifiers

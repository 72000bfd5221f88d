// Lossless rejection sampling (Leviathan et al. 2023; Chen et al. 2023), written once for the
// CPU reference and the CUDA kernel (Ops = CpuOps or cuda::BlockOps).
#pragma once

#include <cstdint>
#include <vector>

#include "verify_common.hpp"
#include "verify_cpu.hpp"

namespace specd::verifiers {

// Reads seeds/steps and, when the proposer gave them, the draft probabilities.
inline constexpr Uses kRejectionUses{.rng = true, .draft_probs = true};

struct RejectionRule {
  // Draft trees (verify_tree.hpp): multi-candidate rejection over siblings.
  static constexpr bool kTreeResidual = true;

  // Draft x at `pos` is accepted iff p(x) ≥ u·q(x) with u = philox(seed, step, pos, accept lane);
  // without draft probabilities q is one-hot at x, so the test is p(x) ≥ u.
  template <class Ops>
  SPECD_HOST_DEVICE bool accept(const SequenceView& s, int32_t pos, Ops& /*ops*/) const {
    const int32_t x = s.draft_token(pos);
    const float p = s.target_row(pos)[x];
    const float q = s.draft != nullptr ? s.draft_row(pos)[x] : 1.0f;
    return rejection_accepts(p, q, s.accept_uniform(pos));
  }

  // The recovered token: a draw from normalize(max(0, p − q)); from p when that is all zero
  // (p == q, where a rejection has probability zero but rounding can still produce one).
  template <class Ops>
  SPECD_HOST_DEVICE int32_t recover(const SequenceView& s, int32_t pos, Ops& ops) const {
    const float* p = s.target_row(pos);
    const float u = s.sample_uniform(pos);
    const int32_t token = s.draft != nullptr ? ops.sample(ResidualWeights{p, s.draft_row(pos)}, s.vocab, u)
                                             : ops.sample(OneHotResidualWeights{p, s.draft_token(pos)}, s.vocab, u);
    return token >= 0 ? token : ops.sample(TargetWeights{p}, s.vocab, u);
  }

  // Every draft accepted (or none proposed): a draw from p at position `pos`.
  template <class Ops>
  SPECD_HOST_DEVICE int32_t bonus(const SequenceView& s, int32_t pos, Ops& ops) const {
    return ops.sample(TargetWeights{s.target_row(pos)}, s.vocab, s.sample_uniform(pos));
  }
};

// The CUDA path (rejection_cuda.cu); only in builds with SPECD_PLUGIN_WITH_CUDA.
Status verify_cuda(const specd_verify_batch& batch, const RejectionRule& rule, std::vector<int32_t>& flags);

}  // namespace specd::verifiers

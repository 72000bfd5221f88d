// Typical acceptance (Cai et al. 2024, "Medusa"), written once for the CPU reference and the
// CUDA kernel (Ops = CpuOps or cuda::BlockOps). Lossy: trades exactness for acceptance.
#pragma once

#include <cstdint>
#include <vector>

#include "verify_common.hpp"
#include "verify_cpu.hpp"

namespace specd::verifiers {

// Samples the bonus token (seeds/steps); draft probabilities are ignored.
inline constexpr Uses kTypicalUses{.rng = true, .draft_probs = false};

struct TypicalAcceptanceRule {
  // Draft trees (verify_tree.hpp): the deepest path of nodes that pass.
  static constexpr bool kTreeResidual = false;

  float posterior_threshold;
  float posterior_alpha;
  float log_alpha;  // portable_log(posterior_alpha) when posterior_alpha > 0, else unused

  static TypicalAcceptanceRule make(float threshold, float alpha) {
    return {threshold, alpha, alpha > 0.0f ? portable_log(alpha) : 0.0f};
  }

  // Accept draft x while p(x) > min(posterior_threshold, posterior_alpha · exp(−H(p))).
  template <class Ops>
  SPECD_HOST_DEVICE bool accept(const SequenceView& s, int32_t pos, Ops& ops) const {
    const float* p = s.target_row(pos);
    const float entropy = ops.entropy(p, s.vocab);
    return typical_accepts(p[s.draft_token(pos)], entropy, posterior_threshold, posterior_alpha, log_alpha);
  }

  // The first rejection emits the target's argmax (ties → lowest token id).
  template <class Ops>
  SPECD_HOST_DEVICE int32_t recover(const SequenceView& s, int32_t pos, Ops& ops) const {
    return ops.argmax(s.target_row(pos), s.vocab);
  }

  // Every draft accepted (or none proposed): a draw from p, as the rejection verifier does.
  template <class Ops>
  SPECD_HOST_DEVICE int32_t bonus(const SequenceView& s, int32_t pos, Ops& ops) const {
    return ops.sample(TargetWeights{s.target_row(pos)}, s.vocab, s.sample_uniform(pos));
  }
};

// The CUDA path (typical_acceptance_cuda.cu); only in builds with SPECD_PLUGIN_WITH_CUDA.
Status verify_cuda(const specd_verify_batch& batch, const TypicalAcceptanceRule& rule, std::vector<int32_t>& flags);

}  // namespace specd::verifiers

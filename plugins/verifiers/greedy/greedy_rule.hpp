// Greedy verification (temperature 0), written once for the CPU reference and the CUDA
// kernel (Ops = CpuOps or cuda::BlockOps). Output equals target-only greedy decoding.
#pragma once

#include <cstdint>
#include <vector>

#include "verify_common.hpp"
#include "verify_cpu.hpp"

namespace specd::verifiers {

// Deterministic: no seeds/steps; draft probabilities are ignored.
inline constexpr Uses kGreedyUses{.rng = false, .draft_probs = false};

struct GreedyRule {
  // Draft trees (verify_tree.hpp): the deepest path of nodes that pass.
  static constexpr bool kTreeResidual = false;

  // argmax of the last row examined, so that a mismatch does not scan the row twice.
  int32_t cached_pos = -1;
  int32_t cached_argmax = -1;

  template <class Ops>
  SPECD_HOST_DEVICE int32_t argmax_at(const SequenceView& s, int32_t pos, Ops& ops) {
    if (cached_pos != pos) {
      cached_argmax = ops.argmax(s.target_row(pos), s.vocab);
      cached_pos = pos;
    }
    return cached_argmax;
  }

  // Accept while the draft is the target's argmax (ties → lowest token id).
  template <class Ops>
  SPECD_HOST_DEVICE bool accept(const SequenceView& s, int32_t pos, Ops& ops) {
    return argmax_at(s, pos, ops) == s.draft_token(pos);
  }
  template <class Ops>
  SPECD_HOST_DEVICE int32_t recover(const SequenceView& s, int32_t pos, Ops& ops) {
    return argmax_at(s, pos, ops);
  }
  template <class Ops>
  SPECD_HOST_DEVICE int32_t bonus(const SequenceView& s, int32_t pos, Ops& ops) {
    return argmax_at(s, pos, ops);
  }
};

// The CUDA path (greedy_cuda.cu); only in builds with SPECD_PLUGIN_WITH_CUDA.
Status verify_cuda(const specd_verify_batch& batch, const GreedyRule& rule, std::vector<int32_t>& flags);

}  // namespace specd::verifiers

// CUDA path of the `greedy` verifier: GreedyRule on one block per sequence.
#include "greedy_rule.hpp"
#include "verify_cuda.cuh"

namespace specd::verifiers {

Status verify_cuda(const specd_verify_batch& batch, const GreedyRule& rule, std::vector<int32_t>& flags) {
  return cuda::launch_verify(batch, kGreedyUses, rule, flags);
}

}  // namespace specd::verifiers

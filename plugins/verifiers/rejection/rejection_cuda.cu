// CUDA path of the `rejection` verifier: RejectionRule on one block per sequence.
#include "rejection_rule.hpp"
#include "verify_cuda.cuh"

namespace specd::verifiers {

Status verify_cuda(const specd_verify_batch& batch, const RejectionRule& rule, std::vector<int32_t>& flags) {
  return cuda::launch_verify(batch, kRejectionUses, rule, flags);
}

}  // namespace specd::verifiers

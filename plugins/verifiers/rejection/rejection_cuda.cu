// CUDA path of the `rejection` verifier: RejectionRule on one block per sequence.
#include "rejection_rule.hpp"
#include "verify_cuda.cuh"

namespace specd::verifiers {

Status rejection_verify_cuda(const specd_verify_batch& batch, std::vector<int32_t>& flags) {
  return cuda::launch_verify(batch, kRejectionUses, RejectionRule{}, flags);
}

}  // namespace specd::verifiers

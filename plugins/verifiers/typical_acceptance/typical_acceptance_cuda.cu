// CUDA path of the `typical_acceptance` verifier: TypicalAcceptanceRule on one block per
// sequence.
#include "typical_acceptance_rule.hpp"
#include "verify_cuda.cuh"

namespace specd::verifiers {

Status verify_cuda(const specd_verify_batch& batch, const TypicalAcceptanceRule& rule, std::vector<int32_t>& flags) {
  return cuda::launch_verify(batch, kTypicalUses, rule, flags);
}

}  // namespace specd::verifiers

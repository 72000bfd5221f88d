// CUDA path of the `coupled` verifier: not built yet. The Gumbel race uses the host's std::log,
// so a device version needs its own portable logarithm first; until then a CUDA batch is refused.
#include "coupled_rule.hpp"

namespace specd::verifiers {

Status verify_cuda(const specd_verify_batch& /*batch*/, const CoupledRule& /*rule*/, std::vector<int32_t>& /*flags*/) {
  return {SPECD_ERR_UNSUPPORTED, "coupled: the verifier has no CUDA path yet; it verifies CPU batches only"};
}

}  // namespace specd::verifiers

// The `rejection` verifier plugin: lossless speculative sampling. Semantics, parameters and
// error texts: docs/verifiers.md.
#include <specd/sdk/plugin.hpp>

#include <cstdint>
#include <vector>

#include "rejection_rule.hpp"
#include "verifier_plugin.hpp"

namespace specd::verifiers {
namespace {

class RejectionVerifier final : public sdk::Verifier {
 public:
  // No parameters: any key under speculative.verifier is reported as unknown.
  RejectionVerifier(sdk::Host /*host*/, sdk::Params& /*params*/) {}
  static void validate(sdk::Params& /*params*/) {}

  sdk::VerifierCaps capabilities() const override {
    return {.needs_draft_probs = true, .lossless = true, .supports_cuda = kBuiltWithCuda};
  }

  void verify(const sdk::VerifyBatch& batch) override {
    const specd_verify_batch& b = batch.raw();
    dispatch(
        "rejection", b, [&] { return verify_on_cpu(b, kRejectionUses, RejectionRule{}, scratch_); },
        [&] {
#ifdef SPECD_PLUGIN_WITH_CUDA
          return rejection_verify_cuda(b, flags_);
#else
          return built_without_cuda("rejection");
#endif
        });
  }

 private:
  CpuScratch scratch_;
  std::vector<int32_t> flags_;  // CUDA path: num_accepted read back for error reporting
};

}  // namespace
}  // namespace specd::verifiers

SPECD_PLUGIN("rejection", "1.0.0",
             specd::sdk::verifier<specd::verifiers::RejectionVerifier>(
                 "rejection", "Lossless rejection sampling: output tokens follow the target distribution exactly"))

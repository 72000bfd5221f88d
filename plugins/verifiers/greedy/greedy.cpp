// The `greedy` verifier plugin: accept drafts while they equal the target's argmax. Semantics
// and error texts: docs/verifiers.md.
#include <specd/sdk/plugin.hpp>

#include <cstdint>
#include <vector>

#include "greedy_rule.hpp"
#include "verifier_plugin.hpp"

namespace specd::verifiers {
namespace {

class GreedyVerifier final : public sdk::Verifier {
 public:
  // No parameters: any key under speculative.verifier is reported as unknown.
  GreedyVerifier(sdk::Host /*host*/, sdk::Params& /*params*/) {}
  static void validate(sdk::Params& /*params*/) {}

  sdk::VerifierCaps capabilities() const override {
    // Not lossless in the caps' sense (output distribution = p): it emits argmax p, which equals
    // target-only decoding exactly for temperature-0 requests only.
    return {.needs_draft_probs = false, .lossless = false, .supports_cuda = kBuiltWithCuda};
  }

  void verify(const sdk::VerifyBatch& batch) override {
    const specd_verify_batch& b = batch.raw();
    dispatch(
        "greedy", b, [&] { return verify_on_cpu(b, kGreedyUses, GreedyRule{}, scratch_); },
        [&] {
#ifdef SPECD_PLUGIN_WITH_CUDA
          return greedy_verify_cuda(b, flags_);
#else
          return built_without_cuda("greedy");
#endif
        });
  }

 private:
  CpuScratch scratch_;
  std::vector<int32_t> flags_;  // CUDA path: num_accepted read back for error reporting
};

}  // namespace
}  // namespace specd::verifiers

SPECD_PLUGIN("greedy", "1.0.0",
             specd::sdk::verifier<specd::verifiers::GreedyVerifier>(
                 "greedy", "Greedy verification: accept drafts equal to the target's argmax"))

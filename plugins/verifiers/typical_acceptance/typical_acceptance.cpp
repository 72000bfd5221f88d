// The `typical_acceptance` verifier plugin (lossy, tunable). Semantics, parameters and error
// texts: docs/verifiers.md.
#include <specd/sdk/plugin.hpp>

#include <cstdint>
#include <vector>

#include "typical_acceptance_rule.hpp"
#include "verifier_plugin.hpp"

namespace specd::verifiers {
namespace {

inline constexpr double kDefaultPosteriorThreshold = 0.09;
inline constexpr double kDefaultPosteriorAlpha = 0.3;

class TypicalAcceptanceVerifier final : public sdk::Verifier {
 public:
  TypicalAcceptanceVerifier(sdk::Host /*host*/, sdk::Params& params)
      : rule_(TypicalAcceptanceRule::make(threshold(params), alpha(params))) {}

  static void validate(sdk::Params& params) {
    threshold(params);
    alpha(params);
  }

  sdk::VerifierCaps capabilities() const override {
    return {.needs_draft_probs = false, .lossless = false, .supports_cuda = kBuiltWithCuda};
  }

  void verify(const sdk::VerifyBatch& batch) override {
    const specd_verify_batch& b = batch.raw();
    dispatch(
        "typical_acceptance", b, [&] { return verify_on_cpu(b, kTypicalUses, rule_, scratch_); },
        [&] {
#ifdef SPECD_PLUGIN_WITH_CUDA
          return typical_acceptance_verify_cuda(b, rule_, flags_);
#else
          return built_without_cuda("typical_acceptance");
#endif
        });
  }

 private:
  // Both parameters are probabilities-like scales in [0, 1]; errors are collected by Params
  // and reported with their YAML path (speculative.verifier.posterior_threshold).
  static float threshold(sdk::Params& params) {
    return static_cast<float>(params.get_float("posterior_threshold", kDefaultPosteriorThreshold, 0.0, 1.0));
  }
  static float alpha(sdk::Params& params) {
    return static_cast<float>(params.get_float("posterior_alpha", kDefaultPosteriorAlpha, 0.0, 1.0));
  }

  TypicalAcceptanceRule rule_;
  CpuScratch scratch_;
  std::vector<int32_t> flags_;  // CUDA path: num_accepted read back for error reporting
};

}  // namespace
}  // namespace specd::verifiers

SPECD_PLUGIN("typical_acceptance", "1.0.0",
             specd::sdk::verifier<specd::verifiers::TypicalAcceptanceVerifier>(
                 "typical_acceptance",
                 "Typical acceptance (lossy): accept drafts whose target probability exceeds an entropy-scaled "
                 "threshold"))

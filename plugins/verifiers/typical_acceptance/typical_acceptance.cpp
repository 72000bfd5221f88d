// The `typical_acceptance` verifier plugin (lossy, tunable). Semantics, parameters and error
// texts: docs/verifiers.md.
#include "typical_acceptance_rule.hpp"
#include "verifier_plugin.hpp"

namespace specd::verifiers {
namespace {

inline constexpr double kDefaultPosteriorThreshold = 0.09;
inline constexpr double kDefaultPosteriorAlpha = 0.3;

struct TypicalAcceptance {
  using Rule = TypicalAcceptanceRule;
  static constexpr const char* kName = "typical_acceptance";
  static constexpr Uses kUses = kTypicalUses;
  static constexpr bool kLossless = false;
  // Both parameters are probability-like scales in [0, 1]; errors are collected by Params and
  // reported with their YAML path (speculative.verifier.posterior_threshold).
  static Rule rule(sdk::Params& params) {
    return Rule::make(static_cast<float>(params.get_float("posterior_threshold", kDefaultPosteriorThreshold, 0.0, 1.0)),
                      static_cast<float>(params.get_float("posterior_alpha", kDefaultPosteriorAlpha, 0.0, 1.0)));
  }
};

}  // namespace
}  // namespace specd::verifiers

SPECD_PLUGIN("typical_acceptance", "1.0.0",
             specd::verifiers::verifier_component<specd::verifiers::TypicalAcceptance>(
                 "Typical acceptance (lossy): accept drafts whose target probability exceeds an entropy-scaled "
                 "threshold"))

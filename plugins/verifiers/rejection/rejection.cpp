// The `rejection` verifier plugin: lossless speculative sampling. Semantics, parameters and
// error texts: docs/verifiers.md.
#include "rejection_rule.hpp"
#include "verifier_plugin.hpp"

namespace specd::verifiers {
namespace {

struct Rejection {
  using Rule = RejectionRule;
  static constexpr const char* kName = "rejection";
  static constexpr Uses kUses = kRejectionUses;
  static constexpr bool kLossless = true;
  // No parameters: any key under speculative.verifier is reported as unknown.
  static Rule rule(sdk::Params& /*params*/) { return {}; }
};

}  // namespace
}  // namespace specd::verifiers

SPECD_PLUGIN("rejection", "1.0.0",
             specd::verifiers::verifier_component<specd::verifiers::Rejection>(
                 "Lossless rejection sampling: output tokens follow the target distribution exactly"))

// The `coupled` verifier plugin: accept a draft iff it equals the target's own Gumbel-max draw
// at its position, so the output is what plain decoding with model.sampler: gumbel emits.
// Semantics: docs/verifiers.md.
#include "coupled_rule.hpp"
#include "verifier_plugin.hpp"

namespace specd::verifiers {
namespace {

struct Coupled {
  using Rule = CoupledRule;
  static constexpr const char* kName = "coupled";
  static constexpr Uses kUses = kCoupledUses;
  // Every emitted token is a Gumbel-max draw from the target's distribution: lossless.
  static constexpr bool kLossless = true;
  // No parameters: any key under speculative.verifier is reported as unknown.
  static Rule rule(sdk::Params& /*params*/) { return {}; }
};

}  // namespace
}  // namespace specd::verifiers

SPECD_PLUGIN("coupled", "1.0.0",
             specd::verifiers::verifier_component<specd::verifiers::Coupled>(
                 "Gumbel-max coupled verification: output equals plain decoding with model.sampler: gumbel, "
                 "speculation on or off"))

// The `greedy` verifier plugin: accept drafts while they equal the target's argmax. Semantics
// and error texts: docs/verifiers.md.
#include "greedy_rule.hpp"
#include "verifier_plugin.hpp"

namespace specd::verifiers {
namespace {

struct Greedy {
  using Rule = GreedyRule;
  static constexpr const char* kName = "greedy";
  static constexpr Uses kUses = kGreedyUses;
  // Not lossless in the caps' sense (output distribution = p): it emits argmax p, which equals
  // target-only decoding exactly for temperature-0 requests only.
  static constexpr bool kLossless = false;
  // No parameters: any key under speculative.verifier is reported as unknown.
  static Rule rule(sdk::Params& /*params*/) { return {}; }
};

}  // namespace
}  // namespace specd::verifiers

SPECD_PLUGIN("greedy", "1.0.0",
             specd::verifiers::verifier_component<specd::verifiers::Greedy>(
                 "Greedy verification: accept drafts equal to the target's argmax"))

// The one verifier class every in-tree verifier plugin instantiates: RuleVerifier<Traits> runs
// the plugin's Rule (written once for the CPU reference and the CUDA kernel) on the device the
// batch names, and turns a failed Status into specd::sdk::Error, which the SDK turns into the
// ABI status code and message.
//
// Traits (one small struct per plugin):
//   using Rule = ...;                        the accept/recover/bonus rule (verify_cpu.hpp)
//   static constexpr const char* kName;      component name, used in error messages
//   static constexpr Uses kUses;             what the rule reads (seeds/steps, draft probs)
//   static constexpr bool kLossless;         output distribution equals the target's
//   static Rule rule(sdk::Params&);          reads and range-checks the YAML parameters
// Draft trees (ABI 1.3) are verified on the CPU by verify_tree.hpp with the same Rule.
// The CUDA path is `Status verify_cuda(const specd_verify_batch&, const Rule&, flags)`, declared
// next to each Rule and defined in the plugin's .cu file (only in CUDA builds).
#pragma once

#include <specd/sdk/plugin.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "verify_cpu.hpp"
#include "verify_tree.hpp"

namespace specd::verifiers {

#ifdef SPECD_PLUGIN_WITH_CUDA
inline constexpr bool kBuiltWithCuda = true;
#else
inline constexpr bool kBuiltWithCuda = false;
#endif

template <class Traits>
class RuleVerifier final : public sdk::Verifier {
 public:
  RuleVerifier(sdk::Host /*host*/, sdk::Params& params) : rule_(Traits::rule(params)) {}
  static void validate(sdk::Params& params) { Traits::rule(params); }

  sdk::VerifierCaps capabilities() const override {
    return {.needs_draft_probs = Traits::kUses.draft_probs,
            .lossless = Traits::kLossless,
            .supports_cuda = kBuiltWithCuda,
            .supports_trees = true};
  }

  void verify(const sdk::VerifyBatch& batch) override {
    const specd_verify_batch& b = batch.raw();
    Status status;
    switch (b.device.type) {
      case SPECD_DEVICE_CPU:
        status = tree_parents(b) != nullptr ? verify_tree_on_cpu(b, Traits::kUses, rule_, scratch_)
                                            : verify_on_cpu(b, Traits::kUses, rule_, scratch_);
        break;
      case SPECD_DEVICE_CUDA:
        if (tree_parents(b) != nullptr) {
          status = {SPECD_ERR_UNSUPPORTED, std::string("verifier '") + Traits::kName +
                                               "' verifies draft trees on the CPU only, not on a CUDA device"};
          break;
        }
#ifdef SPECD_PLUGIN_WITH_CUDA
        status = verify_cuda(b, rule_, flags_);
#else
        status = {SPECD_ERR_UNSUPPORTED, std::string("verifier '") + Traits::kName +
                                             "' was built without CUDA and cannot verify a batch on a CUDA device"};
#endif
        break;
      default:
        status = {SPECD_ERR_INVALID_ARGUMENT, std::string("verifier '") + Traits::kName + "': unknown device type " +
                                                  std::to_string(b.device.type)};
    }
    if (!status.ok()) throw sdk::Error(std::move(status.message), status.code);
  }

 private:
  typename Traits::Rule rule_;
  CpuScratch scratch_;
  std::vector<int32_t> flags_;  // CUDA path: num_accepted read back for error reporting
};

// The component declaration for SPECD_PLUGIN (description: a string literal).
template <class Traits>
specd_component_desc verifier_component(const char* description) {
  return sdk::verifier<RuleVerifier<Traits>>(Traits::kName, description);
}

}  // namespace specd::verifiers

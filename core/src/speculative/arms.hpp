// A/B arms (docs/ab-testing.md): which arm serves a request. Each arm is a verifier with an
// optional k and a traffic weight (speculative.arms; the verifiers themselves live in
// ArmVerifiers). A request's arm is, in this order of precedence:
//
//   1. named explicitly (Request.speculative.arm, HTTP `speculative.arm` or X-Specd-Arm);
//   2. picked from a stable hash of the user (Request.speculative.user, HTTP `user`): the same
//      user gets the same arm, across requests and restarts, as long as the arms and their
//      weights stay the same;
//   3. picked from a seeded draw of (model.seed, request id): reproducible for a given seed.
//
// pick(h) maps the top 53 bits of a 64-bit hash to u in [0, 1) and returns the arm whose
// interval of the cumulative weights holds u · Σ weights, so arm i gets a share
// weight_i / Σ weights of the traffic; an arm of weight 0 is only ever named explicitly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace specd::speculative {

enum class ArmChoice { kExplicit, kUser, kRandom };
// "explicit" | "user" | "random" (the A/B log's `assigned` field).
std::string_view arm_choice_name(ArmChoice choice);

struct ArmAssignment {
  int32_t arm = -1;
  ArmChoice choice = ArmChoice::kRandom;
};

class ArmAssigner {
 public:
  // names and weights of equal, non-zero length; weights >= 0 with a positive sum.
  ArmAssigner(std::vector<std::string> names, const std::vector<double>& weights, uint64_t seed);

  // The arm's index, or nullopt for a name that is not an arm.
  std::optional<int32_t> find(std::string_view name) const;
  // nullopt only when `name` is non-empty and not an arm.
  std::optional<ArmAssignment> assign(std::string_view name, std::string_view user, uint64_t request_id) const;

  const std::vector<std::string>& names() const { return names_; }
  // "a, b, c": for error messages.
  std::string list() const;

 private:
  int32_t pick(uint64_t hash) const;

  std::vector<std::string> names_;
  std::vector<double> cumulative_;  // [arms] running sums of the weights
  uint64_t seed_;
};

}  // namespace specd::speculative

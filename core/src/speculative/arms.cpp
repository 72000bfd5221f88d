#include "speculative/arms.hpp"

#include <algorithm>

#include "common/hash.hpp"
#include "specd/error.hpp"

namespace specd::speculative {
namespace {

// FNV-1a over the bytes, then mixed: stable across platforms and standard libraries (unlike
// std::hash), so a user keeps its arm across restarts and builds.
uint64_t stable_hash(std::string_view s) {
  return splitmix64(fnv1a64(s));
}

// Keeps the user hash and the random draw independent of each other.
constexpr uint64_t kDrawSalt = 0x5DEECE66Dull;

}  // namespace

std::string_view arm_choice_name(ArmChoice choice) {
  switch (choice) {
    case ArmChoice::kExplicit:
      return "explicit";
    case ArmChoice::kUser:
      return "user";
    case ArmChoice::kRandom:
      return "random";
  }
  return "random";
}

ArmAssigner::ArmAssigner(std::vector<std::string> names, const std::vector<double>& weights, uint64_t seed)
    : names_(std::move(names)), seed_(seed) {
  SPECD_CHECK(
      !names_.empty() && names_.size() == weights.size(), ErrorCode::kInternal,
      "arm assigner: " + std::to_string(names_.size()) + " names for " + std::to_string(weights.size()) + " weights");
  double sum = 0;
  for (double w : weights) {
    SPECD_CHECK(w >= 0, ErrorCode::kInternal, "arm assigner: negative weight");
    sum += w;
    cumulative_.push_back(sum);
  }
  SPECD_CHECK(sum > 0, ErrorCode::kInternal, "arm assigner: the weights sum to 0");
}

std::optional<int32_t> ArmAssigner::find(std::string_view name) const {
  const auto it = std::find(names_.begin(), names_.end(), name);
  if (it == names_.end()) return std::nullopt;
  return static_cast<int32_t>(it - names_.begin());
}

std::optional<ArmAssignment> ArmAssigner::assign(std::string_view name, std::string_view user,
                                                 uint64_t request_id) const {
  if (!name.empty()) {
    const std::optional<int32_t> arm = find(name);
    if (!arm) return std::nullopt;
    return ArmAssignment{*arm, ArmChoice::kExplicit};
  }
  if (!user.empty()) return ArmAssignment{pick(stable_hash(user)), ArmChoice::kUser};
  return ArmAssignment{pick(splitmix64(splitmix64(seed_ ^ kDrawSalt) ^ request_id)), ArmChoice::kRandom};
}

int32_t ArmAssigner::pick(uint64_t hash) const {
  const double u = static_cast<double>(hash >> 11) * 0x1.0p-53;  // [0, 1)
  const double target = u * cumulative_.back();
  // The first arm whose running sum exceeds the target: a weight-0 arm never does.
  auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), target);
  if (it == cumulative_.end()) {  // u · Σ rounded up to Σ: the last arm with a weight
    it = std::lower_bound(cumulative_.begin(), cumulative_.end(), cumulative_.back());
  }
  return static_cast<int32_t>(it - cumulative_.begin());
}

std::string ArmAssigner::list() const {
  std::string out;
  for (const std::string& n : names_) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace specd::speculative

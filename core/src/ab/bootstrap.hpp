// Percentile bootstrap confidence intervals (Efron & Tibshirani, ch. 13) for the A/B report.
// The unit of resampling is a request: a statistic sees a list of unit indexes drawn with
// replacement, so ratios like Σ accepted / Σ drafted keep each request's steps together.
//
//   Bootstrap b(seed, 2000);
//   Estimate e = b.interval("rejection/acceptance", n, [&](std::span<const uint32_t> idx) { ... });
//
// Every interval draws from its own generator, seeded from (seed, label): the same report
// options give the same intervals whatever else the report computes.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

namespace specd::ab {

struct Estimate {
  double value = std::numeric_limits<double>::quiet_NaN();  // the statistic on the data itself
  double lo = std::numeric_limits<double>::quiet_NaN();     // 2.5th percentile of the resamples
  double hi = std::numeric_limits<double>::quiet_NaN();     // 97.5th percentile
  bool valid() const { return value == value; }
  // The interval excludes 0 (a difference that is significant at 95%).
  bool excludes_zero() const { return valid() && (lo > 0 || hi < 0); }
};

class Bootstrap {
 public:
  // A statistic over resampled unit indexes; NaN = undefined for this resample (skipped).
  using Statistic = std::function<double(std::span<const uint32_t>)>;
  using Statistic2 = std::function<double(std::span<const uint32_t>, std::span<const uint32_t>)>;

  Bootstrap(uint64_t seed, int resamples) : seed_(seed), resamples_(resamples) {}

  // One sample of n units.
  Estimate interval(std::string_view label, size_t n, const Statistic& statistic) const;
  // Two independent samples (a difference between arms that served different requests): each
  // resample draws both anew.
  Estimate interval(std::string_view label, size_t na, size_t nb, const Statistic2& statistic) const;

  int resamples() const { return resamples_; }
  uint64_t seed() const { return seed_; }
  // What one resample of every interval asked so far costs: the units drawn plus kCallUnits per
  // interval (a statistic's call). With resamples 0 the intervals are point estimates only, so a
  // report built that way measures what its resampling will cost.
  uint64_t units_per_resample() const { return units_; }
  static constexpr uint64_t kCallUnits = 64;

 private:
  Estimate finish(double value, std::vector<double>& draws) const;
  uint64_t seed_;
  int resamples_;
  mutable uint64_t units_ = 0;
};

// The p-quantile (p in [0, 1]) of values by linear interpolation between order statistics
// (type 7, numpy's default); NaN for no values. Reorders `values`.
double quantile(std::vector<double>& values, double p);

}  // namespace specd::ab

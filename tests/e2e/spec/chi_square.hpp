// Chi-square homogeneity test of two equally sized samples of token pairs, for the tests that
// check sampled output follows the target distribution.
#pragma once

#include <cmath>
#include <map>
#include <utility>

namespace specd::spec_test {

// Upper tail probability of a chi-square variable (Wilson–Hilferty approximation).
inline double chi2_sf(double x, double df) {
  const double z = (std::cbrt(x / df) - (1.0 - 2.0 / (9.0 * df))) / std::sqrt(2.0 / (9.0 * df));
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

// Chi-square test of homogeneity between two equally sized samples of (t1, t2) pairs.
inline double homogeneity_p_value(const std::map<std::pair<int, int>, int>& a,
                                  const std::map<std::pair<int, int>, int>& b) {
  std::map<std::pair<int, int>, std::pair<int, int>> joint;
  for (const auto& [k, n] : a) joint[k].first += n;
  for (const auto& [k, n] : b) joint[k].second += n;
  double chi2 = 0;
  int cells = 0;
  int pooled_a = 0, pooled_b = 0;  // rare cells pooled so the approximation holds
  for (const auto& [k, ab] : joint) {
    if (ab.first + ab.second < 10) {
      pooled_a += ab.first;
      pooled_b += ab.second;
      continue;
    }
    chi2 += std::pow(ab.first - ab.second, 2) / (ab.first + ab.second);
    ++cells;
  }
  if (pooled_a + pooled_b > 0) {
    chi2 += std::pow(pooled_a - pooled_b, 2) / (pooled_a + pooled_b);
    ++cells;
  }
  return cells < 2 ? 1.0 : chi2_sf(chi2, cells - 1);
}

}  // namespace specd::spec_test

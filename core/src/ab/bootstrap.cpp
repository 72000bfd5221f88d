#include "ab/bootstrap.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "common/hash.hpp"

namespace specd::ab {
namespace {

uint64_t label_seed(uint64_t seed, std::string_view label) {
  return splitmix64(seed ^ splitmix64(fnv1a64(label)));
}

void identity(std::vector<uint32_t>& idx, size_t n) {
  idx.resize(n);
  std::iota(idx.begin(), idx.end(), 0u);
}

void resample(std::vector<uint32_t>& idx, size_t n, std::mt19937_64& rng) {
  idx.resize(n);
  if (n == 0) return;
  std::uniform_int_distribution<uint32_t> pick(0, static_cast<uint32_t>(n - 1));
  for (uint32_t& i : idx) i = pick(rng);
}

}  // namespace

double quantile(std::vector<double>& values, double p) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const double h = p * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (h - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

Estimate Bootstrap::finish(double value, std::vector<double>& draws) const {
  Estimate e;
  e.value = value;
  if (!e.valid()) return e;
  draws.erase(std::remove_if(draws.begin(), draws.end(), [](double x) { return std::isnan(x); }), draws.end());
  e.lo = quantile(draws, 0.025);
  e.hi = quantile(draws, 0.975);
  return e;
}

Estimate Bootstrap::interval(std::string_view label, size_t n, const Statistic& statistic) const {
  std::vector<uint32_t> idx;
  identity(idx, n);
  const double value = n > 0 ? statistic(idx) : std::numeric_limits<double>::quiet_NaN();
  std::vector<double> draws;
  if (!std::isnan(value)) {
    std::mt19937_64 rng(label_seed(seed_, label));
    for (int b = 0; b < resamples_; ++b) {
      resample(idx, n, rng);
      draws.push_back(statistic(idx));
    }
  }
  return finish(value, draws);
}

Estimate Bootstrap::interval(std::string_view label, size_t na, size_t nb, const Statistic2& statistic) const {
  std::vector<uint32_t> a, b;
  identity(a, na);
  identity(b, nb);
  const double value = na > 0 && nb > 0 ? statistic(a, b) : std::numeric_limits<double>::quiet_NaN();
  std::vector<double> draws;
  if (!std::isnan(value)) {
    std::mt19937_64 rng(label_seed(seed_, label));
    for (int r = 0; r < resamples_; ++r) {
      resample(a, na, rng);
      resample(b, nb, rng);
      draws.push_back(statistic(a, b));
    }
  }
  return finish(value, draws);
}

}  // namespace specd::ab

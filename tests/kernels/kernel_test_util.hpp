// Helpers for the kernel suites: the device parameter, seeded inputs, error measures.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "specd/kernels/device.hpp"

namespace specd::kernels {
// Readable test parameters in gtest and ctest output.
inline void PrintTo(Device device, std::ostream* os) { *os << device_name(device); }
}  // namespace specd::kernels

namespace specd::kernels::testing {

// CUDA instances exist only in CUDA builds; there they skip, with the reason, without a device.
inline std::vector<Device> all_devices() {
#ifdef SPECD_WITH_CUDA
  return {Device::kCpu, Device::kCuda};
#else
  return {Device::kCpu};
#endif
}

inline std::string device_param_name(const ::testing::TestParamInfo<Device>& info) {
  return std::string(device_name(info.param));
}

#define SPECD_SKIP_IF_UNAVAILABLE(device)                                                    \
  do {                                                                                       \
    if (!::specd::kernels::device_available(device))                                         \
      GTEST_SKIP() << ::specd::kernels::device_name(device)                                  \
                   << " kernels are not built in this configuration (or no device present)"; \
  } while (0)

inline std::vector<float> random_vector(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// max |a - b| / max |b|: the error relative to the scale of the expected values.
inline double max_rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::abs(static_cast<double>(b[i])));
  }
  return den == 0.0 ? num : num / den;
}

}  // namespace specd::kernels::testing

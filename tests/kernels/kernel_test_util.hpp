// Helpers for the kernel suites: the device parameter, seeded inputs, error measures.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "specd/kernels/cpu_isa.hpp"
#include "specd/kernels/device.hpp"
#include "specd/kernels/device_memory.hpp"
#include "specd/kernels/dtype.hpp"

namespace specd::kernels {
// Readable test parameters in gtest and ctest output.
inline void PrintTo(Device device, std::ostream* os) {
  *os << device_name(device);
}
inline void PrintTo(DType dtype, std::ostream* os) {
  *os << dtype_name(dtype);
}

// Where an op with per-ISA CPU variants runs: the device, and on the CPU the instruction-set
// level (every level is tested on every machine that can run it).
struct Backend {
  Device device = Device::kCpu;
  CpuIsa isa = CpuIsa::kScalar;
};
inline void PrintTo(const Backend& b, std::ostream* os) {
  *os << device_name(b.device);
  if (b.device == Device::kCpu) *os << "_" << cpu_isa_name(b.isa);
}
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

inline std::vector<Backend> all_backends() {
  std::vector<Backend> out;
  for (CpuIsa isa : kAllCpuIsas) out.push_back({Device::kCpu, isa});  // each skips where the CPU lacks it
#ifdef SPECD_WITH_CUDA
  out.push_back({Device::kCuda, CpuIsa::kScalar});  // CUDA instances only in CUDA builds
#endif
  return out;
}

inline std::string backend_name(const Backend& b) {
  std::string name(device_name(b.device));
  if (b.device == Device::kCpu) {
    name += '_';
    name += cpu_isa_name(b.isa);
  }
  return name;
}

// Selects the backend's ISA level for the test and restores the previous one afterwards;
// skips (with the reason) where the device or level is not available here.
class BackendTest {
 public:
  static bool usable(const Backend& b, std::string* why) {
    if (!device_available(b.device)) {
      *why = std::string(device_name(b.device)) + " kernels are not built in this configuration (or no device present)";
      return false;
    }
    const std::vector<CpuIsa> runs = supported_cpu_isas();
    if (b.device == Device::kCpu && std::find(runs.begin(), runs.end(), b.isa) == runs.end()) {
      *why = "this CPU cannot run the " + std::string(cpu_isa_name(b.isa)) +
             " kernels (best: " + std::string(cpu_isa_name(detected_cpu_isa())) + ")";
      return false;
    }
    return true;
  }
};

class IsaGuard {
 public:
  explicit IsaGuard(CpuIsa isa) : saved_(active_cpu_isa()) { set_cpu_isa(isa); }
  ~IsaGuard() { set_cpu_isa(saved_); }
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;

 private:
  CpuIsa saved_;
};

#define SPECD_SKIP_IF_UNAVAILABLE(device)                                                    \
  do {                                                                                       \
    if (!::specd::kernels::device_available(device))                                         \
      GTEST_SKIP() << ::specd::kernels::device_name(device)                                  \
                   << " kernels are not built in this configuration (or no device present)"; \
  } while (0)

#define SPECD_USE_BACKEND(backend)                                                   \
  std::string specd_skip_reason_;                                                    \
  if (!::specd::kernels::testing::BackendTest::usable(backend, &specd_skip_reason_)) \
    GTEST_SKIP() << specd_skip_reason_;                                              \
  ::specd::kernels::testing::IsaGuard specd_isa_guard_((backend).isa)

// A copy of a vector where a device's ops take it: a host vector of its own on the CPU, device
// memory on CUDA. read() returns the copy's contents (after the ops wrote into it).
template <class T>
class Mirror {
 public:
  Mirror(Device device, std::vector<T> v) : device_(device), host_(std::move(v)) {
    if (device_ != Device::kCpu) {
      buf_ = DeviceBuffer(device_, host_.size() * sizeof(T));
      copy_to_device(device_, buf_.data(), host_.data(), host_.size() * sizeof(T));
    }
  }
  T* get() const { return device_ == Device::kCpu ? const_cast<T*>(host_.data()) : buf_.as<T>(); }
  std::vector<T> read() const {
    if (device_ == Device::kCpu) return host_;
    std::vector<T> out(host_.size());
    copy_to_host(device_, out.data(), buf_.data(), out.size() * sizeof(T));
    return out;
  }

 private:
  Device device_;
  std::vector<T> host_;
  DeviceBuffer buf_;
};

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

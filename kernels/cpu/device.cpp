#include "specd/kernels/device.hpp"

#include <string>

#include "specd/error.hpp"

namespace specd::kernels {

std::string_view device_name(Device device) noexcept {
  switch (device) {
    case Device::kCpu:
      return "cpu";
    case Device::kCuda:
      return "cuda";
  }
  return "unknown";
}

bool device_available(Device device) noexcept {
  return device == Device::kCpu;
}

namespace detail {
void require_cpu(Device device, std::string_view op) {
  if (device != Device::kCpu) {
    throw Error(ErrorCode::kUnsupported, "kernel " + std::string(op) + " has no " + std::string(device_name(device)) +
                                             " implementation in this build");
  }
}
}  // namespace detail

}  // namespace specd::kernels

#include "specd/kernels/device.hpp"

#include <string>

#include "specd/error.hpp"

#ifdef SPECD_WITH_CUDA
#include "../cuda/cuda_ops.hpp"
#endif

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
  if (device == Device::kCpu) return true;
#ifdef SPECD_WITH_CUDA
  return cuda::device_count() > 0;
#else
  return false;
#endif
}

std::string device_description(Device device) {
  if (device == Device::kCpu) return "cpu";
#ifdef SPECD_WITH_CUDA
  return cuda::describe_device();
#else
  return "CUDA not built";
#endif
}

std::string cuda_build_text() {
#ifdef SPECD_WITH_CUDA
  return cuda::build_text();
#else
  return "not built";
#endif
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

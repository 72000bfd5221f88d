// Devices the kernels can run on. Every op takes the device as its first argument; the CPU
// implementation is always built and is the reference the other devices are tested against.
#pragma once

#include <string_view>

namespace specd::kernels {

enum class Device { kCpu, kCuda };

std::string_view device_name(Device device) noexcept;

// True when this build carries the device's implementation of the ops and the device is
// usable in this process. CPU: always. CUDA: no CUDA ops exist yet, so always false.
bool device_available(Device device) noexcept;

namespace detail {
// Throws specd::Error(kUnsupported) naming `op` when `device` has no implementation.
void require_cpu(Device device, std::string_view op);
}  // namespace detail

}  // namespace specd::kernels

// Devices the kernels can run on. Every op takes the device as its first argument; the CPU
// implementation is always built and is the reference the other devices are tested against.
#pragma once

#include <string>
#include <string_view>

namespace specd::kernels {

enum class Device { kCpu, kCuda };

std::string_view device_name(Device device) noexcept;

// True when this build carries the device's implementation of the ops and the device is
// usable in this process. CPU: always. CUDA: in CUDA builds, where the runtime finds a device.
// Not every op has a CUDA implementation yet (docs/cuda.md); those throw kUnsupported.
bool device_available(Device device) noexcept;

// What the device is: "cpu", or the CUDA device's name, architecture, memory and SM count
// ("no CUDA device" / "not built" where there is none).
std::string device_description(Device device);

// The CUDA support built in: "runtime 13.0, architectures 80 90", or "not built".
std::string cuda_build_text();

namespace detail {
// Throws specd::Error(kUnsupported) naming `op` when `device` has no implementation.
void require_cpu(Device device, std::string_view op);
}  // namespace detail

}  // namespace specd::kernels

// Memory the ops of a device read and write, and copies to and from it. Every op takes the
// pointers of its device: host memory for Device::kCpu, CUDA device memory (from device_alloc)
// for Device::kCuda. CUDA ops run in order on the calling thread's stream; copy_to_host waits
// for them.
#pragma once

#include <cstddef>
#include <utility>

#include "specd/kernels/device.hpp"

namespace specd::kernels {

// Throws specd::Error: kUnsupported where the device is not available (device_available),
// kOutOfMemory naming the size and the device's free memory.
void* device_alloc(Device device, size_t bytes);
void device_free(Device device, void* p) noexcept;
void copy_to_device(Device device, void* dst, const void* src, size_t bytes);
void copy_to_host(Device device, void* dst, const void* src, size_t bytes);
// dst and src both in the device's memory (they must not overlap); queued like an op.
void copy_on_device(Device device, void* dst, const void* src, size_t bytes);
// `rows` rows of `width` bytes, row r from src + r * src_pitch to dst + r * dst_pitch, both in
// the device's memory (pitches >= width; no overlap); queued like an op.
void copy_rows_on_device(Device device, void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                         size_t rows);
// The device's memory in bytes: free now and total (the CPU: available and physical RAM).
struct DeviceMemoryInfo {
  size_t free = 0;
  size_t total = 0;
};
DeviceMemoryInfo device_memory_info(Device device);
// Waits for the device's queued work; throws specd::Error(kInternal) with the device's own
// message where that work failed.
void device_synchronize(Device device);

// An owned allocation on one device (move-only).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device device, size_t bytes) : device_(device), bytes_(bytes), data_(device_alloc(device, bytes)) {}
  ~DeviceBuffer() { device_free(device_, data_); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : device_(o.device_), bytes_(std::exchange(o.bytes_, 0)), data_(std::exchange(o.data_, nullptr)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      device_free(device_, data_);
      device_ = o.device_;
      bytes_ = std::exchange(o.bytes_, 0);
      data_ = std::exchange(o.data_, nullptr);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const noexcept { return data_; }
  template <class T>
  T* as() const noexcept {
    return static_cast<T*>(data_);
  }
  size_t size() const noexcept { return bytes_; }
  Device device() const noexcept { return device_; }

 private:
  Device device_ = Device::kCpu;
  size_t bytes_ = 0;
  void* data_ = nullptr;
};

}  // namespace specd::kernels

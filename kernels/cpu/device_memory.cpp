#include "specd/kernels/device_memory.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "specd/error.hpp"

#ifdef SPECD_WITH_CUDA
#include "../cuda/cuda_ops.hpp"
#endif

namespace specd::kernels {
namespace {

void require_available(Device device, const char* what) {
  if (!device_available(device))
    throw Error(ErrorCode::kUnsupported, std::string(what) + ": " + std::string(device_name(device)) +
                                             " is not available (" + device_description(device) + ")");
}

}  // namespace

void* device_alloc(Device device, size_t bytes) {
  require_available(device, "device_alloc");
#ifdef SPECD_WITH_CUDA
  if (device == Device::kCuda) return cuda::alloc(bytes);
#endif
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  if (p == nullptr) throw Error(ErrorCode::kOutOfMemory, "cannot allocate " + std::to_string(bytes) + " bytes");
  return p;
}

void device_free(Device device, void* p) noexcept {
  if (p == nullptr) return;
#ifdef SPECD_WITH_CUDA
  if (device == Device::kCuda) {
    cuda::free(p);
    return;
  }
#else
  (void)device;
#endif
  std::free(p);
}

void copy_to_device(Device device, void* dst, const void* src, size_t bytes) {
  require_available(device, "copy_to_device");
#ifdef SPECD_WITH_CUDA
  if (device == Device::kCuda) return cuda::copy_to_device(dst, src, bytes);
#endif
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

void copy_to_host(Device device, void* dst, const void* src, size_t bytes) {
  require_available(device, "copy_to_host");
#ifdef SPECD_WITH_CUDA
  if (device == Device::kCuda) return cuda::copy_to_host(dst, src, bytes);
#endif
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

void copy_on_device(Device device, void* dst, const void* src, size_t bytes) {
  require_available(device, "copy_on_device");
#ifdef SPECD_WITH_CUDA
  if (device == Device::kCuda) return cuda::copy_on_device(dst, src, bytes);
#endif
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

void copy_rows_on_device(Device device, void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                         size_t rows) {
  require_available(device, "copy_rows_on_device");
  if (width > dst_pitch || width > src_pitch)
    throw Error(ErrorCode::kInvalidArgument, "copy_rows_on_device: rows of " + std::to_string(width) +
                                                 " bytes wider than a pitch (" + std::to_string(dst_pitch) + ", " +
                                                 std::to_string(src_pitch) + ")");
#ifdef SPECD_WITH_CUDA
  if (device == Device::kCuda) return cuda::copy_rows_on_device(dst, dst_pitch, src, src_pitch, width, rows);
#endif
  for (size_t r = 0; r < rows && width > 0; ++r)
    std::memcpy(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch, width);
}

DeviceMemoryInfo device_memory_info(Device device) {
  require_available(device, "device_memory_info");
#ifdef SPECD_WITH_CUDA
  if (device == Device::kCuda) {
    DeviceMemoryInfo m;
    cuda::memory_info(&m.free, &m.total);
    return m;
  }
#endif
  const long page = sysconf(_SC_PAGESIZE), avail = sysconf(_SC_AVPHYS_PAGES), total = sysconf(_SC_PHYS_PAGES);
  return {avail > 0 && page > 0 ? static_cast<size_t>(avail) * static_cast<size_t>(page) : 0,
          total > 0 && page > 0 ? static_cast<size_t>(total) * static_cast<size_t>(page) : 0};
}

void device_synchronize(Device device) {
  require_available(device, "device_synchronize");
#ifdef SPECD_WITH_CUDA
  if (device == Device::kCuda) cuda::synchronize();
#endif
}

}  // namespace specd::kernels

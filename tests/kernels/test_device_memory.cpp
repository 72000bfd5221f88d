// Device memory (device_memory.hpp): allocations, copies both ways and DeviceBuffer ownership on
// every device present; a device that is absent is refused, naming it, never faked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernel_test_util.hpp"
#include "specd/error.hpp"
#include "specd/kernels/device_memory.hpp"

namespace specd::kernels {
namespace {

class DeviceMemoryTest : public ::testing::TestWithParam<Device> {};

TEST_P(DeviceMemoryTest, CopiesRoundTripThroughABuffer) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  std::vector<uint8_t> in(100003);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 131 + 7);
  DeviceBuffer buf(GetParam(), in.size());
  EXPECT_EQ(buf.size(), in.size());
  EXPECT_EQ(buf.device(), GetParam());
  ASSERT_NE(buf.data(), nullptr);
  copy_to_device(GetParam(), buf.data(), in.data(), in.size());
  std::vector<uint8_t> out(in.size());
  copy_to_host(GetParam(), out.data(), buf.data(), out.size());
  device_synchronize(GetParam());
  EXPECT_EQ(out, in);
  // A partial copy back, at an offset.
  std::vector<uint8_t> part(10);
  copy_to_host(GetParam(), part.data(), buf.as<uint8_t>() + 1000, part.size());
  EXPECT_EQ(part, std::vector<uint8_t>(in.begin() + 1000, in.begin() + 1010));
}

TEST_P(DeviceMemoryTest, CopiesWithinTheDevice) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  std::vector<uint8_t> in(4099);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 17 + 3);
  DeviceBuffer src(GetParam(), in.size()), dst(GetParam(), in.size());
  copy_to_device(GetParam(), src.data(), in.data(), in.size());
  std::vector<uint8_t> zeros(in.size(), 0);
  copy_to_device(GetParam(), dst.data(), zeros.data(), zeros.size());
  // Bytes [1000, 3000) of src to [7, 2007) of dst; the rest of dst stays zero.
  copy_on_device(GetParam(), dst.as<uint8_t>() + 7, src.as<uint8_t>() + 1000, 2000);
  copy_on_device(GetParam(), dst.data(), src.data(), 0);  // nothing
  std::vector<uint8_t> out(in.size());
  copy_to_host(GetParam(), out.data(), dst.data(), out.size());
  std::vector<uint8_t> want(in.size(), 0);
  std::copy(in.begin() + 1000, in.begin() + 3000, want.begin() + 7);
  EXPECT_EQ(out, want);
}

TEST_P(DeviceMemoryTest, CopiesRowsWithinTheDevice) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  // 5 rows of 12 bytes from a pitch of 20 into the second half of rows of pitch 24.
  std::vector<uint8_t> in(5 * 20), zeros(5 * 24, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i + 1);
  DeviceBuffer src(GetParam(), in.size()), dst(GetParam(), zeros.size());
  copy_to_device(GetParam(), src.data(), in.data(), in.size());
  copy_to_device(GetParam(), dst.data(), zeros.data(), zeros.size());
  copy_rows_on_device(GetParam(), dst.as<uint8_t>() + 12, 24, src.data(), 20, 12, 5);
  std::vector<uint8_t> out(zeros.size()), want(zeros.size(), 0);
  copy_to_host(GetParam(), out.data(), dst.data(), out.size());
  for (size_t r = 0; r < 5; ++r)
    for (size_t b = 0; b < 12; ++b) want[r * 24 + 12 + b] = in[r * 20 + b];
  EXPECT_EQ(out, want);
  EXPECT_THROW(copy_rows_on_device(GetParam(), dst.data(), 8, src.data(), 20, 12, 1), Error);
}

TEST_P(DeviceMemoryTest, ReportsItsMemory) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const DeviceMemoryInfo m = device_memory_info(GetParam());
  EXPECT_GT(m.total, size_t{1} << 20);
  EXPECT_LE(m.free, m.total);
}

TEST_P(DeviceMemoryTest, BuffersMoveTheirOwnership) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  DeviceBuffer a(GetParam(), 64);
  void* p = a.data();
  DeviceBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(a.size(), 0u);       // NOLINT(bugprone-use-after-move)
  DeviceBuffer c(GetParam(), 8);
  c = std::move(b);  // frees c's own allocation
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.size(), 64u);
  DeviceBuffer empty(GetParam(), 0);  // a zero-byte buffer is a valid, distinct allocation
  EXPECT_NE(empty.data(), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Devices, DeviceMemoryTest, ::testing::ValuesIn(testing::all_devices()),
                         testing::device_param_name);

// Where no CUDA device can be used (this build without CUDA, or no GPU), CUDA memory is refused
// with an error that names the device and says why.
TEST(DeviceMemory, AnAbsentDeviceIsRefusedByName) {
  if (device_available(Device::kCuda))
    GTEST_SKIP() << "a CUDA device is present: " << device_description(Device::kCuda);
  try {
    DeviceBuffer buf(Device::kCuda, 16);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("cuda is not available"), std::string::npos) << e.what();
  }
  std::vector<uint8_t> host(4);
  EXPECT_THROW(copy_to_device(Device::kCuda, host.data(), host.data(), 4), Error);
  EXPECT_THROW(device_synchronize(Device::kCuda), Error);
  EXPECT_FALSE(cuda_build_text().empty());
}

}  // namespace
}  // namespace specd::kernels

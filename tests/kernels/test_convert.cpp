// to_f32 / from_f32: GGUF block layouts byte for byte, exact widening on every ISA level,
// round-trip error bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <vector>

#include "kernel_test_util.hpp"
#include "specd/error.hpp"
#include "specd/kernels/convert.hpp"

namespace specd::kernels {
namespace {
using testing::random_vector;

std::vector<uint8_t> store(DType dt, const std::vector<float>& x) {
  std::vector<uint8_t> out(row_bytes(dt, static_cast<int64_t>(x.size())));
  from_f32(Device::kCpu, x.data(), dt, out.data(), static_cast<int64_t>(x.size()));
  return out;
}

TEST(Quantize, Q8_0BlockIsGgufLayout) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i - 16);
  const auto bytes = store(DType::kQ8_0, x);
  ASSERT_EQ(bytes.size(), 34u);
  BlockQ8_0 b;
  std::memcpy(&b, bytes.data(), sizeof(b));
  EXPECT_EQ(b.d, f32_to_f16(16.0f / 127.0f));
  for (int i = 0; i < 32; ++i) EXPECT_EQ(b.q[i], static_cast<int8_t>(std::round((i - 16) * (127.0f / 16.0f)))) << i;
  EXPECT_EQ(b.q[0], -127);
}

TEST(Quantize, Q4_0NibbleOrderIsGguf) {
  // Elements 0..15 -> nibbles 0..15 (low halves), elements 16..31 -> 15..0 (high halves).
  const float s = 0.25f;
  std::vector<float> x(32);
  for (int j = 0; j < 16; ++j) {
    x[static_cast<size_t>(j)] = static_cast<float>(j - 8) * s;
    x[static_cast<size_t>(16 + j)] = static_cast<float>(7 - j) * s;
  }
  const auto bytes = store(DType::kQ4_0, x);
  ASSERT_EQ(bytes.size(), 18u);
  BlockQ4_0 b;
  std::memcpy(&b, bytes.data(), sizeof(b));
  EXPECT_EQ(f16_to_f32(b.d), s);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.q[j], static_cast<uint8_t>(j | ((15 - j) << 4))) << j;
  std::vector<float> back(32);
  to_f32(Device::kCpu, DType::kQ4_0, bytes.data(), back.data(), 32);
  EXPECT_EQ(back, x);  // every value is representable: exact
}

TEST(Quantize, ZeroBlockHasZeroScale) {
  for (DType dt : {DType::kQ8_0, DType::kQ4_0}) {
    const std::vector<float> x(64, 0.0f);
    std::vector<float> back(64, 1.0f);
    to_f32(Device::kCpu, dt, store(dt, x).data(), back.data(), 64);
    EXPECT_EQ(back, x) << dtype_name(dt);
  }
}

TEST(Quantize, RefusesPartialBlocks) {
  const std::vector<float> x(40, 1.0f);
  std::vector<uint8_t> out(64);
  EXPECT_THROW(from_f32(Device::kCpu, x.data(), DType::kQ8_0, out.data(), 40), Error);
  std::vector<float> back(40);
  EXPECT_THROW(to_f32(Device::kCpu, DType::kQ4_0, out.data(), back.data(), 40), Error);
}

class ConvertTest : public ::testing::TestWithParam<Backend> {};

// to_f32 of `bytes` on `device` through device copies.
std::vector<float> widen_on(Device device, DType dt, const std::vector<uint8_t>& bytes, int64_t n) {
  const testing::Mirror<uint8_t> src(device, bytes);
  const testing::Mirror<float> dst(device, std::vector<float>(static_cast<size_t>(n)));
  to_f32(device, dt, src.get(), dst.get(), n);
  return dst.read();
}

// Round trip error per element, relative to the block's (or the element's) magnitude:
// f16 2^-11, bf16 2^-8 of the value; q8_0 half a step of max|x|/127; q4_0 one step of max|x|/8;
// the K-quants (blocks of 256 with sub-block scales quantized to 6 or 8 bits) one step of their
// levels over the block's range: q4_k 2·max|x|/15, q5_k 2·max|x|/31, q6_k max|x|/32, q3_k
// max|x|/4 (levels -4..3: a value at -max of its group clamps a whole step), q2_k 2·max|x|/3,
// with 20% for the fitted scales and their rounding.
TEST_P(ConvertTest, RoundTripWithinTheFormatsResolution) {
  SPECD_USE_BACKEND(GetParam());
  const int64_t n = 256 * 25;
  const auto x = random_vector(static_cast<size_t>(n), 7, -3.0f, 3.0f);
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K,
                   DType::kQ6_K, DType::kQ3_K, DType::kQ2_K}) {
    const auto bytes = store(dt, x);
    const std::vector<float> back = widen_on(GetParam().device, dt, bytes, n);
    const int64_t blk = is_k_quant(dt) ? 256 : 32;
    for (int64_t b = 0; b < n / blk; ++b) {
      float amax = 0;
      for (int64_t i = 0; i < blk; ++i) amax = std::max(amax, std::abs(x[static_cast<size_t>(b * blk + i)]));
      for (int64_t i = 0; i < blk; ++i) {
        const auto idx = static_cast<size_t>(b * blk + i);
        const double err = std::abs(static_cast<double>(back[idx]) - x[idx]);
        double bound = 0;
        switch (dt) {
          case DType::kF32:
            bound = 0;
            break;
          case DType::kF16:
            bound = std::abs(x[idx]) * 0x1p-11 + 1e-7;
            break;
          case DType::kBF16:
            bound = std::abs(x[idx]) * 0x1p-8;
            break;
          case DType::kQ8_0:
            bound = amax / 127.0 * 0.5 * 1.002 + amax * 1e-3;
            break;  // + fp16 rounding of d
          case DType::kQ4_0:
            bound = amax / 8.0 * 1.002 + amax * 1e-3;
            break;
          case DType::kQ4_K:
            bound = 2.0 * amax / 15.0;
            break;
          case DType::kQ5_K:
            bound = 2.0 * amax / 31.0;
            break;
          case DType::kQ6_K:
            bound = amax / 32.0;
            break;
          case DType::kQ3_K:
            bound = amax / 4.0 * 1.2;
            break;
          case DType::kQ2_K:
            bound = 2.0 * amax / 3.0 * 1.2;
            break;
        }
        ASSERT_LE(err, bound) << dtype_name(dt) << " element " << idx;
      }
    }
  }
}

TEST_P(ConvertTest, WideningIsExactAndEqualOnEveryLevel) {
  SPECD_USE_BACKEND(GetParam());
  const int64_t n = 256 * 37;
  const auto x = random_vector(static_cast<size_t>(n), 9, -5.0f, 5.0f);
  for (DType dt : {DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,
                   DType::kQ3_K, DType::kQ2_K}) {
    const auto bytes = store(dt, x);
    const std::vector<float> got = widen_on(GetParam().device, dt, bytes, n);
    std::vector<float> want(static_cast<size_t>(n));
    {
      testing::IsaGuard scalar(CpuIsa::kScalar);
      to_f32(Device::kCpu, dt, bytes.data(), want.data(), n);
    }
    EXPECT_EQ(got, want) << dtype_name(dt);
  }
}

// Narrowing to f16 / bf16 rounds to nearest, ties to even, on every backend: the same bits as
// the scalar level for ties, overflow to infinity, subnormals and signed zeros (NaN aside: its
// payload is the implementation's).
TEST_P(ConvertTest, NarrowingEqualsTheScalarLevel) {
  SPECD_USE_BACKEND(GetParam());
  auto x = random_vector(4099, 15, -70000.0f, 70000.0f);
  const float specials[] = {0.0f,
                            -0.0f,
                            65504.0f,
                            65519.0f,
                            65520.0f,
                            -1e9f,
                            1e-8f,
                            -6.1e-5f,
                            1.0f + 0x1p-11f,
                            1.0f + 0x1p-8f,
                            3e-41f,
                            1e38f,
                            0x1p-24f,
                            0x1p-25f,
                            0x1.8p-25f,
                            std::numeric_limits<float>::infinity()};
  std::copy(std::begin(specials), std::end(specials), x.begin());
  const auto n = static_cast<int64_t>(x.size());
  const testing::Mirror<float> src(GetParam().device, x);
  for (DType dt : {DType::kF16, DType::kBF16, DType::kF32}) {
    const testing::Mirror<uint8_t> dst(GetParam().device, std::vector<uint8_t>(row_bytes(dt, n)));
    from_f32(GetParam().device, src.get(), dt, dst.get(), n);
    std::vector<uint8_t> want(row_bytes(dt, n));
    {
      testing::IsaGuard scalar(CpuIsa::kScalar);
      from_f32(Device::kCpu, x.data(), dt, want.data(), n);
    }
    EXPECT_EQ(dst.read(), want) << dtype_name(dt);
  }
}

INSTANTIATE_TEST_SUITE_P(All, ConvertTest, ::testing::ValuesIn(testing::all_backends()),
                         [](const ::testing::TestParamInfo<Backend>& i) { return testing::backend_name(i.param); });

}  // namespace
}  // namespace specd::kernels

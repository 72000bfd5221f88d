#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>

#include "kernel_test_util.hpp"
#include "specd/error.hpp"
#include "specd/kernels/rope.hpp"

namespace specd::kernels {
namespace {
using testing::Mirror;
using testing::random_vector;

TEST(RopeInvFreq, PlainLinearAndLlama3) {
  const int64_t hd = 64;
  const auto plain = rope_inv_freq(hd, 500000.0, {});
  ASSERT_EQ(plain.size(), 32u);
  for (int64_t j = 0; j < 32; ++j) {
    EXPECT_NEAR(plain[j], std::pow(500000.0, -2.0 * j / hd), 1e-6 * plain[j]) << j;
  }
  RopeScalingParams lin;
  lin.kind = RopeScalingParams::Kind::kLinear;
  lin.factor = 4.0;
  const auto linear = rope_inv_freq(hd, 500000.0, lin);
  for (size_t j = 0; j < plain.size(); ++j) EXPECT_FLOAT_EQ(linear[j], plain[j] / 4.0f);

  RopeScalingParams l3;
  l3.kind = RopeScalingParams::Kind::kLlama3;
  l3.factor = 8.0;
  l3.low_freq_factor = 1.0;
  l3.high_freq_factor = 4.0;
  l3.original_max_position_embeddings = 8192;
  const auto scaled = rope_inv_freq(hd, 500000.0, l3);
  int kept = 0, divided = 0, smoothed = 0;
  for (size_t j = 0; j < plain.size(); ++j) {
    const double wavelen = 2 * std::numbers::pi / plain[j];
    if (wavelen < 8192.0 / 4.0) {
      EXPECT_FLOAT_EQ(scaled[j], plain[j]);  // high frequencies untouched
      ++kept;
    } else if (wavelen > 8192.0) {
      EXPECT_FLOAT_EQ(scaled[j], plain[j] / 8.0f);  // low frequencies divided by factor
      ++divided;
    } else {
      EXPECT_LT(scaled[j], plain[j]);  // medium band interpolated between the two
      EXPECT_GT(scaled[j], plain[j] / 8.0f);
      ++smoothed;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(smoothed, 0);
  EXPECT_THROW(rope_inv_freq(63, 10000.0, {}), Error);
}

class RopeTest : public ::testing::TestWithParam<Device> {};

TEST_P(RopeTest, RotatesHalvesAndKeepsRelativePositions) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const int64_t hd = 16, half = 8, heads = 3;
  const auto inv = rope_inv_freq(hd, 10000.0, {});
  const std::vector<int32_t> pos = {0, 5, 12, 7};
  const Device dev = GetParam();
  const Mirror<int32_t> dpos(dev, pos);
  const Mirror<float> dinv(dev, inv), dcs(dev, std::vector<float>(pos.size() * half)),
      dsn(dev, std::vector<float>(pos.size() * half));
  rope_cos_sin(dev, dpos.get(), 4, dinv.get(), half, dcs.get(), dsn.get());
  const auto orig = random_vector(4 * heads * hd, 21);
  auto rotate = [&](const std::vector<float>& in) {
    const Mirror<float> dx(dev, in);
    rope_apply(dev, dx.get(), 4, heads, hd, dcs.get(), dsn.get());
    return dx.read();
  };
  std::vector<float> x = rotate(orig);
  for (size_t t = 0; t < pos.size(); ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t j = 0; j < half; ++j) {
        const size_t base = (t * heads + h) * hd;
        const double a = pos[t] * static_cast<double>(inv[j]);
        const double x0 = orig[base + j], x1 = orig[base + j + half];
        EXPECT_NEAR(x[base + j], x0 * std::cos(a) - x1 * std::sin(a), 1e-6);
        EXPECT_NEAR(x[base + j + half], x1 * std::cos(a) + x0 * std::sin(a), 1e-6);
      }
    }
  }
  // q at position m and k at position n: the score depends only on m - n (12-5 == 7-0).
  auto dot = [&](size_t tq, size_t tk) {
    double d = 0;
    for (int64_t e = 0; e < hd; ++e) d += static_cast<double>(x[tq * heads * hd + e]) * x[tk * heads * hd + e];
    return d;
  };
  std::vector<float> y(orig.begin(), orig.end());
  // Put the same q into tokens 2 and 3 and the same k into tokens 1 and 0, rotate again.
  const auto row = static_cast<std::ptrdiff_t>(heads * hd);
  const std::vector<float> q_row(y.begin() + 2 * row, y.begin() + 3 * row);
  const std::vector<float> k_row(y.begin() + row, y.begin() + 2 * row);
  std::copy(q_row.begin(), q_row.end(), y.begin() + 3 * row);
  std::copy(k_row.begin(), k_row.end(), y.begin());
  x = rotate(y);
  EXPECT_NEAR(dot(2, 1), dot(3, 0), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Devices, RopeTest, ::testing::ValuesIn(testing::all_devices()), testing::device_param_name);

}  // namespace
}  // namespace specd::kernels

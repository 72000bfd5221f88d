#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernel_test_util.hpp"
#include "specd/error.hpp"
#include "specd/kernels/softmax.hpp"

namespace specd::kernels {
namespace {
using testing::max_rel_error;
using testing::random_vector;

class SoftmaxTest : public ::testing::TestWithParam<Device> {};

TEST_P(SoftmaxTest, MatchesReferenceAndSumsToOne) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const int64_t rows = 6, cols = 1001;
  const auto x = random_vector(rows * cols, 9, -30, 30);
  std::vector<float> got(rows * cols), want(rows * cols);
  softmax(GetParam(), x.data(), got.data(), rows, cols);
  reference::softmax(x.data(), want.data(), rows, cols);
  EXPECT_LT(max_rel_error(got, want), 1e-5);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t i = 0; i < cols; ++i) s += got[r * cols + i];
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
}

TEST_P(SoftmaxTest, HandlesMinusInfinityAndLargeValues) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {1000.0f, -inf, 1000.0f};
  softmax(GetParam(), x.data(), x.data(), 1, 3);
  EXPECT_FLOAT_EQ(x[0], 0.5f);
  EXPECT_EQ(x[1], 0.0f);
  EXPECT_FLOAT_EQ(x[2], 0.5f);
  std::vector<float> all_masked = {-inf, -inf};
  EXPECT_THROW(softmax(GetParam(), all_masked.data(), all_masked.data(), 1, 2), Error);
}

TEST_P(SoftmaxTest, TemperatureDividesTheLogits) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const int64_t rows = 2, cols = 300;
  const auto x = random_vector(rows * cols, 11, -8, 8);
  for (float t : {0.25f, 0.7f, 3.0f}) {
    std::vector<float> scaled(x), got(rows * cols), want(rows * cols);
    for (float& v : scaled) v /= t;
    softmax(GetParam(), x.data(), got.data(), rows, cols, t);
    reference::softmax(scaled.data(), want.data(), rows, cols);
    EXPECT_LT(max_rel_error(got, want), 1e-5) << "temperature " << t;
  }
  std::vector<float> row = {1.0f, 2.0f};
  EXPECT_THROW(softmax(GetParam(), row.data(), row.data(), 1, 2, 0.0f), Error);
}

TEST_P(SoftmaxTest, LogSoftmaxIsLogOfSoftmax) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const int64_t rows = 3, cols = 50;
  const auto x = random_vector(rows * cols, 10, -5, 5);
  std::vector<float> p(rows * cols), lp(rows * cols);
  reference::softmax(x.data(), p.data(), rows, cols);
  log_softmax(GetParam(), x.data(), lp.data(), rows, cols);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(lp[i], std::log(p[i]), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Devices, SoftmaxTest, ::testing::ValuesIn(testing::all_devices()),
                         testing::device_param_name);

}  // namespace
}  // namespace specd::kernels

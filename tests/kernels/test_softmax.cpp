#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernel_test_util.hpp"
#include "specd/error.hpp"
#include "specd/kernels/softmax.hpp"

namespace specd::kernels {
namespace {
using testing::max_rel_error;
using testing::Mirror;
using testing::random_vector;

class SoftmaxTest : public ::testing::TestWithParam<Backend> {};

TEST_P(SoftmaxTest, MatchesReferenceAndSumsToOne) {
  SPECD_USE_BACKEND(GetParam());
  const int64_t rows = 6, cols = 1001;
  const auto x = random_vector(rows * cols, 9, -30, 30);
  std::vector<float> got(rows * cols), want(rows * cols);
  const Device dev = GetParam().device;
  const Mirror<float> dx(dev, x), dout(dev, got);
  softmax(dev, dx.get(), dout.get(), rows, cols);
  got = dout.read();
  reference::softmax(x.data(), want.data(), rows, cols);
  EXPECT_LT(max_rel_error(got, want), 1e-5);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t i = 0; i < cols; ++i) s += got[r * cols + i];
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
}

TEST_P(SoftmaxTest, HandlesMinusInfinityAndLargeValues) {
  SPECD_USE_BACKEND(GetParam());
  const float inf = std::numeric_limits<float>::infinity();
  const Device dev = GetParam().device;
  const Mirror<float> dx(dev, {1000.0f, -inf, 1000.0f});
  softmax(dev, dx.get(), dx.get(), 1, 3);  // in place
  const std::vector<float> x = dx.read();
  EXPECT_FLOAT_EQ(x[0], 0.5f);
  EXPECT_EQ(x[1], 0.0f);
  EXPECT_FLOAT_EQ(x[2], 0.5f);
  const Mirror<float> all_masked(dev, {-inf, -inf});
  EXPECT_THROW(softmax(dev, all_masked.get(), all_masked.get(), 1, 2), Error);
  const Mirror<float> second_row_masked(dev, {0.0f, 1.0f, -inf, -inf});
  EXPECT_THROW(log_softmax(dev, second_row_masked.get(), second_row_masked.get(), 2, 2), Error);
}

TEST_P(SoftmaxTest, TemperatureDividesTheLogits) {
  SPECD_USE_BACKEND(GetParam());
  const int64_t rows = 2, cols = 300;
  const auto x = random_vector(rows * cols, 11, -8, 8);
  for (float t : {0.25f, 0.7f, 3.0f}) {
    std::vector<float> scaled(x), got(rows * cols), want(rows * cols);
    for (float& v : scaled) v /= t;
    const Mirror<float> dx(GetParam().device, x), dout(GetParam().device, got);
    softmax(GetParam().device, dx.get(), dout.get(), rows, cols, t);
    got = dout.read();
    reference::softmax(scaled.data(), want.data(), rows, cols);
    EXPECT_LT(max_rel_error(got, want), 1e-5) << "temperature " << t;
  }
  const Mirror<float> row(GetParam().device, {1.0f, 2.0f});
  EXPECT_THROW(softmax(GetParam().device, row.get(), row.get(), 1, 2, 0.0f), Error);
}

TEST_P(SoftmaxTest, LogSoftmaxIsLogOfSoftmax) {
  SPECD_USE_BACKEND(GetParam());
  const int64_t rows = 3, cols = 50;
  const auto x = random_vector(rows * cols, 10, -5, 5);
  std::vector<float> p(rows * cols), lp(rows * cols);
  reference::softmax(x.data(), p.data(), rows, cols);
  const Mirror<float> dx(GetParam().device, x), dlp(GetParam().device, lp);
  log_softmax(GetParam().device, dx.get(), dlp.get(), rows, cols);
  lp = dlp.read();
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(lp[i], std::log(p[i]), 1e-5);
}

// The vectorized exp of each ISA level, element by element over its whole range: relative
// error below 1e-6 against double precision, exact zeros where exp underflows.
TEST_P(SoftmaxTest, ElementsAreAccurateOverTheExponentRange) {
  SPECD_USE_BACKEND(GetParam());
  std::vector<float> x;
  for (float v = -100.0f; v <= 0.0f; v += 0.01953125f) x.push_back(v);
  x.push_back(0.0f);
  x.push_back(-std::numeric_limits<float>::infinity());
  const int64_t n = static_cast<int64_t>(x.size());
  const Mirror<float> dx(GetParam().device, x), dout(GetParam().device, std::vector<float>(x.size()));
  softmax(GetParam().device, dx.get(), dout.get(), 1, n);  // max is 0: got[i] = exp(x[i]) / sum
  const std::vector<float> got = dout.read();
  double sum = 0;
  for (float v : x) sum += std::exp(static_cast<double>(v));
  for (int64_t i = 0; i < n; ++i) {
    const double want = std::exp(static_cast<double>(x[static_cast<size_t>(i)])) / sum;
    if (want < 1e-36) {  // exp underflows (zero on the vector levels) or the result is subnormal
      EXPECT_LE(got[static_cast<size_t>(i)], 1e-36) << "x=" << x[static_cast<size_t>(i)];
    } else {
      ASSERT_NEAR(got[static_cast<size_t>(i)], want, 1e-6 * want) << "x=" << x[static_cast<size_t>(i)];
    }
  }
  EXPECT_EQ(got.back(), 0.0f);
}

INSTANTIATE_TEST_SUITE_P(All, SoftmaxTest, ::testing::ValuesIn(testing::all_backends()),
                         [](const ::testing::TestParamInfo<Backend>& i) { return testing::backend_name(i.param); });

}  // namespace
}  // namespace specd::kernels

#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include "specd/kernels/rmsnorm.hpp"

namespace specd::kernels {
namespace {
using testing::max_rel_error;
using testing::Mirror;
using testing::random_vector;

class RmsNormTest : public ::testing::TestWithParam<Backend> {};

TEST_P(RmsNormTest, MatchesReference) {
  SPECD_USE_BACKEND(GetParam());
  for (int64_t dim : {1, 7, 64, 257, 2052, 4096}) {  // 2052, 4096: CUDA's register-held rows
    const int64_t rows = 9;
    const auto x = random_vector(rows * dim, 4, -3, 3), w = random_vector(dim, 5);
    std::vector<float> got(rows * dim), want(rows * dim);
    const Device dev = GetParam().device;
    const Mirror<float> dx(dev, x), dw(dev, w), dout(dev, got);
    rmsnorm(dev, dx.get(), dw.get(), dout.get(), rows, dim, 1e-5f);
    got = dout.read();
    reference::rmsnorm(x.data(), w.data(), want.data(), rows, dim, 1e-5f);
    EXPECT_LT(max_rel_error(got, want), 1e-6) << "dim " << dim;
  }
}

TEST_P(RmsNormTest, KnownValue) {
  SPECD_USE_BACKEND(GetParam());
  const std::vector<float> x = {3, 4}, w = {1, 2};
  const Device dev = GetParam().device;
  const Mirror<float> dx(dev, x), dw(dev, w), dout(dev, std::vector<float>(2));
  rmsnorm(dev, dx.get(), dw.get(), dout.get(), 1, 2, 0.0f);
  const std::vector<float> out = dout.read();
  const float inv = 1.0f / std::sqrt(12.5f);
  EXPECT_FLOAT_EQ(out[0], 3 * inv);
  EXPECT_FLOAT_EQ(out[1], 8 * inv);
}

TEST_P(RmsNormTest, FusedResidualAddsThenNormalizes) {
  SPECD_USE_BACKEND(GetParam());
  for (int64_t dim : {96, 2048, 2052}) {
    const int64_t rows = 5;
    const auto x = random_vector(rows * dim, 6), w = random_vector(dim, 7);
    auto residual = random_vector(rows * dim, 8);
    std::vector<float> sum(rows * dim), want(rows * dim), got(rows * dim);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] = residual[i] + x[i];
    reference::rmsnorm(sum.data(), w.data(), want.data(), rows, dim, 1e-6f);
    const Device dev = GetParam().device;
    const Mirror<float> dx(dev, x), dres(dev, residual), dw(dev, w), dout(dev, got);
    rmsnorm_residual(dev, dx.get(), dres.get(), dw.get(), dout.get(), rows, dim, 1e-6f);
    residual = dres.read();
    got = dout.read();
    EXPECT_EQ(residual, sum) << "dim " << dim;
    EXPECT_LT(max_rel_error(got, want), 1e-6) << "dim " << dim;
  }
}

INSTANTIATE_TEST_SUITE_P(All, RmsNormTest, ::testing::ValuesIn(testing::all_backends()),
                         [](const ::testing::TestParamInfo<Backend>& i) { return testing::backend_name(i.param); });

}  // namespace
}  // namespace specd::kernels

#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include "specd/kernels/rmsnorm.hpp"

namespace specd::kernels {
namespace {
using testing::max_rel_error;
using testing::random_vector;

class RmsNormTest : public ::testing::TestWithParam<Backend> {};

TEST_P(RmsNormTest, MatchesReference) {
  SPECD_USE_BACKEND(GetParam());
  for (int64_t dim : {1, 7, 64, 257, 4096}) {
    const int64_t rows = 9;
    const auto x = random_vector(rows * dim, 4, -3, 3), w = random_vector(dim, 5);
    std::vector<float> got(rows * dim), want(rows * dim);
    rmsnorm(GetParam().device, x.data(), w.data(), got.data(), rows, dim, 1e-5f);
    reference::rmsnorm(x.data(), w.data(), want.data(), rows, dim, 1e-5f);
    EXPECT_LT(max_rel_error(got, want), 1e-6) << "dim " << dim;
  }
}

TEST_P(RmsNormTest, KnownValue) {
  SPECD_USE_BACKEND(GetParam());
  const std::vector<float> x = {3, 4}, w = {1, 2};
  std::vector<float> out(2);
  rmsnorm(GetParam().device, x.data(), w.data(), out.data(), 1, 2, 0.0f);
  const float inv = 1.0f / std::sqrt(12.5f);
  EXPECT_FLOAT_EQ(out[0], 3 * inv);
  EXPECT_FLOAT_EQ(out[1], 8 * inv);
}

TEST_P(RmsNormTest, FusedResidualAddsThenNormalizes) {
  SPECD_USE_BACKEND(GetParam());
  const int64_t rows = 5, dim = 96;
  const auto x = random_vector(rows * dim, 6), w = random_vector(dim, 7);
  auto residual = random_vector(rows * dim, 8);
  std::vector<float> sum(rows * dim), want(rows * dim), got(rows * dim);
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = residual[i] + x[i];
  reference::rmsnorm(sum.data(), w.data(), want.data(), rows, dim, 1e-6f);
  rmsnorm_residual(GetParam().device, x.data(), residual.data(), w.data(), got.data(), rows, dim, 1e-6f);
  EXPECT_EQ(residual, sum);
  EXPECT_LT(max_rel_error(got, want), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(All, RmsNormTest, ::testing::ValuesIn(testing::all_backends()),
                         [](const ::testing::TestParamInfo<Backend>& i) { return testing::backend_name(i.param); });

}  // namespace
}  // namespace specd::kernels

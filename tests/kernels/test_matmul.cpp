#include <gtest/gtest.h>

#include <tuple>

#include "kernel_test_util.hpp"
#include "specd/kernels/matmul.hpp"

namespace specd::kernels {
namespace {
using testing::max_rel_error;
using testing::random_vector;

class MatmulTest : public ::testing::TestWithParam<Device> {};

TEST_P(MatmulTest, MatchesReferenceWithAndWithoutBias) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  // m == 1 takes the GEMV path, the others the GEMM path.
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 37, 64}, {1, 512, 300},
                         {3, 5, 7}, {17, 96, 128}, {64, 130, 33}}) {
    const auto a = random_vector(m * k, 11), w = random_vector(n * k, 12), b = random_vector(n, 13);
    for (const float* bias : {static_cast<const float*>(nullptr), b.data()}) {
      std::vector<float> got(m * n, -7.0f), want(m * n);
      matmul(GetParam(), a.data(), w.data(), bias, got.data(), m, n, k);
      reference::matmul(a.data(), w.data(), bias, want.data(), m, n, k);
      EXPECT_LT(max_rel_error(got, want), 1e-5)
          << "m=" << m << " n=" << n << " k=" << k << " bias=" << (bias != nullptr);
    }
  }
}

TEST_P(MatmulTest, KnownProduct) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const std::vector<float> a = {1, 2, 3, 4};        // [2, 2]
  const std::vector<float> w = {1, 0, 0, 1, 1, 1};  // [3, 2]
  const std::vector<float> bias = {10, 20, 30};
  std::vector<float> c(6);
  matmul(GetParam(), a.data(), w.data(), bias.data(), c.data(), 2, 3, 2);
  EXPECT_EQ(c, (std::vector<float>{11, 22, 33, 13, 24, 37}));
}

INSTANTIATE_TEST_SUITE_P(Devices, MatmulTest, ::testing::ValuesIn(testing::all_devices()),
                         testing::device_param_name);

}  // namespace
}  // namespace specd::kernels

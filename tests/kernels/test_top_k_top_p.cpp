#include <gtest/gtest.h>

#include <vector>

#include "kernel_test_util.hpp"
#include "specd/error.hpp"
#include "specd/kernels/top_k_top_p.hpp"

namespace specd::kernels {
namespace {

class TopKTopPTest : public ::testing::TestWithParam<Device> {};

TEST_P(TopKTopPTest, TopKKeepsTheLargestWithTiesToTheLowerIndex) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  SPECD_SKIP_WITHOUT_CUDA_OP(GetParam(), "top_k_top_p");
  std::vector<float> p = {0.1f, 0.3f, 0.2f,  0.3f,  0.1f,  // row 0
                          0.5f, 0.0f, 0.25f, 0.25f, 0.0f};
  top_k_top_p(GetParam(), p.data(), 2, 5, 2, 1.0f);
  EXPECT_EQ(p, (std::vector<float>{0.0f, 0.3f, 0.0f, 0.3f, 0.0f, 0.5f, 0.0f, 0.25f, 0.0f, 0.0f}));
}

TEST_P(TopKTopPTest, TopPKeepsTheSmallestPrefixReachingTheMass) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  SPECD_SKIP_WITHOUT_CUDA_OP(GetParam(), "top_k_top_p");
  // Ranked 0.4, 0.3, 0.2, 0.1: 0.4 < 0.6 keeps the second; 0.7 >= 0.6 drops the rest.
  std::vector<float> p = {0.1f, 0.4f, 0.2f, 0.3f};
  top_k_top_p(GetParam(), p.data(), 1, 4, 0, 0.6f);
  EXPECT_EQ(p, (std::vector<float>{0.0f, 0.4f, 0.0f, 0.3f}));
  // The most likely entry always stays, even when it alone exceeds top_p.
  std::vector<float> q = {0.9f, 0.1f};
  top_k_top_p(GetParam(), q.data(), 1, 2, 0, 0.05f);
  EXPECT_EQ(q, (std::vector<float>{0.9f, 0.0f}));
}

TEST_P(TopKTopPTest, TopPIsRelativeToWhatTopKKept) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  SPECD_SKIP_WITHOUT_CUDA_OP(GetParam(), "top_k_top_p");
  // top-k 3 keeps 0.4, 0.3, 0.2 (mass 0.9); top-p 0.5 of 0.9 = 0.45: 0.4 < 0.45 keeps 0.3.
  std::vector<float> p = {0.4f, 0.3f, 0.2f, 0.1f};
  top_k_top_p(GetParam(), p.data(), 1, 4, 3, 0.5f);
  EXPECT_EQ(p, (std::vector<float>{0.4f, 0.3f, 0.0f, 0.0f}));
}

TEST_P(TopKTopPTest, DisabledFiltersChangeNothingAndBadTopPIsRefused) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  SPECD_SKIP_WITHOUT_CUDA_OP(GetParam(), "top_k_top_p");
  const std::vector<float> orig = {0.25f, 0.25f, 0.5f};
  std::vector<float> p = orig;
  top_k_top_p(GetParam(), p.data(), 1, 3, -1, 1.0f);
  top_k_top_p(GetParam(), p.data(), 1, 3, 3, 1.0f);
  EXPECT_EQ(p, orig);
  EXPECT_THROW(top_k_top_p(GetParam(), p.data(), 1, 3, 0, 0.0f), Error);
  EXPECT_THROW(top_k_top_p(GetParam(), p.data(), 1, 3, 0, 1.5f), Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, TopKTopPTest, ::testing::ValuesIn(testing::all_devices()),
                         testing::device_param_name);

}  // namespace
}  // namespace specd::kernels

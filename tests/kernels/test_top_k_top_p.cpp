#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernel_test_util.hpp"
#include "specd/error.hpp"
#include "specd/kernels/top_k_top_p.hpp"

namespace specd::kernels {
namespace {
using testing::Mirror;

class TopKTopPTest : public ::testing::TestWithParam<Device> {};

// top_k_top_p of rows [rows, cols] on the device, through a device copy.
std::vector<float> filtered(Device d, const std::vector<float>& p, int64_t rows, int32_t top_k, float top_p) {
  const Mirror<float> dp(d, p);
  top_k_top_p(d, dp.get(), rows, static_cast<int64_t>(p.size()) / rows, top_k, top_p);
  return dp.read();
}

// The ids ranked by value (descending), ties by lower index: the order both ops rank by.
std::vector<int32_t> ranked(const float* x, int64_t cols) {
  std::vector<int32_t> idx(static_cast<size_t>(cols));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  return idx;
}

TEST_P(TopKTopPTest, TopKKeepsTheLargestWithTiesToTheLowerIndex) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const std::vector<float> p = {0.1f, 0.3f, 0.2f,  0.3f,  0.1f,  // row 0
                                0.5f, 0.0f, 0.25f, 0.25f, 0.0f};
  EXPECT_EQ(filtered(GetParam(), p, 2, 2, 1.0f),
            (std::vector<float>{0.0f, 0.3f, 0.0f, 0.3f, 0.0f, 0.5f, 0.0f, 0.25f, 0.0f, 0.0f}));
}

TEST_P(TopKTopPTest, TopPKeepsTheSmallestPrefixReachingTheMass) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  // Ranked 0.4, 0.3, 0.2, 0.1: 0.4 < 0.6 keeps the second; 0.7 >= 0.6 drops the rest.
  EXPECT_EQ(filtered(GetParam(), {0.1f, 0.4f, 0.2f, 0.3f}, 1, 0, 0.6f), (std::vector<float>{0.0f, 0.4f, 0.0f, 0.3f}));
  // The most likely entry always stays, even when it alone exceeds top_p.
  EXPECT_EQ(filtered(GetParam(), {0.9f, 0.1f}, 1, 0, 0.05f), (std::vector<float>{0.9f, 0.0f}));
  // A row of zeros keeps its first entry only.
  EXPECT_EQ(filtered(GetParam(), {0.0f, 0.0f, 0.0f}, 1, 0, 0.5f), (std::vector<float>{0.0f, 0.0f, 0.0f}));
}

TEST_P(TopKTopPTest, TopPIsRelativeToWhatTopKKept) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  // top-k 3 keeps 0.4, 0.3, 0.2 (mass 0.9); top-p 0.5 of 0.9 = 0.45: 0.4 < 0.45 keeps 0.3.
  EXPECT_EQ(filtered(GetParam(), {0.4f, 0.3f, 0.2f, 0.1f}, 1, 3, 0.5f), (std::vector<float>{0.4f, 0.3f, 0.0f, 0.0f}));
}

TEST_P(TopKTopPTest, DisabledFiltersChangeNothingAndBadTopPIsRefused) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const std::vector<float> orig = {0.25f, 0.25f, 0.5f};
  EXPECT_EQ(filtered(GetParam(), orig, 1, -1, 1.0f), orig);
  EXPECT_EQ(filtered(GetParam(), orig, 1, 3, 1.0f), orig);
  EXPECT_THROW(filtered(GetParam(), orig, 1, 0, 0.0f), Error);
  EXPECT_THROW(filtered(GetParam(), orig, 1, 0, 1.5f), Error);
}

// Wide rows with many ties (values on a grid of 1/64): every (top_k, top_p) keeps exactly the
// entries a rank-order walk keeps (top-k first, then the mass ranked before each kept entry
// below top_p times the mass top-k kept; the first always stays).
TEST_P(TopKTopPTest, WideRowsWithTiesMatchARankOrderWalk) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const int64_t rows = 3, cols = 3000;
  std::vector<float> p = testing::random_vector(static_cast<size_t>(rows * cols), 61, 0.0f, 1.0f);
  for (float& v : p) v = std::floor(v * 64.0f) / 64.0f / 1000.0f;
  for (int32_t top_k : {0, 1, 7, 1500, 2999}) {
    for (float top_p : {1.0f, 0.9f, 0.5f, 0.01f}) {
      std::vector<float> want = p;
      for (int64_t r = 0; r < rows; ++r) {
        float* row = want.data() + r * cols;
        const std::vector<int32_t> order = ranked(row, cols);
        const auto keep_k = static_cast<size_t>(top_k > 0 && top_k < cols ? top_k : cols);
        double total = 0.0;
        for (size_t i = 0; i < keep_k; ++i) total += row[order[i]];
        double before = 0.0;
        for (size_t i = 0; i < order.size(); ++i) {
          const bool keep = i < keep_k && (i == 0 || top_p >= 1.0f || before < static_cast<double>(top_p) * total);
          if (keep) before += row[order[i]];
          if (!keep) row[order[i]] = 0.0f;
        }
      }
      EXPECT_EQ(filtered(GetParam(), p, rows, top_k, top_p), want) << "top_k " << top_k << " top_p " << top_p;
    }
  }
}

// top_k_indices: the k best ids, best first, ties by lower index, negative values included.
TEST_P(TopKTopPTest, TopKIndicesRankLikeTheFilter) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  std::vector<float> x = testing::random_vector(2000, 62, -30.0f, 5.0f);
  for (float& v : x) v = std::round(v * 4.0f) / 4.0f;  // ties
  x[10] = -0.0f;                                       // -0 ties +0: the lower index first
  x[11] = 0.0f;
  const Mirror<float> dx(GetParam(), x);
  const std::vector<int32_t> order = ranked(x.data(), static_cast<int64_t>(x.size()));
  for (int32_t k : {1, 5, 64, 2000}) {
    const Mirror<int32_t> out(GetParam(), std::vector<int32_t>(static_cast<size_t>(k)));
    top_k_indices(GetParam(), dx.get(), static_cast<int64_t>(x.size()), k, out.get());
    EXPECT_EQ(out.read(), std::vector<int32_t>(order.begin(), order.begin() + k)) << "k " << k;
  }
  EXPECT_THROW(top_k_indices(GetParam(), dx.get(), 2000, 0, nullptr), Error);
}

INSTANTIATE_TEST_SUITE_P(Devices, TopKTopPTest, ::testing::ValuesIn(testing::all_devices()),
                         testing::device_param_name);

}  // namespace
}  // namespace specd::kernels

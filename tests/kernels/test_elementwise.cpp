// embedding gather, argmax.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernel_test_util.hpp"
#include "specd/error.hpp"
#include "specd/kernels/argmax.hpp"
#include "specd/kernels/convert.hpp"
#include "specd/kernels/embedding.hpp"

namespace specd::kernels {
namespace {
using testing::Mirror;
using testing::random_vector;

class EmbeddingTest : public ::testing::TestWithParam<Device> {};

TEST_P(EmbeddingTest, GathersRows) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const int64_t vocab = 11, dim = 7;
  const auto table = random_vector(vocab * dim, 1);
  const std::vector<int32_t> ids = {3, 0, 10, 3};
  const Mirror<float> dtable(GetParam(), table), dout(GetParam(), std::vector<float>(ids.size() * dim));
  const Mirror<int32_t> dids(GetParam(), ids);
  embedding(GetParam(), {DType::kF32, dtable.get(), vocab, dim}, dids.get(), 4, dout.get());
  const std::vector<float> out = dout.read();
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t j = 0; j < dim; ++j) EXPECT_EQ(out[i * dim + j], table[ids[i] * dim + j]);
  }
}

TEST_P(EmbeddingTest, WidensQuantizedRows) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const int64_t vocab = 5, dim = 256;  // whole K-quant super-blocks
  const auto f = random_vector(vocab * dim, 4);
  const std::vector<int32_t> ids = {4, 1};
  const Mirror<int32_t> dids(GetParam(), ids);
  for (DType dt : {DType::kBF16, DType::kF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ6_K, DType::kQ3_K,
                   DType::kQ2_K}) {
    std::vector<uint8_t> table(row_bytes(dt, dim) * vocab);
    from_f32(Device::kCpu, f.data(), dt, table.data(), vocab * dim);
    std::vector<float> all(static_cast<size_t>(vocab * dim));
    to_f32(Device::kCpu, dt, table.data(), all.data(), vocab * dim);
    const Mirror<uint8_t> dtable(GetParam(), table);
    const Mirror<float> dout(GetParam(), std::vector<float>(ids.size() * dim));
    embedding(GetParam(), {dt, dtable.get(), vocab, dim}, dids.get(), 2, dout.get());
    const std::vector<float> out = dout.read();
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t j = 0; j < dim; ++j) EXPECT_EQ(out[i * dim + j], all[ids[i] * dim + j]) << dtype_name(dt);
  }
}

TEST_P(EmbeddingTest, RejectsOutOfRangeId) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const auto table = random_vector(4 * 2, 1);
  const Mirror<float> dtable(GetParam(), table), dout(GetParam(), std::vector<float>(4));
  const Mirror<int32_t> dids(GetParam(), {1, 4});
  try {
    embedding(GetParam(), {DType::kF32, dtable.get(), 4, 2}, dids.get(), 2, dout.get());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 4"), std::string::npos) << e.what();
  }
}

class ArgmaxTest : public ::testing::TestWithParam<Device> {};

TEST_P(ArgmaxTest, FirstMaximumWinsAndNanIsIgnored) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {1,   5,  5,  2,   //
                                nan, -1, -3, -1,  //
                                -2,  -2, -2, 9};
  const Mirror<float> dx(GetParam(), x);
  const Mirror<int32_t> dout(GetParam(), std::vector<int32_t>(3));
  argmax(GetParam(), dx.get(), 3, 4, dout.get());
  EXPECT_EQ(dout.read(), (std::vector<int32_t>{1, 1, 3}));
}

// -inf is a value like any other (the first non-NaN entry of a row of -inf wins) and -0 ties
// with +0 (the first wins), wherever the maximum sits in a row longer than one vector.
TEST_P(ArgmaxTest, InfinitiesAndSignedZerosTieToTheFirst) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const int64_t cols = 37;
  std::vector<float> x(3 * cols, -inf);
  x[0] = nan;  // row 0: NaN, then -inf only
  for (int64_t i = 0; i < cols; ++i) x[cols + i] = -1.0f - static_cast<float>(i);
  x[cols + 20] = -0.0f;  // row 1: -0 before +0
  x[cols + 33] = 0.0f;
  for (int64_t i = 0; i < cols; ++i) x[2 * cols + i] = static_cast<float>(i % 7);
  x[2 * cols + 35] = inf;  // row 2: +inf in the tail after the last full vector
  const Mirror<float> dx(GetParam(), x);
  const Mirror<int32_t> dout(GetParam(), std::vector<int32_t>(3));
  argmax(GetParam(), dx.get(), 3, cols, dout.get());
  EXPECT_EQ(dout.read(), (std::vector<int32_t>{1, 20, 35}));
}

// Rows wider than a CUDA block: the first maximum wins across threads; a row of NaN gives 0.
TEST_P(ArgmaxTest, WideRowsTakeTheFirstMaximum) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const int64_t cols = 5000;
  auto x = random_vector(3 * cols, 12, -1, 1);
  x[1000] = x[3001] = 7.0f;  // row 0: tie, the first wins
  x[cols + 4999] = 9.0f;     // row 1: the last column
  for (int64_t i = 0; i < cols; ++i) x[2 * cols + i] = std::numeric_limits<float>::quiet_NaN();
  const Mirror<float> dx(GetParam(), x);
  const Mirror<int32_t> dout(GetParam(), std::vector<int32_t>(3));
  argmax(GetParam(), dx.get(), 3, cols, dout.get());
  EXPECT_EQ(dout.read(), (std::vector<int32_t>{1000, 4999, 0}));
}

INSTANTIATE_TEST_SUITE_P(Devices, EmbeddingTest, ::testing::ValuesIn(testing::all_devices()),
                         testing::device_param_name);
INSTANTIATE_TEST_SUITE_P(Devices, ArgmaxTest, ::testing::ValuesIn(testing::all_devices()), testing::device_param_name);

}  // namespace
}  // namespace specd::kernels

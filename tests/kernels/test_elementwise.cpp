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
using testing::random_vector;

class EmbeddingTest : public ::testing::TestWithParam<Device> {};

TEST_P(EmbeddingTest, GathersRows) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const int64_t vocab = 11, dim = 7;
  const auto table = random_vector(vocab * dim, 1);
  const std::vector<int32_t> ids = {3, 0, 10, 3};
  std::vector<float> out(ids.size() * dim);
  embedding(GetParam(), {DType::kF32, table.data(), vocab, dim}, ids.data(), 4, out.data());
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t j = 0; j < dim; ++j) EXPECT_EQ(out[i * dim + j], table[ids[i] * dim + j]);
  }
}

TEST_P(EmbeddingTest, WidensQuantizedRows) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const int64_t vocab = 5, dim = 64;
  const auto f = random_vector(vocab * dim, 4);
  for (DType dt : {DType::kBF16, DType::kQ4_0}) {
    std::vector<uint8_t> table(row_bytes(dt, dim) * vocab);
    from_f32(Device::kCpu, f.data(), dt, table.data(), vocab * dim);
    std::vector<float> all(static_cast<size_t>(vocab * dim));
    to_f32(Device::kCpu, dt, table.data(), all.data(), vocab * dim);
    const std::vector<int32_t> ids = {4, 1};
    std::vector<float> out(ids.size() * dim);
    embedding(GetParam(), {dt, table.data(), vocab, dim}, ids.data(), 2, out.data());
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t j = 0; j < dim; ++j) EXPECT_EQ(out[i * dim + j], all[ids[i] * dim + j]) << dtype_name(dt);
  }
}

TEST_P(EmbeddingTest, RejectsOutOfRangeId) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const auto table = random_vector(4 * 2, 1);
  const std::vector<int32_t> ids = {1, 4};
  std::vector<float> out(4);
  try {
    embedding(GetParam(), {DType::kF32, table.data(), 4, 2}, ids.data(), 2, out.data());
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
  std::vector<int32_t> out(3);
  argmax(GetParam(), x.data(), 3, 4, out.data());
  EXPECT_EQ(out, (std::vector<int32_t>{1, 1, 3}));
}

INSTANTIATE_TEST_SUITE_P(Devices, EmbeddingTest, ::testing::ValuesIn(testing::all_devices()),
                         testing::device_param_name);
INSTANTIATE_TEST_SUITE_P(Devices, ArgmaxTest, ::testing::ValuesIn(testing::all_devices()), testing::device_param_name);

}  // namespace
}  // namespace specd::kernels

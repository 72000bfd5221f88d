// matmul / matmul_multi / matmul_swiglu on every backend (CPU ISA level, CUDA) x weight dtype
// against the double-precision reference over the exactly widened weights.
//
// Tolerances (max |got - want| / max |want|), by what the dtype's GEMV path rounds:
//   f32, f16: nothing (F32 activations, weights widened exactly)       1e-5
//   bf16:     activations rounded to bf16 (relative 2^-9 per element)  1e-2
//   q8_0, q4_0: activations quantized to Q8 per block of 32            2e-2
//   q4_k ... q2_k: activations quantized to Q8 per block of 256    3e-2
#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <optional>
#include <tuple>
#include <vector>

#include "kernel_test_util.hpp"
#include "specd/error.hpp"
#include "specd/kernels/convert.hpp"
#include "specd/kernels/matmul.hpp"

namespace specd::kernels {
namespace {
using testing::max_rel_error;
using testing::random_vector;

double gemv_tolerance(DType d) {
  switch (d) {
    case DType::kF32:
    case DType::kF16:
      return 1e-5;
    case DType::kBF16:
      return 1e-2;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ3_K:
    case DType::kQ2_K:
      return 3e-2;
    default:
      return 2e-2;
  }
}

// Random weights [n, k] stored as `dtype`.
struct Weights {
  std::vector<uint8_t> bytes;
  WeightView view;
  Weights(DType dtype, int64_t n, int64_t k, uint32_t seed) {
    const auto f = random_vector(static_cast<size_t>(n * k), seed);
    bytes.resize(row_bytes(dtype, k) * static_cast<size_t>(n));
    from_f32(Device::kCpu, f.data(), dtype, bytes.data(), n * k);
    view = {dtype, bytes.data(), n, k};
  }
};

// The weights where `device`'s ops read them.
struct DeviceWeights {
  testing::Mirror<uint8_t> bytes;
  WeightView view;
  DeviceWeights(Device d, const Weights& w)
      : bytes(d, w.bytes), view{w.view.dtype, bytes.get(), w.view.rows, w.view.cols} {}
};

// matmul of the m rows of `a` on `device`, through device copies; the output starts at -7.
std::vector<float> run_matmul(Device d, const std::vector<float>& a, const Weights& w, const float* bias, int64_t m) {
  const DeviceWeights dw(d, w);
  const testing::Mirror<float> da(d, a), dc(d, std::vector<float>(static_cast<size_t>(m * w.view.rows), -7.0f));
  std::optional<testing::Mirror<float>> db;
  if (bias != nullptr) db.emplace(d, std::vector<float>(bias, bias + w.view.rows));
  matmul(d, da.get(), dw.view, db ? db->get() : nullptr, dc.get(), m);
  return dc.read();
}

using Param = std::tuple<Backend, DType>;

class MatmulTest : public ::testing::TestWithParam<Param> {
 protected:
  Backend backend() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
  bool quantized() const { return is_quantized(dtype()); }
  // Row lengths a test may use: K-quant rows hold whole blocks of 256.
  int64_t cols(int64_t k) const { return is_k_quant(dtype()) ? (k + 255) / 256 * 256 : k; }
};

TEST_P(MatmulTest, MatchesReferenceFromOneRowToPrefillSizes) {
  SPECD_USE_BACKEND(backend());
  std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {{1, 37, 64},   {1, 130, 96},  {2, 5, 32},  {5, 64, 256},
                                                               {16, 21, 128}, {17, 96, 128}, {40, 70, 64}};
  if (!quantized()) shapes.insert(shapes.end(), {{1, 33, 7}, {3, 5, 300}, {20, 9, 33}});
  // AVX-512 Q8_0 / Q4_0 take 16 blocks at a time: whole groups and a partial one, one row and
  // a few (unpacked per tile) and more than 8 (unpacked once into a panel).
  if (quantized()) shapes.insert(shapes.end(), {{1, 19, 544}, {5, 40, 1056}, {9, 17, 2048}, {12, 9, 1056}});
  for (auto [m, n, k0] : shapes) {
    const int64_t k = cols(k0);
    const Weights w(dtype(), n, k, 12);
    const auto a = random_vector(static_cast<size_t>(m * k), 11), b = random_vector(static_cast<size_t>(n), 13);
    for (const float* bias : {static_cast<const float*>(nullptr), b.data()}) {
      std::vector<float> want(static_cast<size_t>(m * n));
      const std::vector<float> got = run_matmul(backend().device, a, w, bias, m);
      reference::matmul(a.data(), w.view, bias, want.data(), m);
      const double tol = gemv_tolerance(dtype());
      EXPECT_LT(max_rel_error(got, want), tol)
          << "m=" << m << " n=" << n << " k=" << k << " bias=" << (bias != nullptr);
    }
  }
}

// Speculative scoring of k+1 positions must give the same logits as k+1 single-token steps:
// a row's result is bit-identical whatever the other rows of the call (any number of rows,
// prefill-sized calls included).
// Speculative greedy output equals plain output only if a row's result is bit-identical
// whatever else is in the batch: single-row tiles, multi-row tiles, feature pairs, prefill's
// tiles of four features and the pair and odd feature after them (n = 39), with and without a
// k tail. n = 40 too: CUDA gives a warp two features of an even-sized output when the call has
// several rows, one when it has one.
TEST_P(MatmulTest, RowResultsDoNotDependOnTheBatch) {
  SPECD_USE_BACKEND(backend());
  const int64_t rows = 300;                  // two row chunks
  std::vector<int64_t> ks = {192, 224};      // 224: a 32-element tail
  if (!quantized()) ks.push_back(200);       // 200: a partial vector
  if (quantized()) ks.push_back(1056);       // two groups of 16 blocks and one block
  if (is_k_quant(dtype())) ks = {256, 768};  // one and three blocks
  for (int64_t k : ks) {
    const int64_t n = k == ks.front() ? 40 : 39;  // 39: tasks of 16, 16 and 7 features
    const Weights w(dtype(), n, k, 21);
    const auto a = random_vector(static_cast<size_t>(rows * k), 22);
    const std::vector<float> all = run_matmul(backend().device, a, w, nullptr, rows);
    for (int64_t m : {1, 2, 3, 5, 6, 7, 8, 12, 13, 16, 40}) {
      for (int64_t r0 = 0; r0 + m <= rows; r0 += 7) {
        const std::vector<float> rows_part(a.begin() + r0 * k, a.begin() + (r0 + m) * k);
        const std::vector<float> part = run_matmul(backend().device, rows_part, w, nullptr, m);
        for (int64_t i = 0; i < m * n; ++i)
          ASSERT_EQ(part[static_cast<size_t>(i)], all[static_cast<size_t>(r0 * n + i)])
              << "k=" << k << " m=" << m << " r0=" << r0;
      }
    }
  }
}

TEST_P(MatmulTest, MultiEqualsSeparateCalls) {
  SPECD_USE_BACKEND(backend());
  const int64_t k = cols(64);
  const Weights q(dtype(), 48, k, 31), kk(dtype(), 16, k, 32), v(dtype(), 16, k, 33);
  const auto bias = random_vector(48, 34);
  for (int64_t m : {1, 4, 20}) {
    const auto a = random_vector(static_cast<size_t>(m * k), 35);
    const Device dev = backend().device;
    const DeviceWeights dq(dev, q), dk(dev, kk), dv(dev, v);
    const testing::Mirror<float> da(dev, a), dbias(dev, bias), c0(dev, std::vector<float>(m * 48)),
        c1(dev, std::vector<float>(m * 16)), c2(dev, std::vector<float>(m * 16));
    const MatmulOutput outs[] = {
        {dq.view, dbias.get(), c0.get()}, {dk.view, nullptr, c1.get()}, {dv.view, nullptr, c2.get()}};
    matmul_multi(dev, da.get(), m, k, outs);
    EXPECT_EQ(c0.read(), run_matmul(dev, a, q, bias.data(), m)) << "m=" << m;
    EXPECT_EQ(c1.read(), run_matmul(dev, a, kk, nullptr, m)) << "m=" << m;
    EXPECT_EQ(c2.read(), run_matmul(dev, a, v, nullptr, m)) << "m=" << m;
  }
}

TEST_P(MatmulTest, SwigluMatchesReference) {
  SPECD_USE_BACKEND(backend());
  const int64_t n = 45, k = cols(96);
  const Weights gate(dtype(), n, k, 41), up(dtype(), n, k, 42);
  for (int64_t m : {1, 5, 19}) {
    const auto a = random_vector(static_cast<size_t>(m * k), 43);
    const Device dev = backend().device;
    const DeviceWeights dgate(dev, gate), dup(dev, up);
    const testing::Mirror<float> da(dev, a), dout(dev, std::vector<float>(static_cast<size_t>(m * n)));
    matmul_swiglu(dev, da.get(), dgate.view, dup.view, dout.get(), m);
    const std::vector<float> got = dout.read();
    std::vector<float> g(got.size()), u(got.size()), want(got.size());
    reference::matmul(a.data(), gate.view, nullptr, g.data(), m);
    reference::matmul(a.data(), up.view, nullptr, u.data(), m);
    for (size_t i = 0; i < want.size(); ++i) want[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    EXPECT_LT(max_rel_error(got, want), 2 * gemv_tolerance(dtype())) << "m=" << m;
    // Each row alone gives its row of the batch, bit for bit (greedy speculative equality).
    for (int64_t r = 0; r < m; r += 4) {
      const testing::Mirror<float> row(dev, std::vector<float>(a.begin() + r * k, a.begin() + (r + 1) * k)),
          one(dev, std::vector<float>(static_cast<size_t>(n)));
      matmul_swiglu(dev, row.get(), dgate.view, dup.view, one.get(), 1);
      EXPECT_EQ(one.read(), std::vector<float>(got.begin() + r * n, got.begin() + (r + 1) * n)) << "m=" << m;
    }
  }
}

// The experts of a mixture-of-experts layer in one call: each group's rows equal, bit for bit,
// what matmul / matmul_swiglu give them alone (1 row, a few, none, and one group past the
// 256-row chunk that takes the single-call path).
TEST_P(MatmulTest, GroupedEqualsSeparateCalls) {
  SPECD_USE_BACKEND(backend());
  const Device dev = backend().device;
  const int64_t k = cols(64), n = 40;
  const Weights g0(dtype(), n, k, 51), u0(dtype(), n, k, 52), g1(dtype(), n, k, 53), u1(dtype(), n, k, 54),
      d(dtype(), 24, k, 55);
  const DeviceWeights dg0(dev, g0), du0(dev, u0), dg1(dev, g1), du1(dev, u1), dd(dev, d);
  const std::vector<int64_t> rows = {1, 5, 0, 300};
  std::vector<testing::Mirror<float>> a, got, want;
  std::vector<GroupedMatmul> groups;
  for (size_t i = 0; i < rows.size(); ++i) {
    const size_t m = static_cast<size_t>(std::max<int64_t>(rows[i], 1));
    a.emplace_back(dev, random_vector(m * static_cast<size_t>(k), 56 + static_cast<uint32_t>(i)));
    const int64_t out_cols = i == 2 ? dd.view.rows : n;
    got.emplace_back(dev, std::vector<float>(m * static_cast<size_t>(out_cols), -1.0f));
    want.emplace_back(dev, std::vector<float>(m * static_cast<size_t>(out_cols), -1.0f));
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const WeightView& w = i == 2 ? dd.view : i % 2 == 0 ? dg0.view : dg1.view;
    const WeightView up = i == 2 ? WeightView{} : i % 2 == 0 ? du0.view : du1.view;
    groups.push_back({a[i].get(), rows[i], w, got[i].get(), up});
  }
  const testing::Mirror<float> plain(dev, std::vector<float>(24, -1.0f)),
      plain_want(dev, std::vector<float>(24, -1.0f));
  groups.push_back({a[0].get(), 1, dd.view, plain.get()});  // a plain product among SwiGLU ones
  matmul_grouped(dev, groups);
  for (size_t i = 0; i < rows.size(); ++i) {
    if (groups[i].up.data != nullptr) {
      matmul_swiglu(dev, a[i].get(), groups[i].w, groups[i].up, want[i].get(), rows[i]);
    } else {
      matmul(dev, a[i].get(), groups[i].w, nullptr, want[i].get(), rows[i]);
    }
    EXPECT_EQ(got[i].read(), want[i].read()) << "group " << i << " of " << rows[i] << " rows";
  }
  matmul(dev, a[0].get(), dd.view, nullptr, plain_want.get(), 1);
  EXPECT_EQ(plain.read(), plain_want.read());
}

TEST_P(MatmulTest, RefusesMismatchedShapes) {
  SPECD_USE_BACKEND(backend());
  const int64_t k = cols(64);
  const Weights w(dtype(), 4, k, 51);
  const auto a = random_vector(static_cast<size_t>(k), 52);
  std::vector<float> c(4);
  const MatmulOutput out{w.view, nullptr, c.data()};
  EXPECT_THROW(matmul_multi(backend().device, a.data(), 1, 32, {&out, 1}), Error);  // k 32 vs 64 columns
  if (quantized()) {
    WeightView partial = w.view;
    partial.cols = is_k_quant(dtype()) ? 224 : 48;  // not a whole number of blocks
    EXPECT_THROW(matmul(backend().device, a.data(), partial, nullptr, c.data(), 1), Error);
  }
}

INSTANTIATE_TEST_SUITE_P(All, MatmulTest,
                         ::testing::Combine(::testing::ValuesIn(testing::all_backends()),
                                            ::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0,
                                                              DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,
                                                              DType::kQ3_K, DType::kQ2_K)),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           std::string name = testing::backend_name(std::get<0>(info.param));
                           name += '_';
                           name += dtype_name(std::get<1>(info.param));
                           return name;
                         });

// silu_mul on every level: within 1e-6 relative of silu in double precision (the vector exp's
// 2e-7 plus the division), with no overflow at large |x| and elementwise (n = 37: a tail).
class SiluMulTest : public ::testing::TestWithParam<Backend> {};

TEST_P(SiluMulTest, MatchesSiluTimesUp) {
  SPECD_USE_BACKEND(GetParam());
  auto g = random_vector(37 * 9, 71, -20.0f, 20.0f);
  const auto u = random_vector(g.size(), 72);
  const float extremes[] = {0.0f, -0.0f, 88.0f, -88.0f, 1e4f, -1e4f, 1e-30f, -1e-30f};
  for (size_t i = 0; i < std::size(extremes); ++i) g[i] = extremes[i];
  std::vector<double> want(g.size());
  for (size_t i = 0; i < g.size(); ++i) want[i] = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
  for (int64_t n : {static_cast<int64_t>(g.size()), int64_t{37}}) {
    const testing::Mirror<float> dg(GetParam().device, g), du(GetParam().device, u);
    silu_mul(GetParam().device, dg.get(), du.get(), n);
    const std::vector<float> got = dg.read();
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(got[i], want[i], 1e-6 * std::fabs(want[i]) + 1e-37) << "x=" << g[i] << " n=" << n;
  }
}

// gelu_tanh_mul (Gemma's GeGLU): within 1e-6 relative of the tanh form in double precision.
TEST_P(SiluMulTest, GeluTanhMatchesTheTanhFormTimesUp) {
  SPECD_USE_BACKEND(GetParam());
  const auto g = random_vector(1000, 73, -12.0f, 12.0f), u = random_vector(g.size(), 74);
  const testing::Mirror<float> dg(GetParam().device, g), du(GetParam().device, u);
  gelu_tanh_mul(GetParam().device, dg.get(), du.get(), static_cast<int64_t>(g.size()));
  const std::vector<float> got = dg.read();
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = g[i];
    const double want = 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))) * u[i];
    EXPECT_NEAR(got[i], want, 1e-6 * std::fabs(want) + 1e-7) << "x=" << x;
  }
}

INSTANTIATE_TEST_SUITE_P(All, SiluMulTest, ::testing::ValuesIn(testing::all_backends()),
                         [](const ::testing::TestParamInfo<Backend>& i) { return testing::backend_name(i.param); });

TEST(MatmulKnown, SmallProduct) {
  const std::vector<float> a = {1, 2, 3, 4};        // [2, 2]
  const std::vector<float> w = {1, 0, 0, 1, 1, 1};  // [3, 2]
  const std::vector<float> bias = {10, 20, 30};
  std::vector<float> c(6);
  matmul(Device::kCpu, a.data(), {DType::kF32, w.data(), 3, 2}, bias.data(), c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{11, 22, 33, 13, 24, 37}));
}

}  // namespace
}  // namespace specd::kernels

// The dequantizers of the GGUF block types, on blocks built here from the layout description
// with known values: the types converted at load (core/src/model/gguf_quants.hpp) with the
// error the conversion to Q8_0 adds, and the K-quants the kernels compute on in place
// (kernels::to_f32).
#include "model/gguf_quants.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "model/gguf.hpp"
#include "specd/kernels/convert.hpp"
#include "specd/kernels/dtype.hpp"

namespace specd::gguf::test {
namespace {

namespace mg = model::gguf;
using kernels::f32_to_f16;

template <typename T>
void put(std::vector<std::byte>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof(T));
}

std::vector<float> dequantized(uint32_t type, const std::vector<std::byte>& b, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n));
  if (type == mg::kTypeQ2_K || type == mg::kTypeQ3_K || type == mg::kTypeQ4_K || type == mg::kTypeQ5_K ||
      type == mg::kTypeQ6_K) {
    const kernels::DType dt = type == mg::kTypeQ2_K   ? kernels::DType::kQ2_K
                              : type == mg::kTypeQ3_K ? kernels::DType::kQ3_K
                              : type == mg::kTypeQ4_K ? kernels::DType::kQ4_K
                              : type == mg::kTypeQ5_K ? kernels::DType::kQ5_K
                                                      : kernels::DType::kQ6_K;
    kernels::to_f32(kernels::Device::kCpu, dt, b.data(), y.data(), n);
  } else {
    mg::dequantize(type, b.data(), y.data(), n);
  }
  return y;
}

// Q2_K and Q3_K rows as llama-quantize wrote them dequantize to gguf-py's values exactly
// (tests/data/gguf_quants): both are kernel dtypes, read in place.
TEST(GgufQuants, Q2_KAndQ3_KEqualGgufPysDequantization) {
  const auto dir = std::filesystem::path(SPECD_TEST_DATA_DIR) / "gguf_quants";
  auto bytes = [&](const std::string& name) {
    std::ifstream in(dir / name, std::ios::binary);
    EXPECT_TRUE(in.good()) << "missing reference file " << (dir / name);
    return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  for (const auto& [label, type] : {std::pair{"q2_k", mg::kTypeQ2_K}, std::pair{"q3_k", mg::kTypeQ3_K}}) {
    int64_t rows = 0, cols = 0;
    std::ifstream(dir / (std::string(label) + ".shape")) >> rows >> cols;
    ASSERT_GT(rows * cols, 0) << label;
    const auto blocks = bytes(std::string(label) + ".blocks");
    const auto want = bytes(std::string(label) + ".dequant.f32");
    ASSERT_EQ(blocks.size(), static_cast<size_t>(rows * cols / 256 * mg::type_info(type).bytes)) << label;
    ASSERT_EQ(want.size(), static_cast<size_t>(rows * cols) * 4) << label;
    EXPECT_FALSE(mg::is_converted_type(type)) << label;
    std::vector<std::byte> raw(blocks.size());
    std::memcpy(raw.data(), blocks.data(), blocks.size());
    const std::vector<float> got = dequantized(type, raw, rows * cols);
    for (size_t i = 0; i < got.size(); ++i) {
      float w;
      std::memcpy(&w, want.data() + 4 * i, 4);
      ASSERT_EQ(got[i], w) << label << " element " << i;
    }
  }
}

TEST(GgufQuants, Q4_1) {
  std::vector<std::byte> b(20);
  put(b, 0, f32_to_f16(0.5f));
  put(b, 2, f32_to_f16(-1.0f));
  for (int j = 0; j < 16; ++j) put<uint8_t>(b, 4 + j, static_cast<uint8_t>(j | (15 - j) << 4));
  const auto y = dequantized(mg::kTypeQ4_1, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.5f - 1.0f) << j;
    EXPECT_EQ(y[j + 16], (15 - j) * 0.5f - 1.0f) << j;
  }
  EXPECT_EQ(y[31], -1.0f);
}

TEST(GgufQuants, Q5_0AndQ5_1TakeTheFifthBitFromQh) {
  std::vector<std::byte> b(22);
  put(b, 0, f32_to_f16(0.25f));
  put<uint32_t>(b, 2, 0x0000FFFFu);  // elements 0..15 have their 5th bit, 16..31 do not
  for (int j = 0; j < 16; ++j) put<uint8_t>(b, 6 + j, static_cast<uint8_t>(j | j << 4));
  auto y = dequantized(mg::kTypeQ5_0, b, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.25f) << j;              // (j + 16 - 16) * d
    EXPECT_EQ(y[j + 16], (j - 16) * 0.25f) << j;  // (j - 16) * d
  }

  std::vector<std::byte> c(24);
  put(c, 0, f32_to_f16(1.0f));
  put(c, 2, f32_to_f16(0.5f));
  put<uint32_t>(c, 4, 0xFFFF0000u);  // only the high half has its 5th bit
  for (int j = 0; j < 16; ++j) put<uint8_t>(c, 8 + j, static_cast<uint8_t>(j | j << 4));
  y = dequantized(mg::kTypeQ5_1, c, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j + 0.5f) << j;
    EXPECT_EQ(y[j + 16], j + 16 + 0.5f) << j;
  }
}

TEST(GgufQuants, Q8_K) {
  std::vector<std::byte> b(292);
  put(b, 0, 0.125f);
  for (int j = 0; j < 256; ++j) put<int8_t>(b, 4 + j, static_cast<int8_t>(j - 128));
  const auto y = dequantized(mg::kTypeQ8_K, b, 256);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(y[j], (j - 128) * 0.125f) << j;
}

// Q4_K / Q5_K with 6-bit scales and mins; sub-blocks 4..7 need the high bits stored in the
// top two bits of scales[0..7].
struct KBlock {
  int sc[8], mn[8];
  std::vector<std::byte> bytes;
};

KBlock k_block(bool five_bit) {
  KBlock k;
  for (int s = 0; s < 8; ++s) {
    k.sc[s] = s < 4 ? s + 1 : 40 + s;
    k.mn[s] = s < 4 ? s : 50 + s;
  }
  k.bytes.assign(five_bit ? 176 : 144, std::byte{0});
  put(k.bytes, 0, f32_to_f16(1.0f));
  put(k.bytes, 2, f32_to_f16(0.5f));
  for (int s = 0; s < 4; ++s) {
    put<uint8_t>(k.bytes, 4 + s, static_cast<uint8_t>(k.sc[s] | (k.sc[s + 4] >> 4) << 6));
    put<uint8_t>(k.bytes, 8 + s, static_cast<uint8_t>(k.mn[s] | (k.mn[s + 4] >> 4) << 6));
    put<uint8_t>(k.bytes, 12 + s, static_cast<uint8_t>((k.sc[s + 4] & 15) | (k.mn[s + 4] & 15) << 4));
  }
  const size_t qs = five_bit ? 48 : 16;
  for (int pair = 0; pair < 4; ++pair)
    for (int l = 0; l < 32; ++l)
      put<uint8_t>(k.bytes, qs + 32 * pair + l, static_cast<uint8_t>((l & 15) | ((l + 3) & 15) << 4));
  if (five_bit)
    for (int l = 0; l < 32; ++l) put<uint8_t>(k.bytes, 16 + l, static_cast<uint8_t>(l % 3 == 0 ? 0xFF : 0x00));
  return k;
}

TEST(GgufQuants, Q4_KAndQ5_K) {
  for (bool five : {false, true}) {
    const KBlock k = k_block(five);
    const auto y = dequantized(five ? mg::kTypeQ5_K : mg::kTypeQ4_K, k.bytes, 256);
    for (int s = 0; s < 8; ++s) {
      for (int l = 0; l < 32; ++l) {
        int q = s % 2 == 0 ? (l & 15) : ((l + 3) & 15);
        if (five && l % 3 == 0) q += 16;
        const float want =
            1.0f * static_cast<float>(k.sc[s]) * static_cast<float>(q) - 0.5f * static_cast<float>(k.mn[s]);
        ASSERT_EQ(y[32 * s + l], want) << (five ? "Q5_K" : "Q4_K") << " sub-block " << s << " element " << l;
      }
    }
    // One value worked by hand: sub-block 5 (scale 45, min 55), element 1 (high nibble 4).
    EXPECT_EQ(y[32 * 5 + 1], 45.0f * 4 - 27.5f);
  }
}

TEST(GgufQuants, Q6_K) {
  std::vector<std::byte> b(210);
  auto q_of = [](int half, int idx) { return (idx + 7 * (idx / 32) + 13 * half) & 63; };  // idx in [0, 128)
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int q0 = q_of(half, l), q1 = q_of(half, l + 32), q2 = q_of(half, l + 64), q3 = q_of(half, l + 96);
      put<uint8_t>(b, 64 * half + l, static_cast<uint8_t>((q0 & 15) | (q2 & 15) << 4));
      put<uint8_t>(b, 64 * half + l + 32, static_cast<uint8_t>((q1 & 15) | (q3 & 15) << 4));
      put<uint8_t>(b, 128 + 32 * half + l,
                   static_cast<uint8_t>(q0 >> 4 | (q1 >> 4) << 2 | (q2 >> 4) << 4 | (q3 >> 4) << 6));
    }
  }
  for (int i = 0; i < 16; ++i) put<int8_t>(b, 192 + i, static_cast<int8_t>(i - 8));
  put(b, 208, f32_to_f16(0.5f));
  const auto y = dequantized(mg::kTypeQ6_K, b, 256);
  for (int half = 0; half < 2; ++half)
    for (int idx = 0; idx < 128; ++idx) {
      const int scale = 8 * half + (idx % 32) / 16 + 2 * (idx / 32) - 8;
      ASSERT_EQ(y[128 * half + idx], 0.5f * static_cast<float>(scale) * static_cast<float>(q_of(half, idx) - 32))
          << "half " << half << " element " << idx;
    }
  EXPECT_EQ(y[0], 0.5f * -8 * (0 - 32));  // sub-block 0: scale -8, q 0
}

// The conversion to Q8_0 (the kernels' nearest type) adds at most about half a Q8_0 step per
// block: max|block| / 254 plus the fp16 rounding of the scale.
TEST(GgufQuants, ConversionToQ8_0StaysWithinHalfAStep) {
  std::mt19937 rng(7);
  for (uint32_t type : {mg::kTypeQ2_K, mg::kTypeQ3_K, mg::kTypeQ4_K, mg::kTypeQ5_K, mg::kTypeQ6_K})
    EXPECT_FALSE(mg::is_converted_type(type));
  for (uint32_t type : {mg::kTypeQ4_1, mg::kTypeQ5_0, mg::kTypeQ5_1, mg::kTypeQ8_K}) {
    ASSERT_TRUE(mg::is_converted_type(type));
    EXPECT_EQ(mg::converted_dtype(type), kernels::DType::kQ8_0);
    const mg::TypeInfo& info = mg::type_info(type);
    const int64_t n = 4096;
    std::vector<std::byte> raw(static_cast<size_t>(n / info.block * info.bytes));
    for (auto& x : raw) x = static_cast<std::byte>(rng());
    // Scales: small positive fp16/f32 values wherever the layout keeps them.
    for (int64_t blk = 0; blk < n / info.block; ++blk) {
      std::byte* p = raw.data() + blk * info.bytes;
      const uint16_t d = f32_to_f16(0.01f), m = f32_to_f16(0.002f);
      if (type == mg::kTypeQ6_K) {
        std::memcpy(p + 208, &d, 2);
      } else if (type == mg::kTypeQ8_K) {
        const float df = 0.01f;
        std::memcpy(p, &df, 4);
      } else {
        std::memcpy(p, &d, 2);
        if (type != mg::kTypeQ5_0) std::memcpy(p + 2, &m, 2);
      }
    }
    std::vector<float> x(static_cast<size_t>(n)), back(static_cast<size_t>(n));
    mg::dequantize(type, raw.data(), x.data(), n);
    std::vector<kernels::BlockQ8_0> q(static_cast<size_t>(n / 32));
    kernels::from_f32(kernels::Device::kCpu, x.data(), kernels::DType::kQ8_0, q.data(), n);
    kernels::to_f32(kernels::Device::kCpu, kernels::DType::kQ8_0, q.data(), back.data(), n);
    double err2 = 0, x2 = 0, worst = 0;
    for (int64_t b = 0; b < n / 32; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
      for (int i = 0; i < 32; ++i) {
        const double e = std::fabs(double(back[b * 32 + i]) - x[b * 32 + i]);
        ASSERT_LE(e, 0.57 * amax / 127 + 1e-12) << mg::type_name(type) << " block " << b;
        worst = std::max(worst, amax > 0 ? e / amax : 0.0);
        err2 += e * e;
        x2 += double(x[b * 32 + i]) * x[b * 32 + i];
      }
    }
    std::printf("[ %s -> Q8_0 ] rms error %.3g of rms value, worst %.3g of the block max\n",
                mg::type_name(type).c_str(), std::sqrt(err2 / x2), worst);
  }
}

}  // namespace
}  // namespace specd::gguf::test

// K-quants against llama.cpp: tests/data/kquants holds rows of a real model quantized by
// llama-quantize (Q4_K_M / Q5_K_M files, no importance matrix) and dequantized by gguf-py
// (tools/kquant_vectors/make_vectors.py). Our quantizer must write the same blocks byte for byte
// from the same f16 source, and our dequantization must reproduce gguf-py's values exactly.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "specd/kernels/convert.hpp"

namespace specd::kernels {
namespace {

struct Vectors {
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> src_f16, blocks, dequant_f32;
};

std::vector<uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing reference file " << p;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

Vectors load(const std::string& label) {
  const auto dir = std::filesystem::path(SPECD_TEST_DATA_DIR) / "kquants";
  Vectors v;
  std::ifstream shape(dir / (label + ".shape"));
  shape >> v.rows >> v.cols;
  v.src_f16 = read_bytes(dir / (label + ".src.f16"));
  v.blocks = read_bytes(dir / (label + ".blocks"));
  v.dequant_f32 = read_bytes(dir / (label + ".dequant.f32"));
  return v;
}

struct Case {
  const char* label;
  DType dtype;
};

class KQuantReference : public ::testing::TestWithParam<Case> {};

TEST_P(KQuantReference, QuantizerWritesLlamaCppBlocks) {
  const auto [label, dt] = GetParam();
  const Vectors v = load(label);
  ASSERT_GT(v.rows, 0);
  ASSERT_EQ(v.src_f16.size(), static_cast<size_t>(v.rows * v.cols * 2));
  const int64_t rb = row_bytes(dt, v.cols);
  ASSERT_EQ(v.blocks.size(), static_cast<size_t>(v.rows * rb));
  std::vector<float> x(static_cast<size_t>(v.cols));
  std::vector<uint8_t> ours(static_cast<size_t>(rb));
  const int64_t block_bytes = rb / (v.cols / 256);
  for (int64_t r = 0; r < v.rows; ++r) {
    to_f32(Device::kCpu, DType::kF16, v.src_f16.data() + r * v.cols * 2, x.data(), v.cols);
    from_f32(Device::kCpu, x.data(), dt, ours.data(), v.cols);
    const uint8_t* ref = v.blocks.data() + r * rb;
    for (int64_t b = 0; b < rb / block_bytes; ++b) {
      EXPECT_EQ(std::memcmp(ours.data() + b * block_bytes, ref + b * block_bytes, static_cast<size_t>(block_bytes)), 0)
          << label << ": row " << r << " block " << b << " differs from llama.cpp's";
    }
  }
}

TEST_P(KQuantReference, DequantizationMatchesGgufPy) {
  const auto [label, dt] = GetParam();
  const Vectors v = load(label);
  ASSERT_EQ(v.dequant_f32.size(), static_cast<size_t>(v.rows * v.cols * 4));
  std::vector<float> ours(static_cast<size_t>(v.rows * v.cols));
  to_f32(Device::kCpu, dt, v.blocks.data(), ours.data(), v.rows * v.cols);
  std::vector<float> ref(ours.size());
  std::memcpy(ref.data(), v.dequant_f32.data(), v.dequant_f32.size());
  int64_t mismatches = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    // gguf-py computes in f32 (d * scale) * q - (dmin * min): allow one rounding step.
    const float tol = 1e-6f * std::max(1.0f, std::abs(ref[i]));
    if (std::abs(ours[i] - ref[i]) > tol && ++mismatches <= 5) {
      ADD_FAILURE() << label << ": element " << i << " ours " << ours[i] << " gguf-py " << ref[i];
    }
  }
  EXPECT_EQ(mismatches, 0) << label;
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, KQuantReference,
                         ::testing::Values(Case{"q4_k", DType::kQ4_K}, Case{"q5_k", DType::kQ5_K},
                                           Case{"q6_k", DType::kQ6_K}, Case{"q3_k", DType::kQ3_K},
                                           Case{"q2_k", DType::kQ2_K}),
                         [](const auto& info) { return std::string(info.param.label); });

}  // namespace
}  // namespace specd::kernels

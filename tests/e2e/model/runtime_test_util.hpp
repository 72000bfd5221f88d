// Helpers for the model runtime tests: fixture checkpoints, a loaded model with its own KV
// cache, and row-wise error measures.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fixture.hpp"
#include "kv/kv_cache.hpp"
#include "model/checkpoint.hpp"
#include "model/llama.hpp"
#include "specd/engine.hpp"
#include "test_paths.hpp"

namespace specd::model::test {

// The tests own the request ids (the engine takes the caller's): a fresh id per request.
inline RequestId add_request(Engine& engine, const Request& request) {
  static RequestId next = 1;
  const RequestId id = next++;
  engine.add_request(id, request);
  return id;
}

inline std::filesystem::path fixture(const std::string& preset, uint64_t seed = 7) {
  fixture::Options o;
  o.preset = preset;
  o.seed = seed;
  return fixture::write(o, testing_paths::work_dir() / "runtime" / (preset + "-" + std::to_string(seed)));
}

inline std::shared_ptr<const LlamaWeights> load_weights(const std::filesystem::path& dir, int64_t layers = -1,
                                                        WeightDTypes dtype = DType::kF32) {
  return LlamaWeights::load(std::shared_ptr<const Checkpoint>(Checkpoint::open(dir)), layers, dtype);
}

// A model plus a KV cache of its own.
struct Runner {
  std::unique_ptr<LlamaModel> model;
  std::unique_ptr<kv::KvCache> kv;
  ForwardOutput out;

  // comm: the tensor-parallel group of sharded weights (null for a whole model); placement:
  // where the model computes (its KV cache on the same device).
  Runner(std::shared_ptr<const LlamaWeights> w, int32_t block_size = 16, int32_t blocks = 256, int64_t layers = -1,
         DType kv_dtype = DType::kF32, dist::Communicator* comm = nullptr, Placement placement = {})
      : model(std::make_unique<LlamaModel>(std::move(w), layers, comm, placement)),
        kv(std::make_unique<kv::KvCache>(model->kv_shape(block_size, kv_dtype), blocks, placement.device)) {}

  // Appends tokens to `seq` (created on first use) and returns the requested logits rows.
  std::vector<std::vector<float>> append(kv::SeqId seq, const std::vector<int32_t>& tokens,
                                         LogitsMode mode = LogitsMode::kAll) {
    if (!kv->has_sequence(seq)) kv->add_sequence(seq);
    EXPECT_TRUE(kv->reserve(seq, static_cast<int32_t>(tokens.size())));
    ForwardBatch b;
    b.seqs.push_back({seq, tokens, mode});
    model->forward(b, *kv, out);
    return rows(0);
  }

  std::vector<std::vector<float>> rows(size_t s) const {
    std::vector<std::vector<float>> r;
    for (int32_t i = out.row_start[s]; i < out.row_start[s + 1]; ++i) {
      const auto row = out.logits_row(i);
      r.emplace_back(row.begin(), row.end());
    }
    return r;
  }
};

// max |a - b| / max |b| over one row.
inline double row_rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::abs(static_cast<double>(b[i])));
  }
  return den == 0.0 ? num : num / den;
}

inline double max_row_rel_error(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  EXPECT_EQ(a.size(), b.size());
  double e = 0.0;
  for (size_t r = 0; r < a.size() && r < b.size(); ++r) {
    EXPECT_EQ(a[r].size(), b[r].size());
    e = std::max(e, row_rel_error(a[r], b[r]));
  }
  return e;
}

inline std::vector<int32_t> some_tokens(size_t n, int32_t vocab, uint32_t salt = 0) {
  std::vector<int32_t> t;
  uint64_t x = 0x2545F4914F6CDD1Dull + salt;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    t.push_back(static_cast<int32_t>(3 + x % static_cast<uint64_t>(vocab - 3)));
  }
  return t;
}

}  // namespace specd::model::test

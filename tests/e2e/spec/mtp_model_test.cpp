// The host side of MTP: LlamaWeights::load_mtp + LlamaModel with input_hidden, and the
// target's hidden_all output the engine feeds to the mtp proposer.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kv/kv_cache.hpp"
#include "model/checkpoint.hpp"
#include "model/llama.hpp"
#include "model/weights.hpp"
#include "spec_test_util.hpp"
#include "specd/error.hpp"

namespace {

using namespace specd;

struct Fx {
  std::shared_ptr<const model::LlamaWeights> target = model::LlamaWeights::load(
      model::Checkpoint::open(spec_test::target_fixture(/*with_mtp=*/true)), -1, model::DType::kF32);
};

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

TEST(MtpModel, HiddenAllMatchesAllLogitsRows) {
  Fx fx;
  model::LlamaModel m(fx.target);
  const std::vector<int32_t> toks = {5, 17, 300, 42, 9, 1000, 77};
  std::vector<float> all_rows;
  for (bool hidden_all : {false, true}) {
    kv::KvCache kv(m.kv_shape(16, model::DType::kF32), 8);
    kv.add_sequence(1);
    ASSERT_TRUE(kv.reserve(1, static_cast<int32_t>(toks.size())));
    model::ForwardBatch b;
    b.seqs = {{1, toks, hidden_all ? model::LogitsMode::kLast : model::LogitsMode::kAll}};
    b.return_hidden = true;
    b.hidden_all = hidden_all;
    model::ForwardOutput out;
    m.forward(b, kv, out);
    ASSERT_EQ(out.token_start, (std::vector<int32_t>{0, static_cast<int32_t>(toks.size())}));
    ASSERT_EQ(out.hidden.size(), toks.size() * static_cast<size_t>(out.hidden_size));
    if (!hidden_all) {
      all_rows = out.hidden;
    } else {
      EXPECT_EQ(out.num_rows(), 1);  // logits: only the last row
      EXPECT_LT(max_abs_diff(out.hidden, all_rows), 1e-6f);
    }
  }
}

TEST(MtpModel, ModuleBatchedEqualsIncrementalAndUsesBothInputs) {
  Fx fx;
  ASSERT_EQ(fx.target->config().num_mtp_modules, 2);
  const int64_t H = fx.target->config().hidden_size;
  for (int64_t module : {0, 1}) {
    auto w = model::LlamaWeights::load_mtp(fx.target, module);
    ASSERT_TRUE(w->is_mtp());
    model::LlamaModel m(w);
    ASSERT_EQ(m.num_layers(), 1);
    const std::vector<int32_t> toks = {5, 17, 300, 42, 9};
    std::vector<float> in(toks.size() * static_cast<size_t>(H));
    for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(0.37f * static_cast<float>(i));

    auto run = [&](std::span<const int32_t> t, const float* h, kv::KvCache& kv, model::ForwardOutput& out) {
      model::ForwardBatch b;
      b.seqs = {{1, t, model::LogitsMode::kAll}};
      b.return_hidden = true;
      b.input_hidden = h;
      ASSERT_TRUE(kv.reserve(1, static_cast<int32_t>(t.size())));
      m.forward(b, kv, out);
    };
    kv::KvCache kv_a(m.kv_shape(16, model::DType::kF32), 8), kv_b(m.kv_shape(16, model::DType::kF32), 8);
    kv_a.add_sequence(1);
    kv_b.add_sequence(1);
    model::ForwardOutput batched, step;
    run(toks, in.data(), kv_a, batched);
    for (size_t i = 0; i < toks.size(); ++i) {
      run(std::span<const int32_t>(toks).subspan(i, 1), in.data() + i * static_cast<size_t>(H), kv_b, step);
      EXPECT_LT(max_abs_diff(step.logits_row(0), batched.logits_row(static_cast<int32_t>(i))), 1e-4f);
      EXPECT_LT(max_abs_diff(step.hidden_row(0), batched.hidden_row(static_cast<int32_t>(i))), 1e-5f);
    }
    // The hidden half of eh_proj is used: other input hidden states give other outputs.
    std::vector<float> in2(in);
    for (float& x : in2) x = -x;
    kv::KvCache kv_c(m.kv_shape(16, model::DType::kF32), 8);
    kv_c.add_sequence(1);
    model::ForwardOutput other;
    run(toks, in2.data(), kv_c, other);
    EXPECT_GT(max_abs_diff(other.hidden, batched.hidden), 1e-4f);

    // An MTP module needs input_hidden; a plain model rejects it.
    model::ForwardBatch bad;
    bad.seqs = {{1, toks, model::LogitsMode::kLast}};
    EXPECT_THROW(m.forward(bad, kv_c, other), Error);
  }
  model::LlamaModel plain(fx.target);
  kv::KvCache kv(plain.kv_shape(16, model::DType::kF32), 8);
  kv.add_sequence(1);
  ASSERT_TRUE(kv.reserve(1, 1));
  const std::vector<int32_t> one = {5};
  std::vector<float> h(static_cast<size_t>(H), 0.5f);
  model::ForwardBatch b;
  b.seqs = {{1, one, model::LogitsMode::kLast}};
  b.input_hidden = h.data();
  model::ForwardOutput out;
  EXPECT_THROW(plain.forward(b, kv, out), Error);
  EXPECT_THROW(model::LlamaWeights::load_mtp(fx.target, 2), Error);
}

}  // namespace

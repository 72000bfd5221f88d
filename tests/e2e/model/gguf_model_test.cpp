// GGUF files written from the fixtures by tools/gguf run the safetensors checkpoint's model:
// F32 files give logits within 1e-5 (relative, per row) of the checkpoint's; F16/BF16 files
// equal the checkpoint loaded in that dtype, and Q8_0/Q4_0 files equal the checkpoint quantized
// at load (model.dtype q8_0 / q4_0) exactly: the same bytes through the same kernels, Q/K rows
// de-interleaved after the projection. With model.mmap the tensors are used in place.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "convert.hpp"
#include "fixture.hpp"
#include "runtime_test_util.hpp"

namespace specd::model::test {
namespace {

namespace fs = std::filesystem;
using specd::gguf::TensorType;

fs::path gguf_of(const fs::path& dir, TensorType type) {
  const fs::path out = fs::path(SPECD_TEST_WORK_DIR) / "runtime" /
                       (dir.filename().string() + "-" + std::string(specd::gguf::tensor_type_name(type)) + ".gguf");
  specd::gguf::ConvertOptions o;
  o.type = type;
  specd::gguf::convert_checkpoint(dir, out, o);
  return out;
}

DType dtype_of(TensorType t) {
  switch (t) {
    case TensorType::kF16:
      return DType::kF16;
    case TensorType::kBF16:
      return DType::kBF16;
    case TensorType::kQ8_0:
      return DType::kQ8_0;
    case TensorType::kQ4_0:
      return DType::kQ4_0;
    default:
      return DType::kF32;
  }
}

// Prefill of 7 tokens, then 4 scored in one call: all 11 logits rows.
std::vector<std::vector<float>> run(std::shared_ptr<const LlamaWeights> w, const std::vector<int32_t>& tokens) {
  Runner r(std::move(w), 4, 64);
  auto rows = r.append(1, std::vector<int32_t>(tokens.begin(), tokens.begin() + 7));
  const auto tail = r.append(1, std::vector<int32_t>(tokens.begin() + 7, tokens.end()));
  rows.insert(rows.end(), tail.begin(), tail.end());
  return rows;
}

struct Case {
  std::string preset;
  TensorType type;
};

class GgufLogits : public ::testing::TestWithParam<Case> {};

TEST_P(GgufLogits, EqualTheSafetensorsPath) {
  const Case& c = GetParam();
  const fs::path dir = fixture(c.preset);
  const fs::path file = gguf_of(dir, c.type);
  const std::shared_ptr<const Checkpoint> st(Checkpoint::open(dir));
  const std::shared_ptr<const Checkpoint> gg(Checkpoint::open(file));

  const ModelConfig &a = st->config(), &b = gg->config();
  EXPECT_EQ(b.arch, a.arch);
  EXPECT_EQ(b.num_layers, a.num_layers);
  EXPECT_EQ(b.hidden_size, a.hidden_size);
  EXPECT_EQ(b.intermediate_size, a.intermediate_size);
  EXPECT_EQ(b.num_heads, a.num_heads);
  EXPECT_EQ(b.num_kv_heads, a.num_kv_heads);
  EXPECT_EQ(b.head_dim, a.head_dim);
  EXPECT_EQ(b.vocab_size, a.vocab_size);
  EXPECT_EQ(b.max_position_embeddings, a.max_position_embeddings);
  EXPECT_FLOAT_EQ(static_cast<float>(b.rms_norm_eps), static_cast<float>(a.rms_norm_eps));
  EXPECT_FLOAT_EQ(static_cast<float>(b.rope_theta), static_cast<float>(a.rope_theta));
  EXPECT_EQ(b.tie_word_embeddings, a.tie_word_embeddings);
  EXPECT_EQ(b.attention_bias, a.attention_bias);
  EXPECT_EQ(b.attention_out_bias, a.attention_out_bias);
  EXPECT_EQ(b.qk_norm, a.qk_norm);
  EXPECT_EQ(b.sliding_window, a.sliding_window);
  for (int64_t l = 0; l < a.num_layers; ++l) EXPECT_EQ(b.layer_window(l), a.layer_window(l)) << "layer " << l;
  if (a.rope_scaling.type == model::RopeScaling::Type::kLongRope) {  // (llama3's becomes rope_freqs)
    EXPECT_EQ(b.rope_scaling.type, a.rope_scaling.type);
    EXPECT_EQ(b.rope_scaling.short_factor, a.rope_scaling.short_factor);
    EXPECT_EQ(b.rope_scaling.long_factor, a.rope_scaling.long_factor);
    EXPECT_NEAR(b.rope_scaling.attention_factor, a.rope_scaling.attention_factor, 1e-6);
  }
  ASSERT_EQ(b.gemma.has_value(), a.gemma.has_value());
  if (a.gemma) {
    EXPECT_NEAR(b.gemma->query_scale, a.gemma->query_scale, 1e-12);
    EXPECT_FLOAT_EQ(static_cast<float>(b.gemma->attn_softcap), static_cast<float>(a.gemma->attn_softcap));
    EXPECT_FLOAT_EQ(static_cast<float>(b.gemma->final_softcap), static_cast<float>(a.gemma->final_softcap));
    EXPECT_EQ(b.gemma->rope_local_theta, a.gemma->rope_local_theta);
  }
  ASSERT_EQ(b.moe.has_value(), a.moe.has_value());
  if (a.moe) {
    EXPECT_EQ(b.moe->num_experts, a.moe->num_experts);
    EXPECT_EQ(b.moe->experts_per_token, a.moe->experts_per_token);
    EXPECT_EQ(b.moe->expert_intermediate, a.moe->expert_intermediate);
    EXPECT_EQ(b.moe->norm_topk_prob, a.moe->norm_topk_prob);
  }
  if (b.bos_token_id) {  // Qwen's tokenizer has no BOS token (config.json names one)
    EXPECT_EQ(b.bos_token_id, a.bos_token_id);
  }

  const auto tokens = some_tokens(11, static_cast<int32_t>(a.vocab_size), 3);
  const std::optional<DType> st_dtype = dtype_of(c.type);
  const auto want = run(LlamaWeights::load(st, -1, st_dtype), tokens);
  const auto mapped = LlamaWeights::load(gg, -1, std::nullopt, WeightPlacement::kMap);
  EXPECT_EQ(mapped->dtype(), *st_dtype);
  // In place: the layers' matrices are the file's bytes; only norms and biases are owned.
  if (a.moe) {  // expert 1 of the merged tensor, in place
    const std::string down = a.arch == Architecture::kMixtral ? "model.layers.0.block_sparse_moe.experts.w2.weight"
                                                              : "model.layers.0.mlp.experts.down_proj.weight";
    const TensorView* merged = gg->find(down);
    ASSERT_NE(merged, nullptr);
    EXPECT_EQ(mapped->layer(0).experts.at(1).down.data,
              merged->data + merged->nbytes / static_cast<size_t>(a.moe->num_experts));
  } else {
    EXPECT_EQ(mapped->layer(0).w_down.data, gg->find("model.layers.0.mlp.down_proj.weight")->data);
  }
  if (a.arch == Architecture::kPhi3) {  // k: rows of the fused projection, in place
    const TensorView* qkv = gg->find("model.layers.1.self_attn.qkv_proj.weight");
    ASSERT_NE(qkv, nullptr);
    EXPECT_EQ(mapped->layer(1).wk.data, qkv->data + qkv->nbytes / static_cast<size_t>(qkv->shape[0]) *
                                                        static_cast<size_t>(a.num_heads * a.head_dim));
  } else {
    EXPECT_EQ(mapped->layer(1).wq.data, gg->find("model.layers.1.self_attn.q_proj.weight")->data);
  }
  EXPECT_LT(mapped->owned_bytes(), size_t{64} << 10);
  const auto got = run(mapped, tokens);
  const auto copied = run(LlamaWeights::load(gg, -1, std::nullopt, WeightPlacement::kCopy), tokens);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(copied, got);
  const double err = max_row_rel_error(got, want);
  std::printf("[ %s %s ] max relative logits error vs safetensors: %.3g\n", c.preset.c_str(),
              std::string(specd::gguf::tensor_type_name(c.type)).c_str(), err);
  if (c.type == TensorType::kF32 || !b.rope_freq_factors.empty()) {
    EXPECT_LT(err, 1e-5);
  } else {
    EXPECT_EQ(got, want) << "the same bytes through the same kernels must give the same logits";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, GgufLogits,
    ::testing::Values(Case{"tiny", TensorType::kF32}, Case{"tiny", TensorType::kF16}, Case{"tiny", TensorType::kBF16},
                      Case{"tiny", TensorType::kQ8_0}, Case{"tiny", TensorType::kQ4_0},
                      Case{"tiny-llama-bias", TensorType::kF32}, Case{"tiny-llama-bias", TensorType::kQ8_0},
                      Case{"tiny-llama3", TensorType::kF32}, Case{"tiny-rope-linear", TensorType::kF32},
                      Case{"tiny-tied", TensorType::kQ4_0}, Case{"tiny-qwen2", TensorType::kF32},
                      Case{"tiny-qwen2", TensorType::kQ8_0}, Case{"tiny-qwen3", TensorType::kF32},
                      Case{"tiny-qwen3", TensorType::kQ4_0}, Case{"tiny-qwen3-moe", TensorType::kF32},
                      Case{"tiny-qwen3-moe", TensorType::kQ4_0}, Case{"tiny-mixtral", TensorType::kF32},
                      Case{"tiny-mixtral", TensorType::kQ8_0}, Case{"tiny-phi3", TensorType::kF32},
                      Case{"tiny-phi3", TensorType::kQ8_0}, Case{"tiny-gemma2", TensorType::kF32},
                      Case{"tiny-gemma2", TensorType::kQ8_0}, Case{"tiny-gemma3", TensorType::kF32},
                      Case{"tiny-phi3-longrope", TensorType::kF32}),
    [](const auto& info) {
      std::string n = info.param.preset + "_" + std::string(specd::gguf::tensor_type_name(info.param.type));
      for (char& ch : n) ch = ch == '-' ? '_' : ch;
      return n;
    });

}  // namespace
// A Gemma3ForConditionalGeneration checkpoint (the multimodal layout of Gemma 3 4B and up): the
// tiny-gemma3 language model under language_model.model.* with a text_config that leaves fields to
// transformers' defaults, plus a vision tower that is not loaded, gives tiny-gemma3's logits.
TEST(MultimodalGemma3, LanguageModelEqualsTheTextCheckpoint) {
  const fs::path text = fixture("tiny-gemma3");
  const std::shared_ptr<const Checkpoint> st(Checkpoint::open(text));
  const fs::path dir = fs::path(SPECD_TEST_WORK_DIR) / "runtime" / "tiny-gemma3-multimodal";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(text / f, dir / f);
  nlohmann::json cfg;
  {
    std::ifstream in(text / "config.json");
    cfg = nlohmann::json::parse(in);
  }
  nlohmann::json text_config = cfg;
  text_config.erase("architectures");
  text_config["model_type"] = "gemma3_text";
  text_config.erase("rope_local_base_freq");  // transformers' default, 10000
  text_config.erase("tie_word_embeddings");   // default true
  text_config.erase("bos_token_id");          // the top level's
  text_config.erase("eos_token_id");
  const nlohmann::json top = {{"architectures", {"Gemma3ForConditionalGeneration"}},
                              {"model_type", "gemma3"},
                              {"text_config", text_config},
                              {"vision_config", {{"hidden_size", 16}}},
                              {"eos_token_id", {1, 106}}};
  std::ofstream(dir / "config.json") << top.dump(2);
  std::vector<fixture::TensorSource> tensors;
  for (const std::string& name : st->tensor_names()) {
    const TensorView& t = *st->find(name);
    std::vector<float> values(static_cast<size_t>(t.numel()));
    Checkpoint::to_f32(t, values.data());
    const std::string renamed = name.starts_with("model.") ? "language_model.model." + name.substr(6) : name;
    tensors.push_back(fixture::tensor_from_f32(renamed, t.dtype, t.shape, std::move(values)));
  }
  tensors.push_back(fixture::tensor_from_f32("vision_tower.vision_model.embeddings.patch_embedding.weight", DType::kF32,
                                             {4, 4}, std::vector<float>(16, 0.5f)));
  fixture::write_safetensors(dir / "model.safetensors", tensors);

  const std::shared_ptr<const Checkpoint> mm(Checkpoint::open(dir));
  EXPECT_EQ(mm->config().arch, Architecture::kGemma3);
  EXPECT_TRUE(mm->config().multimodal_text);
  EXPECT_EQ(mm->config().eos_token_ids, (std::vector<int32_t>{1, 106}));
  EXPECT_EQ(mm->find("vision_tower.vision_model.embeddings.patch_embedding.weight"), nullptr);
  ASSERT_NE(mm->find("model.layers.5.self_attn.q_norm.weight"), nullptr);
  const auto tokens = some_tokens(11, static_cast<int32_t>(st->config().vocab_size), 5);
  EXPECT_EQ(run(LlamaWeights::load(mm, -1, std::nullopt), tokens),
            run(LlamaWeights::load(st, -1, std::nullopt), tokens));
}

}  // namespace specd::model::test

// config.json parsing: defaults, architecture flavours, rope scaling, EOS ids, and refusals.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "model/checkpoint.hpp"
#include "model_test_util.hpp"

namespace specd::model::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json llama_config() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"vocab_size", 32000},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4}};
}

ModelConfig parse(const json& config, const json* generation = nullptr) {
  const fs::path dir = scratch_dir();
  write_file(dir / "config.json", config.dump());
  if (generation != nullptr) write_file(dir / "generation_config.json", generation->dump());
  return read_model_config(dir);
}

void expect_config_error(const json& config, ErrorCode code, std::initializer_list<std::string> substrings) {
  expect_error([&] { parse(config); }, code, substrings);
}

TEST(ModelConfig, DefaultsFillKvHeadsAndHeadDim) {
  const ModelConfig c = parse(llama_config());
  EXPECT_EQ(c.arch, Architecture::kLlama);
  EXPECT_EQ(c.num_kv_heads, 4);  // no GQA unless num_key_value_heads says so
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_EQ(c.num_mtp_modules, 0);
}

TEST(ModelConfig, ExplicitFields) {
  json j = llama_config();
  j["num_key_value_heads"] = 2;
  j["head_dim"] = 32;  // differs from hidden / heads, as in some Qwen/Gemma-style configs
  j["rms_norm_eps"] = 1e-5;
  j["rope_theta"] = 500000.0;
  j["tie_word_embeddings"] = true;
  j["attention_bias"] = true;
  j["bos_token_id"] = 1;
  j["eos_token_id"] = {2, 3};
  j["torch_dtype"] = "bfloat16";
  j["num_nextn_predict_layers"] = 1;
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.attention_out_bias);  // Llama's attention_bias covers o_proj too
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.num_mtp_modules, 1);
}

TEST(ModelConfig, GenerationConfigOverridesEos) {
  json j = llama_config();
  j["eos_token_id"] = 2;
  json gen = {{"eos_token_id", {128001, 128009}}, {"bos_token_id", 128000}};
  ModelConfig c = parse(j, &gen);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{128001, 128009}));
  EXPECT_EQ(c.bos_token_id, 128000);
  gen = {{"eos_token_id", 7}};
  c = parse(j, &gen);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{7}));
  gen = {{"do_sample", true}};
  EXPECT_EQ(parse(j, &gen).eos_token_ids, (std::vector<int32_t>{2}));
}

TEST(ModelConfig, Qwen2HasQkvBiasOnly) {
  json j = llama_config();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["use_sliding_window"] = false;
  j["sliding_window"] = 4096;
  j["max_position_embeddings"] = 32768;
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.arch, Architecture::kQwen2);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.attention_out_bias);
  j["use_sliding_window"] = true;
  expect_config_error(j, ErrorCode::kUnsupported, {"config.json", "sliding"});
}

TEST(ModelConfig, MistralSlidingWindow) {
  json j = llama_config();
  j["architectures"] = {"MistralForCausalLM"};
  j["max_position_embeddings"] = 32768;
  j["sliding_window"] = nullptr;
  EXPECT_EQ(parse(j).arch, Architecture::kMistral);
  EXPECT_EQ(parse(j).sliding_window, 0);
  j["sliding_window"] = 32768;  // as long as the context: plain causal attention
  EXPECT_EQ(parse(j).sliding_window, 0);
  j["sliding_window"] = 4096;
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.layer_window(0), 4096);
  j["sliding_window"] = 0;
  expect_config_error(j, ErrorCode::kModelFormat, {"config.json", "sliding_window", "got 0"});
}

TEST(ModelConfig, ModelTypeWithoutArchitectures) {
  json j = llama_config();
  j.erase("architectures");
  j["model_type"] = "qwen2";
  EXPECT_EQ(parse(j).arch, Architecture::kQwen2);
  j["model_type"] = "gpt2";
  expect_config_error(j, ErrorCode::kUnsupported, {"config.json", "gpt2"});
  j.erase("model_type");
  expect_config_error(j, ErrorCode::kModelFormat, {"config.json", "architectures"});
}

TEST(ModelConfig, RopeScalingLlama3AndLinear) {
  json j = llama_config();
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 32.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);

  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  c = parse(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 4.0);

  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_EQ(parse(j).rope_scaling.type, RopeScaling::Type::kNone);

  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  expect_config_error(j, ErrorCode::kUnsupported, {"config.json", "yarn"});
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  expect_config_error(j, ErrorCode::kModelFormat, {"config.json", "low_freq_factor"});
}

TEST(ModelConfig, Refusals) {
  json j = llama_config();
  j["num_key_value_heads"] = 3;
  expect_config_error(j, ErrorCode::kModelFormat, {"config.json", "num_key_value_heads 3"});
  j = llama_config();
  j["hidden_size"] = "64";
  expect_config_error(j, ErrorCode::kModelFormat, {"config.json", "'hidden_size' must be an integer"});
  j = llama_config();
  j["hidden_act"] = "gelu";
  expect_config_error(j, ErrorCode::kUnsupported, {"config.json", "gelu"});
  j = llama_config();
  j["mlp_bias"] = true;
  expect_config_error(j, ErrorCode::kUnsupported, {"config.json", "mlp_bias"});
  j = llama_config();
  j["eos_token_id"] = "</s>";
  expect_config_error(j, ErrorCode::kModelFormat, {"config.json", "eos_token_id"});
  j = llama_config();
  j["num_attention_heads"] = 0;
  expect_config_error(j, ErrorCode::kModelFormat, {"config.json", "num_attention_heads"});
  j = llama_config();
  j.erase("vocab_size");
  expect_config_error(j, ErrorCode::kModelFormat, {"config.json", "missing field 'vocab_size'"});
  j = llama_config();
  j["architectures"] = {"GPTNeoXForCausalLM", "SomethingElse"};
  expect_config_error(j, ErrorCode::kUnsupported, {"config.json", "GPTNeoXForCausalLM", "LlamaForCausalLM"});

  const fs::path dir = scratch_dir();
  write_file(dir / "config.json", "{\"vocab_size\": 3,");
  expect_error([&] { read_model_config(dir); }, ErrorCode::kModelFormat, {"config.json", "invalid JSON"});
  write_file(dir / "config.json", llama_config().dump());
  write_file(dir / "generation_config.json", "not json");
  expect_error([&] { read_model_config(dir); }, ErrorCode::kModelFormat, {"generation_config.json", "invalid JSON"});
}

}  // namespace
}  // namespace specd::model::test

namespace specd::model::test {
namespace {

TEST(ModelConfig, GemmaFieldsAndSlidingLayers) {
  json j = llama_config();
  j["architectures"] = {"Gemma2ForCausalLM"};
  j["num_hidden_layers"] = 4;
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["query_pre_attn_scalar"] = 144;
  ModelConfig c = parse(j);
  ASSERT_TRUE(c.gemma.has_value());
  EXPECT_DOUBLE_EQ(c.gemma->query_scale, 1.0 / 12.0);
  EXPECT_EQ(c.gemma->attn_softcap, 50.0);  // transformers' Gemma 2 defaults
  EXPECT_EQ(c.gemma->final_softcap, 30.0);
  EXPECT_TRUE(c.tie_word_embeddings);
  for (int64_t l = 0; l < 4; ++l) EXPECT_EQ(c.layer_window(l), l % 2 == 0 ? 4096 : 0) << l;
  EXPECT_EQ(c.layer_window(0), 4096);
  EXPECT_EQ(c.layer_window(1), 0);

  j["architectures"] = {"Gemma3ForCausalLM"};
  j["num_hidden_layers"] = 7;
  j["sliding_window"] = 512;
  c = parse(j);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.gemma->attn_softcap, 0.0);
  EXPECT_EQ(c.gemma->rope_local_theta, 10000.0);
  for (int64_t l = 0; l < 7; ++l) EXPECT_EQ(c.layer_window(l), l == 5 ? 0 : 512) << l;
  j["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "full_attention",
                      "full_attention", "full_attention",    "full_attention"};
  EXPECT_EQ(parse(j).layer_window(1), 512);
  EXPECT_EQ(parse(j).layer_window(0), 0);
  j["layer_types"] = {"chunked_attention"};
  expect_config_error(j, ErrorCode::kModelFormat, {"config.json", "layer_types must list one type per layer"});
  j["layer_types"] = {"full_attention", "chunked_attention", "full_attention", "full_attention",
                      "full_attention", "full_attention",    "full_attention"};
  expect_config_error(j, ErrorCode::kUnsupported, {"config.json", "layer_types[1]", "chunked_attention"});
  j.erase("layer_types");
  j["hidden_activation"] = "silu";
  expect_config_error(j, ErrorCode::kUnsupported, {"config.json", "hidden_act 'silu'", "gelu_pytorch_tanh"});
}

TEST(ModelConfig, Phi3PartialRotaryIsRefused) {
  json j = llama_config();
  j["architectures"] = {"Phi3ForCausalLM"};
  j["sliding_window"] = 2047;
  j["max_position_embeddings"] = 4096;
  EXPECT_EQ(parse(j).sliding_window, 2047);
  j["partial_rotary_factor"] = 0.75;
  expect_config_error(j, ErrorCode::kUnsupported, {"config.json", "partial_rotary_factor", "whole heads"});
  j.erase("partial_rotary_factor");
  // head_dim 16 (llama_config): 8 factors each.
  j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", {1.0}}, {"long_factor", {1.0}}};
  j["original_max_position_embeddings"] = 1024;
  expect_config_error(j, ErrorCode::kModelFormat, {"config.json", "rope_scaling.short_factor", "head_dim / 2"});
  j["rope_scaling"] = {{"type", "longrope"},
                       {"short_factor", std::vector<double>(8, 1.0)},
                       {"long_factor", std::vector<double>(8, 2.0)}};
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLongRope);
  EXPECT_EQ(c.rope_scaling.long_factor, std::vector<float>(8, 2.0f));
  EXPECT_NEAR(c.rope_scaling.attention_factor, std::sqrt(1.0 + std::log(4.0) / std::log(1024.0)), 1e-12);
  j.erase("original_max_position_embeddings");
  expect_config_error(j, ErrorCode::kModelFormat, {"config.json", "original_max_position_embeddings"});
}

}  // namespace
}  // namespace specd::model::test

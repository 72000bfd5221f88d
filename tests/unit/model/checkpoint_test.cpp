// Checkpoint reading: fixture checkpoints written by tools/fixture are read back with the
// right config, tensor names, shapes and values, in every dtype, single-file and sharded.
#include "model/checkpoint.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <set>
#include <tuple>

#include "model_test_util.hpp"

namespace specd::model::test {
namespace {

using Shapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// The Hugging Face tensor layout for a config (docs/model-formats.md), written out
// independently of the fixture generator.
Shapes expected_tensors(const ModelConfig& c) {
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t inter = c.intermediate_size;
  Shapes out = {{"model.embed_tokens.weight", {c.vocab_size, h}}, {"model.norm.weight", {h}}};
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, h}});
  auto block = [&](const std::string& p) {
    out.push_back({p + "input_layernorm.weight", {h}});
    out.push_back({p + "post_attention_layernorm.weight", {h}});
    out.push_back({p + "self_attn.q_proj.weight", {q, h}});
    out.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    out.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    out.push_back({p + "self_attn.o_proj.weight", {h, q}});
    if (c.attention_bias) {
      out.push_back({p + "self_attn.q_proj.bias", {q}});
      out.push_back({p + "self_attn.k_proj.bias", {kv}});
      out.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
    out.push_back({p + "mlp.gate_proj.weight", {inter, h}});
    out.push_back({p + "mlp.up_proj.weight", {inter, h}});
    out.push_back({p + "mlp.down_proj.weight", {h, inter}});
  };
  for (int64_t i = 0; i < c.num_layers; ++i) block("model.layers." + std::to_string(i) + ".");
  for (int64_t i = 0; i < c.num_mtp_modules; ++i) {
    const std::string p = "mtp." + std::to_string(i) + ".";
    out.push_back({p + "enorm.weight", {h}});
    out.push_back({p + "hnorm.weight", {h}});
    out.push_back({p + "eh_proj.weight", {h, 2 * h}});
    block(p + "block.");
  }
  return out;
}

std::vector<float> read_f32(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  Checkpoint::to_f32(t, out.data());
  return out;
}

// What a generated F32 value becomes after narrowing to dtype and widening back.
float through(DType dtype, float v) {
  switch (dtype) {
    case DType::kF32:
      return v;
    case DType::kF16:
      return f16_to_f32(f32_to_f16(v));
    case DType::kBF16:
      return bf16_to_f32(f32_to_bf16(v));
    default:  // safetensors fixtures hold no quantized tensors
      ADD_FAILURE() << "unexpected dtype " << dtype_name(dtype);
      return v;
  }
}

// Checks every tensor of the checkpoint against the values the fixture generated.
void expect_values_match(const Checkpoint& ckpt, const fixture::Options& options) {
  for (const std::string& name : ckpt.tensor_names()) {
    SCOPED_TRACE(name);
    const TensorView& t = *ckpt.find(name);
    EXPECT_EQ(t.dtype, options.dtype);
    const std::vector<float> got = read_f32(t);
    const std::vector<float> want = fixture::tensor_values(options, name);
    ASSERT_EQ(got.size(), want.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const float expected = through(options.dtype, want[i]);
      if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(expected)) ++mismatches;
      // Independently of the conversion helpers: narrowing keeps the value within half an ulp.
      const float rel = options.dtype == DType::kBF16 ? 0x1.0p-8f : options.dtype == DType::kF16 ? 0x1.0p-11f : 0.0f;
      const float abs_floor = options.dtype == DType::kF16 ? 0x1.0p-25f : 0.0f;
      if (std::fabs(got[i] - want[i]) > rel * std::fabs(want[i]) + abs_floor) ++mismatches;
    }
    EXPECT_EQ(mismatches, 0u);
  }
}

// ---- 16-bit conversions ---------------------------------------------------------------------

TEST(HalfConversion, KnownValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), 0x1.0p-24f);
  EXPECT_EQ(f16_to_f32(0x0400), 0x1.0p-14f);
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_EQ(f32_to_f16(1.0f + 0x1.0p-11f), 0x3c00);      // tie -> even
  EXPECT_EQ(f32_to_f16(1.0f + 3 * 0x1.0p-11f), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);    // rounds to infinity
  EXPECT_EQ(f32_to_f16(0x1.0p-25f), 0x0000);  // tie -> even (zero)
  EXPECT_EQ(f32_to_f16(0x1.0p-25f * 1.5f), 0x0001);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(0x1.ffcp-15f), 0x0400);  // subnormal rounding carries into the exponent
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::nanf("")))));
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(f32_to_bf16(1.0f + 0x1.0p-8f), 0x3f80);      // tie -> even
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * 0x1.0p-8f), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(-1.5f), 0xbfc0);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}

TEST(HalfConversion, EveryBitPatternRoundTrips) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    if ((bits & 0x7c00) != 0x7c00 || (bits & 0x3ff) == 0) {  // F16 non-NaN
      ASSERT_EQ(f32_to_f16(f16_to_f32(bits)), bits) << std::hex << b;
    }
    if ((bits & 0x7f80) != 0x7f80 || (bits & 0x7f) == 0) {  // BF16 non-NaN
      ASSERT_EQ(f32_to_bf16(bf16_to_f32(bits)), bits) << std::hex << b;
    }
  }
}

TEST(CheckpointDType, NamesSizesAndParsing) {
  EXPECT_EQ(parse_dtype("bf16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("float16"), DType::kF16);
  EXPECT_EQ(parse_dtype("F32"), DType::kF32);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_name(DType::kF16), "f16");
  expect_error([] { parse_dtype("int8"); }, ErrorCode::kInvalidArgument, {"int8"});
}

// ---- round trip over presets and dtypes -----------------------------------------------------

class CheckpointRoundTrip : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(CheckpointRoundTrip, ConfigShapesAndValues) {
  const auto& [preset, dtype] = GetParam();
  fixture::Options options;
  options.preset = preset;
  options.dtype = dtype;
  options.seed = 7;
  const auto dir =
      fixture::write(options, fixture_dir("rt-" + preset + "-" + std::string(dtype_name(dtype)) + "-seed7"));
  const auto ckpt = Checkpoint::open(dir);
  const ModelConfig& c = ckpt->config();
  const ModelConfig want = fixture::config_for(options);

  EXPECT_EQ(c.arch, want.arch);
  EXPECT_EQ(c.vocab_size, want.vocab_size);
  EXPECT_EQ(c.hidden_size, want.hidden_size);
  EXPECT_EQ(c.intermediate_size, want.intermediate_size);
  EXPECT_EQ(c.num_layers, want.num_layers);
  EXPECT_EQ(c.num_heads, want.num_heads);
  EXPECT_EQ(c.num_kv_heads, want.num_kv_heads);
  EXPECT_EQ(c.head_dim, want.hidden_size / want.num_heads);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, want.rms_norm_eps);
  EXPECT_DOUBLE_EQ(c.rope_theta, want.rope_theta);
  EXPECT_EQ(c.rope_scaling.type, want.rope_scaling.type);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, want.rope_scaling.factor);
  EXPECT_EQ(c.max_position_embeddings, want.max_position_embeddings);
  EXPECT_EQ(c.tie_word_embeddings, want.tie_word_embeddings);
  EXPECT_EQ(c.attention_bias, want.attention_bias);
  EXPECT_EQ(c.num_mtp_modules, 0);
  EXPECT_EQ(c.bos_token_id, want.bos_token_id);
  EXPECT_EQ(c.eos_token_ids, want.eos_token_ids);
  EXPECT_EQ(parse_dtype(c.torch_dtype), dtype);
  EXPECT_TRUE(std::filesystem::is_regular_file(dir / "tokenizer.json"));
  EXPECT_TRUE(std::filesystem::is_regular_file(dir / "tokenizer_config.json"));

  const Shapes shapes = expected_tensors(c);
  EXPECT_EQ(ckpt->tensor_names().size(), shapes.size());
  for (const auto& [name, shape] : shapes) {
    const TensorView& t = ckpt->require(name, shape);
    EXPECT_EQ(t.dtype, dtype) << name;
    EXPECT_EQ(t.nbytes, static_cast<size_t>(t.numel()) * dtype_size(dtype)) << name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 8, 0u) << name << " is not 8-byte aligned";
    EXPECT_EQ(t.file, dir / "model.safetensors");
  }
  expect_values_match(*ckpt, options);
}

std::string round_trip_name(const ::testing::TestParamInfo<CheckpointRoundTrip::ParamType>& info) {
  std::string name = std::get<0>(info.param) + "_" + std::string(dtype_name(std::get<1>(info.param)));
  for (char& ch : name) {
    if (ch == '-' || ch == '.') ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Presets, CheckpointRoundTrip,
                         ::testing::Combine(::testing::Values("tiny", "tiny-llama3", "tiny-qwen2", "tiny-mistral",
                                                              "tiny-tied", "tiny-rope-linear"),
                                            ::testing::Values(DType::kF32, DType::kF16, DType::kBF16)),
                         round_trip_name);

TEST(FixtureWriter, PresetFlavoursDeclareTheirArchitecture) {
  fixture::Options o;
  o.preset = "tiny-llama3";
  ModelConfig c = fixture::config_for(o);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  o.preset = "tiny-qwen2";
  c = fixture::config_for(o);
  EXPECT_EQ(c.arch, Architecture::kQwen2);
  EXPECT_TRUE(c.attention_bias && c.tie_word_embeddings);
  o.preset = "tiny-mistral";
  EXPECT_EQ(fixture::config_for(o).arch, Architecture::kMistral);
  o.preset = "tinyllama-1.1b";
  c = fixture::config_for(o);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_layers, 22);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.intermediate_size, 5632);
  o.preset = "llama-160m";
  EXPECT_EQ(fixture::config_for(o).num_layers, 12);
  o.preset = "no-such-preset";
  expect_error([&] { fixture::config_for(o); }, ErrorCode::kInvalidArgument, {"no-such-preset", "tiny"});
}

// ---- sharded, MTP, draft-of, idempotence ----------------------------------------------------

TEST(Checkpoint, ShardedCheckpointExposesAllTensors) {
  fixture::Options options;
  options.dtype = DType::kBF16;
  options.shards = 3;
  const auto dir = fixture::write(options, fixture_dir("tiny-sharded3"));
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors"));
  ASSERT_TRUE(std::filesystem::exists(dir / "model.safetensors.index.json"));
  const auto ckpt = Checkpoint::open(dir);
  std::set<std::filesystem::path> files;
  for (const std::string& name : ckpt->tensor_names()) files.insert(ckpt->find(name)->file);
  EXPECT_EQ(files.size(), 3u);
  EXPECT_TRUE(files.count(dir / "model-00002-of-00003.safetensors"));

  fixture::Options single = options;
  single.shards = 1;
  const auto single_ckpt = Checkpoint::open(fixture::write(single, fixture_dir("tiny-bf16-single")));
  EXPECT_EQ(ckpt->tensor_names(), single_ckpt->tensor_names());
  for (const auto& [name, shape] : expected_tensors(ckpt->config())) ckpt->require(name, shape);
  expect_values_match(*ckpt, options);

  const auto index = nlohmann::json::parse(read_file(dir / "model.safetensors.index.json"));
  EXPECT_EQ(index["weight_map"].size(), ckpt->tensor_names().size());
}

TEST(Checkpoint, MtpModulesAreCounted) {
  fixture::Options options;
  options.mtp_modules = 2;
  const auto dir = fixture::write(options, fixture_dir("tiny-mtp2"));
  const auto ckpt = Checkpoint::open(dir);
  EXPECT_EQ(ckpt->config().num_mtp_modules, 2);
  EXPECT_EQ(read_model_config(dir).num_mtp_modules, 2);  // num_nextn_predict_layers
  for (const auto& [name, shape] : expected_tensors(ckpt->config())) ckpt->require(name, shape);
  EXPECT_EQ(ckpt->tensor_names().size(), expected_tensors(ckpt->config()).size());
  ckpt->require("mtp.1.eh_proj.weight", {64, 128});
  expect_values_match(*ckpt, options);
}

TEST(Checkpoint, DraftOfCopiesTheFirstLayersExactly) {
  fixture::Options options;
  options.layers = 4;
  options.dtype = DType::kF16;
  options.mtp_modules = 1;
  const auto target_dir = fixture::write(options, fixture_dir("tiny-4layers-f16-mtp1"));
  const auto draft_dir = fixture::write_draft_of(target_dir, 2, fixture_dir("tiny-4layers-f16-mtp1-draft2"));
  const auto target = Checkpoint::open(target_dir);
  const auto draft = Checkpoint::open(draft_dir);
  EXPECT_EQ(draft->config().num_layers, 2);
  EXPECT_EQ(draft->config().num_mtp_modules, 0);
  EXPECT_EQ(draft->config().hidden_size, target->config().hidden_size);
  EXPECT_EQ(draft->config().eos_token_ids, target->config().eos_token_ids);
  EXPECT_EQ(draft->tensor_names().size(), expected_tensors(draft->config()).size());
  for (const std::string& name : draft->tensor_names()) {
    const TensorView& d = *draft->find(name);
    const TensorView* t = target->find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(d.dtype, t->dtype);
    EXPECT_EQ(d.shape, t->shape);
    ASSERT_EQ(d.nbytes, t->nbytes);
    EXPECT_EQ(std::memcmp(d.data, t->data, d.nbytes), 0) << name;
  }
  EXPECT_EQ(draft->find("model.layers.2.mlp.up_proj.weight"), nullptr);
  EXPECT_TRUE(std::filesystem::is_regular_file(draft_dir / "tokenizer.json"));
  expect_error([&] { fixture::write_draft_of(target_dir, 5, scratch_dir()); }, ErrorCode::kInvalidArgument, {"1..4"});
}

TEST(FixtureWriter, WriteIsIdempotentAndOptionsChangeTheFiles) {
  const auto dir = scratch_dir() / "ckpt";
  fixture::Options options;
  fixture::write(options, dir);
  const auto first_time = std::filesystem::last_write_time(dir / "model.safetensors");
  const std::string first = read_file(dir / "model.safetensors");
  fixture::write(options, dir);
  EXPECT_EQ(std::filesystem::last_write_time(dir / "model.safetensors"), first_time);

  options.seed = 1;
  fixture::write(options, dir);
  EXPECT_NE(read_file(dir / "model.safetensors"), first);
  options.seed = 0;
  fixture::write(options, dir);
  EXPECT_EQ(read_file(dir / "model.safetensors"), first);  // deterministic

  // A damaged checkpoint (a truncated weights file) is rewritten, not trusted.
  std::filesystem::resize_file(dir / "model.safetensors", 100);
  fixture::write(options, dir);
  EXPECT_EQ(read_file(dir / "model.safetensors"), first);

  options.shards = 2;  // switching layout removes the old single file
  fixture::write(options, dir);
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors"));
  EXPECT_NO_THROW(Checkpoint::open(dir));
}

TEST(FixtureWriter, GeneratorIsPinned) {
  // The generator's output is part of the fixture contract (mt19937_64 + Box-Muller): changing
  // it must bump kGeneratorVersion and these values.
  fixture::Options options;
  const std::vector<float> embed = fixture::tensor_values(options, "model.embed_tokens.weight");
  const uint32_t want_embed[] = {0xbe48d50f, 0xbec91a8c, 0x3e1f5f58, 0xbf3d14ef};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(std::bit_cast<uint32_t>(embed[i]), want_embed[i]) << i;
  const std::vector<float> down = fixture::tensor_values(options, "model.layers.1.mlp.down_proj.weight");
  const uint32_t want_down[] = {0xbd060579, 0xbb7f5a8e, 0x3befa79d, 0xbd23de83};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(std::bit_cast<uint32_t>(down[i]), want_down[i]) << i;
  // And the file holds exactly these bits.
  const auto ckpt = Checkpoint::open(fixture::write(options, fixture_dir("tiny-f32")));
  EXPECT_EQ(std::memcmp(ckpt->find("model.embed_tokens.weight")->data, want_embed, sizeof(want_embed)), 0);

  double sum = 0, sum_sq = 0;
  for (float v : embed) {
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  const double mean = sum / static_cast<double>(embed.size());
  const double std = std::sqrt(sum_sq / static_cast<double>(embed.size()) - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(std, 0.5, 0.002);

  // Per-tensor streams: a layer's values do not depend on how many layers are written.
  fixture::Options more = options;
  more.layers = 5;
  EXPECT_EQ(fixture::tensor_values(more, "model.layers.1.mlp.down_proj.weight"),
            fixture::tensor_values(options, "model.layers.1.mlp.down_proj.weight"));
  EXPECT_NE(fixture::tensor_values(options, "model.layers.0.mlp.down_proj.weight"),
            fixture::tensor_values(options, "model.layers.1.mlp.down_proj.weight"));
  // Layer std is honored.
  more.layer_std = 0.004;
  const std::vector<float> q = fixture::tensor_values(more, "model.layers.0.self_attn.q_proj.weight");
  double q_sq = 0;
  for (float v : q) q_sq += static_cast<double>(v) * v;
  EXPECT_NEAR(std::sqrt(q_sq / static_cast<double>(q.size())), 0.004, 0.0002);
}

}  // namespace
}  // namespace specd::model::test

// GGUF files as checkpoints (core/src/model/gguf_checkpoint.cpp), on small files written here
// with the tools' Writer: the metadata mapping, block types converted at load to Q8_0 next to
// tensors used in place, and the refusals that name the file, the key or tensor and the value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "gguf_writer.hpp"
#include "model/checkpoint.hpp"
#include "model/gguf.hpp"
#include "model/gguf_quants.hpp"
#include "model/llama.hpp"
#include "model/weights.hpp"
#include "specd/kernels/convert.hpp"
#include "unit/model/model_test_util.hpp"

namespace specd::gguf::test {
namespace {

namespace fs = std::filesystem;
using model::Checkpoint;
using model::DType;
using model::test::expect_error;
using model::test::scratch_dir;

constexpr int64_t kHidden = 256, kFfn = 512, kVocab = 64, kHeads = 2, kHeadDim = 128;

// A one-layer llama model: F32 except the tensors named in `types` (any ggml type id).
struct TinyGguf {
  std::map<std::string, uint32_t> types;
  std::map<std::string, std::string> strings;  // metadata overrides / additions
  std::map<std::string, uint32_t> u32s;
  std::vector<std::string> drop;                                     // tensors to leave out
  std::vector<std::pair<std::string, std::vector<uint64_t>>> extra;  // extra F32 tensors
  uint64_t seed = 3;

  fs::path write(const fs::path& file) const {
    Writer w;
    w.set_string("general.architecture",
                 strings.count("general.architecture") ? strings.at("general.architecture") : "llama");
    std::map<std::string, uint32_t> hp = {{"llama.embedding_length", kHidden},
                                          {"llama.feed_forward_length", kFfn},
                                          {"llama.block_count", 1},
                                          {"llama.attention.head_count", kHeads},
                                          {"llama.attention.head_count_kv", kHeads},
                                          {"llama.context_length", 256}};
    for (const auto& [k, v] : u32s) hp[k] = v;
    for (const auto& [k, v] : hp)
      if (!strings.count(k)) w.set_u32(k, v);
    for (const auto& [k, v] : strings)
      if (k != "general.architecture") w.set_string(k, v);
    w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    const std::vector<std::pair<std::string, std::vector<uint64_t>>> shapes = {
        {"token_embd.weight", {kHidden, kVocab}},    {"output_norm.weight", {kHidden}},
        {"output.weight", {kHidden, kVocab}},        {"blk.0.attn_norm.weight", {kHidden}},
        {"blk.0.attn_q.weight", {kHidden, kHidden}}, {"blk.0.attn_k.weight", {kHidden, kHidden}},
        {"blk.0.attn_v.weight", {kHidden, kHidden}}, {"blk.0.attn_output.weight", {kHidden, kHidden}},
        {"blk.0.ffn_norm.weight", {kHidden}},        {"blk.0.ffn_gate.weight", {kHidden, kFfn}},
        {"blk.0.ffn_up.weight", {kHidden, kFfn}},    {"blk.0.ffn_down.weight", {kFfn, kHidden}}};
    auto all = shapes;
    all.insert(all.end(), extra.begin(), extra.end());
    uint64_t salt = seed;
    for (const auto& [name, ne] : all) {
      if (std::find(drop.begin(), drop.end(), name) != drop.end()) continue;
      const auto it = types.find(name);
      const auto type = static_cast<TensorType>(it == types.end() ? 0u : it->second);
      uint64_t numel = 1;
      for (uint64_t d : ne) numel *= d;
      const uint64_t bytes = tensor_bytes(type, numel);
      const bool norm = ne.size() == 1;
      w.add_tensor(name, ne, type, [bytes, type, norm, s = ++salt](std::ostream& out) {
        std::mt19937_64 rng(s);
        std::string data(bytes, '\0');
        if (type == TensorType::kF32) {
          std::normal_distribution<float> nd(norm ? 1.0f : 0.0f, norm ? 0.01f : 0.05f);
          for (uint64_t i = 0; i < bytes / 4; ++i) {
            const float v = nd(rng);
            std::memcpy(data.data() + 4 * i, &v, 4);
          }
        } else {
          // Random blocks with every fp16 scale replaced by a small finite value.
          for (char& c : data) c = static_cast<char>(rng());
          const model::gguf::TypeInfo& info = model::gguf::type_info(static_cast<uint32_t>(type));
          const uint16_t d = kernels::f32_to_f16(0.003f);
          for (uint64_t b = 0; b < bytes / info.bytes; ++b) {
            char* p = data.data() + b * info.bytes;
            if (static_cast<uint32_t>(type) == model::gguf::kTypeQ6_K) {
              std::memcpy(p + 208, &d, 2);
            } else {
              std::memcpy(p, &d, 2);
              std::memcpy(p + 2, &d, 2);  // the min of Q4_1/Q5_1/Q4_K/Q5_K (Q5_0: qh bits)
            }
          }
        }
        out.write(data.data(), static_cast<std::streamsize>(data.size()));
      });
    }
    w.write(file);
    return file;
  }
};

TEST(GgufCheckpoint, MapsMetadataKeepsKQuantsInPlaceAndConvertsOtherBlockTypesToQ8_0) {
  TinyGguf g;
  g.types = {{"output.weight", model::gguf::kTypeQ6_K},         {"blk.0.ffn_down.weight", model::gguf::kTypeQ4_K},
             {"blk.0.attn_v.weight", model::gguf::kTypeQ5_0},   {"blk.0.attn_output.weight", model::gguf::kTypeQ5_K},
             {"blk.0.ffn_gate.weight", model::gguf::kTypeQ4_1}, {"blk.0.ffn_up.weight", model::gguf::kTypeQ5_1},
             {"blk.0.attn_k.weight", model::gguf::kTypeQ4_0},   {"blk.0.attn_q.weight", model::gguf::kTypeQ8_0}};
  const fs::path file = g.write(scratch_dir() / "model.weights");  // no .gguf: the magic decides
  std::shared_ptr<const Checkpoint> ckpt = Checkpoint::open(file);
  EXPECT_TRUE(ckpt->is_gguf());
  const model::ModelConfig& c = ckpt->config();
  EXPECT_EQ(c.arch, model::Architecture::kLlama);
  EXPECT_EQ(c.hidden_size, kHidden);
  EXPECT_EQ(c.intermediate_size, kFfn);
  EXPECT_EQ(c.num_heads, kHeads);
  EXPECT_EQ(c.head_dim, kHeadDim);
  EXPECT_EQ(c.vocab_size, kVocab);  // from token_embd (no token list in this file)
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_FLOAT_EQ(static_cast<float>(c.rms_norm_eps), 1e-5f);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_rows_interleaved);
  EXPECT_EQ(c.config_path, file);

  const model::TensorView& head = *ckpt->find("lm_head.weight");
  EXPECT_FALSE(head.converted_from.has_value());
  EXPECT_EQ(head.dtype, DType::kQ6_K);
  EXPECT_EQ(head.shape, (std::vector<int64_t>{kVocab, kHidden}));
  EXPECT_TRUE(head.in_place());
  EXPECT_TRUE(ckpt->find("model.layers.0.self_attn.k_proj.weight")->in_place());
  const model::TensorView& v = *ckpt->find("model.layers.0.self_attn.v_proj.weight");
  ASSERT_TRUE(v.converted_from.has_value());
  EXPECT_EQ(*v.converted_from, model::gguf::kTypeQ5_0);
  EXPECT_EQ(v.dtype, DType::kQ8_0);

  // auto: in-place types stay (the K-quants too), converted ones become Q8_0 =
  // quantize(dequantize(bytes)).
  const auto w = model::LlamaWeights::load(ckpt, -1, std::nullopt, model::WeightPlacement::kMap);
  EXPECT_EQ(w->layer(0).wk.dtype, DType::kQ4_0);
  EXPECT_EQ(w->layer(0).wk.data, ckpt->find("model.layers.0.self_attn.k_proj.weight")->data);  // in place
  EXPECT_EQ(w->layer(0).wq.dtype, DType::kQ8_0);
  EXPECT_EQ(w->layer(0).w_down.dtype, DType::kQ4_K);
  EXPECT_EQ(w->layer(0).w_down.data, ckpt->find("model.layers.0.mlp.down_proj.weight")->data);
  EXPECT_EQ(w->layer(0).wo.dtype, DType::kQ5_K);
  EXPECT_EQ(w->embed().dtype, DType::kF32);
  EXPECT_EQ(w->lm_head().dtype, DType::kQ6_K);
  EXPECT_EQ(w->lm_head().data, head.data);
  ASSERT_EQ(w->layer(0).wv.dtype, DType::kQ8_0);
  const int64_t v_rows = v.shape[0];
  std::vector<float> values(static_cast<size_t>(v_rows * kHidden));
  Checkpoint::to_f32(v, values.data());
  std::vector<std::byte> want(kernels::row_bytes(DType::kQ8_0, kHidden) * static_cast<size_t>(v_rows));
  kernels::from_f32(kernels::Device::kCpu, values.data(), DType::kQ8_0, want.data(), v_rows * kHidden);
  EXPECT_EQ(std::memcmp(want.data(), w->layer(0).wv.data, want.size()), 0);
  EXPECT_EQ(w->dtype(), DType::kQ8_0);  // the dtype of most of the layers' bytes

  model::LlamaModel m(w);
  kv::KvCache kv(m.kv_shape(16, DType::kF32), 4);
  kv.add_sequence(1);
  ASSERT_TRUE(kv.reserve(1, 3));
  const std::vector<int32_t> tokens = {1, 2, 3};
  model::ForwardBatch b;
  b.seqs = {{1, tokens, model::LogitsMode::kAll}};
  model::ForwardOutput out;
  m.forward(b, kv, out);
  ASSERT_EQ(out.logits.size(), static_cast<size_t>(3 * kVocab));
  for (float x : out.logits) ASSERT_TRUE(std::isfinite(x));
}

TEST(GgufCheckpoint, RefusalsNameTheFileKeyOrTensorAndValue) {
  const fs::path dir = scratch_dir();
  auto refused = [&](const TinyGguf& g, ErrorCode code, std::initializer_list<std::string> what) {
    const fs::path file = g.write(dir / "bad.gguf");
    std::vector<std::string> all{file.string() + ": "};
    all.insert(all.end(), what.begin(), what.end());
    try {
      Checkpoint::open(file);
      ADD_FAILURE() << "accepted; expected " << *what.begin();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      for (const std::string& s : all) EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
    }
  };
  TinyGguf g;
  g.strings["general.architecture"] = "gptneox";
  refused(g, ErrorCode::kUnsupported,
          {"general.architecture 'gptneox' is not supported (specd runs llama, qwen2, qwen3, qwen3moe, phi3, gemma2 "
           "and gemma3)"});
  g = {};
  g.types["blk.0.ffn_up.weight"] = 16;  // IQ2_XXS
  refused(g, ErrorCode::kUnsupported, {"tensor 'blk.0.ffn_up.weight' has type IQ2_XXS, which specd does not read"});
  g = {};
  g.extra = {{"blk.0.attn_qkv.weight", {kHidden, 3 * kHidden}}};
  refused(g, ErrorCode::kUnsupported, {"tensor 'blk.0.attn_qkv.weight' is not part of a llama model"});
  g = {};
  g.extra = {{"blk.1.attn_norm.weight", {kHidden}}};
  refused(g, ErrorCode::kUnsupported, {"tensor 'blk.1.attn_norm.weight'", "(1 blocks)"});
  g = {};
  g.u32s["llama.attention.head_count_kv"] = 3;
  refused(g, ErrorCode::kModelFormat, {"head_count 2 is not a multiple of attention.head_count_kv 3"});
  g = {};
  g.u32s["llama.rope.dimension_count"] = 64;
  refused(g, ErrorCode::kUnsupported, {"'llama.rope.dimension_count' = 64 differs from the head dimension 128"});
  g = {};
  g.strings["llama.rope.scaling.type"] = "yarn";
  refused(g, ErrorCode::kUnsupported, {"'llama.rope.scaling.type' = 'yarn' is not supported"});
  g = {};
  g.u32s["llama.vocab_size"] = 65;
  refused(g, ErrorCode::kModelFormat, {"'llama.vocab_size' = 65 but the model has 64 tokens"});
  g = {};
  g.u32s["llama.block_count"] = 0;
  refused(g, ErrorCode::kModelFormat, {"'llama.block_count' = 0 is out of range"});
  g = {};
  g.u32s["llama.block_count"] = uint32_t{1} << 31;  // the loader would size its layer table from it
  refused(g, ErrorCode::kModelFormat,
          {"'llama.block_count' = 2147483648 but the file holds no tensor blk.2147483647.*"});
  g = {};
  g.strings["llama.embedding_length"] = "256";
  refused(g, ErrorCode::kModelFormat, {"'llama.embedding_length' must be an integer, got string"});
  g = {};
  g.drop = {"token_embd.weight"};
  refused(g, ErrorCode::kModelFormat, {"missing 2-D tensor 'token_embd.weight'"});
  g = {};
  g.drop = {"blk.0.ffn_up.weight"};
  const auto ckpt = std::shared_ptr<const Checkpoint>(Checkpoint::open(g.write(dir / "partial.gguf")));
  expect_error([&] { model::LlamaWeights::load(ckpt, -1, std::nullopt); }, ErrorCode::kModelFormat,
               {"missing tensor model.layers.0.mlp.up_proj.weight", "partial.gguf"});

  model::test::write_file(dir / "plain.bin", "not a model");
  expect_error([&] { Checkpoint::open(dir / "plain.bin"); }, ErrorCode::kModelFormat,
               {"plain.bin is neither a model directory nor a GGUF file"});
  expect_error([&] { Checkpoint::open(dir / "nothing"); }, ErrorCode::kNotFound, {"nothing does not exist"});
}

}  // namespace
}  // namespace specd::gguf::test

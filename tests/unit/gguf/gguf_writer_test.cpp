// specd-to-gguf's library: fixture checkpoints written as GGUF and read back with the
// independent parser in gguf_reader.hpp: header, metadata keys and types, tensor infos,
// alignment, and tensor bytes equal to the checkpoint's (converted and, for Q/K, permuted).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

#include "convert.hpp"
#include "fixture.hpp"
#include "gguf_reader.hpp"
#include "model/checkpoint.hpp"
#include "model/json_file.hpp"
#include "specd/kernels/convert.hpp"
#include "specd/kernels/rope.hpp"
#include "unit/model/model_test_util.hpp"

namespace specd::gguf::test {
namespace {

namespace fs = std::filesystem;
using model::Checkpoint;
using model::DType;
using model::TensorView;
using model::test::expect_error;
using model::test::fixture_dir;
using model::test::scratch_dir;

// gguf_type and ggml_type values from ggml/include/gguf.h and ggml.h.
constexpr uint32_t kU32 = 4, kI32 = 5, kF32Value = 6, kBool = 7, kString = 8, kArray = 9;
constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlBF16 = 30;

uint32_t ggml_type(TensorType t) {
  return t == TensorType::kF32 ? kGgmlF32 : t == TensorType::kF16 ? kGgmlF16 : kGgmlBF16;
}

fs::path tiny(const std::string& preset = "tiny", DType dtype = DType::kF32) {
  fixture::Options o;
  o.preset = preset;
  o.dtype = dtype;
  const std::string name = preset + "-" + std::string(model::dtype_name(dtype)) + (preset == "tiny" ? "" : "-gguf");
  return fixture::write(o, fixture_dir(preset == "tiny" && dtype == DType::kF32 ? "tiny-f32" : name));
}

File convert_and_read(const fs::path& model, const fs::path& out, TensorType type, int64_t layers = 0) {
  ConvertOptions o;
  o.type = type;
  o.layers = layers;
  const ConvertSummary s = convert_checkpoint(model, out, o);
  EXPECT_EQ(s.file_bytes, fs::file_size(out));
  File f = read_gguf(out);
  EXPECT_EQ(s.tensors, f.tensors.size());
  return f;
}

// GGUF tensor name -> checkpoint tensor name (llama.cpp's LLM_TENSOR_NAMES for Llama).
std::string hf_name(const std::string& gguf) {
  static const std::pair<const char*, const char*> kGlobal[] = {{"token_embd.weight", "model.embed_tokens.weight"},
                                                                {"output_norm.weight", "model.norm.weight"},
                                                                {"output.weight", "lm_head.weight"}};
  for (const auto& [g, h] : kGlobal)
    if (gguf == g) return h;
  static const std::pair<const char*, const char*> kBlock[] = {
      {"attn_norm", "input_layernorm"}, {"attn_q", "self_attn.q_proj"},      {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},   {"attn_output", "self_attn.o_proj"}, {"ffn_norm", "post_attention_layernorm"},
      {"ffn_gate", "mlp.gate_proj"},    {"ffn_up", "mlp.up_proj"},           {"ffn_down", "mlp.down_proj"}};
  const size_t dot1 = gguf.find('.'), dot2 = gguf.find('.', dot1 + 1), dot3 = gguf.rfind('.');
  const std::string layer = gguf.substr(dot1 + 1, dot2 - dot1 - 1), part = gguf.substr(dot2 + 1, dot3 - dot2 - 1);
  for (const auto& [g, h] : kBlock)
    if (part == g) return "model.layers." + layer + "." + h + gguf.substr(dot3);
  ADD_FAILURE() << "unexpected tensor " << gguf;
  return gguf;
}

std::vector<float> values_of(const TensorView& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  Checkpoint::to_f32(t, v.data());
  return v;
}

// Rows of a [rows, cols] matrix reordered as llama.cpp's convert_hf_to_gguf.py permute():
// within each head, GGUF row 2i + j holds HF row j * head_dim / 2 + i.
std::vector<float> permute_rows(const std::vector<float>& v, int64_t rows, int64_t cols, int64_t head_dim) {
  std::vector<float> out(v.size());
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < rows / head_dim; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        std::copy_n(v.begin() + (h * head_dim + j * half + i) * cols, cols,
                    out.begin() + (h * head_dim + 2 * i + j) * cols);
  return out;
}

// The bytes a GGUF tensor of `type` holds for these values.
std::string encode(const std::vector<float>& v, uint32_t type) {
  std::string out;
  for (float x : v) {
    if (type == kGgmlF32) {
      out.append(reinterpret_cast<const char*>(&x), 4);
    } else {
      const uint16_t bits = type == kGgmlF16 ? model::f32_to_f16(x) : model::f32_to_bf16(x);
      out.append(reinterpret_cast<const char*>(&bits), 2);
    }
  }
  return out;
}

// Header, alignment and the data section: every tensor aligned, in order, inside the file.
void expect_layout(const File& f) {
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.kv_count, f.keys.size());
  EXPECT_EQ(f.at("general.alignment").type, kU32);
  EXPECT_EQ(f.alignment, 32u);
  EXPECT_EQ(f.data_start % f.alignment, 0u);
  uint64_t end = 0;
  for (const TensorInfo& t : f.tensors) {
    EXPECT_EQ(t.offset % f.alignment, 0u) << t.name;
    EXPECT_GE(t.offset, end) << t.name;
    uint64_t n = t.type == kGgmlF32 ? 4 : 2;
    for (uint64_t d : t.ne) n *= d;
    end = t.offset + n;
  }
  EXPECT_LE(f.data_start + end, f.bytes.size());
  EXPECT_GE(f.data_start + end + f.alignment, f.bytes.size());
}

// Every tensor equals the checkpoint's, converted to `type` (1-D: F32), Q/K rows permuted.
void expect_tensors_match(const File& f, const Checkpoint& ckpt, TensorType type, bool permute) {
  const int64_t head_dim = ckpt.config().head_dim;
  for (const TensorInfo& t : f.tensors) {
    if (t.name == "rope_freqs.weight") continue;
    const TensorView* src = ckpt.find(hf_name(t.name));
    ASSERT_NE(src, nullptr) << t.name;
    EXPECT_EQ(t.ne, std::vector<uint64_t>(src->shape.rbegin(), src->shape.rend())) << t.name;
    const uint32_t want_type = src->shape.size() == 1 ? kGgmlF32 : ggml_type(type);
    ASSERT_EQ(t.type, want_type) << t.name;
    std::vector<float> v = values_of(*src);
    const bool qk = t.name.find("attn_q.") != std::string::npos || t.name.find("attn_k.") != std::string::npos;
    if (permute && qk) {
      const int64_t rows = src->shape[0], cols = src->shape.size() == 1 ? 1 : src->shape[1];
      v = permute_rows(v, rows, cols, head_dim);
    }
    const std::string want = encode(v, want_type);
    ASSERT_EQ(std::string(f.data(t, want.size()), want.size()), want) << t.name << " bytes differ";
  }
}

uint64_t u32(const File& f, const std::string& key) {
  EXPECT_EQ(f.at(key).type, kU32) << key;
  return f.at(key).u;
}
const std::string& str(const File& f, const std::string& key) {
  EXPECT_EQ(f.at(key).type, kString) << key;
  return f.at(key).s;
}
const Value& array(const File& f, const std::string& key, uint32_t elem_type) {
  EXPECT_EQ(f.at(key).type, kArray) << key;
  EXPECT_EQ(f.at(key).elem_type, elem_type) << key;
  return f.at(key);
}

TEST(GgufWriter, LlamaF32HeaderMetadataAndTensors) {
  const fs::path model = tiny();
  const File f = convert_and_read(model, scratch_dir() / "tiny.gguf", TensorType::kF32);
  expect_layout(f);
  const auto ckpt = Checkpoint::open(model);
  EXPECT_EQ(f.keys.front(), "general.alignment");
  EXPECT_EQ(str(f, "general.name"), "tiny-f32");  // the directory's name
  EXPECT_EQ(str(f, "general.architecture"), "llama");
  EXPECT_EQ(u32(f, "general.file_type"), 0u);
  EXPECT_EQ(u32(f, "llama.block_count"), 2u);
  EXPECT_EQ(u32(f, "llama.context_length"), 2048u);
  EXPECT_EQ(u32(f, "llama.embedding_length"), 64u);
  EXPECT_EQ(u32(f, "llama.feed_forward_length"), 128u);
  EXPECT_EQ(u32(f, "llama.attention.head_count"), 4u);
  EXPECT_EQ(u32(f, "llama.attention.head_count_kv"), 2u);
  EXPECT_EQ(u32(f, "llama.rope.dimension_count"), 16u);
  EXPECT_EQ(u32(f, "llama.vocab_size"), 32000u);
  EXPECT_EQ(f.at("llama.attention.layer_norm_rms_epsilon").type, kF32Value);
  EXPECT_FLOAT_EQ(static_cast<float>(f.at("llama.attention.layer_norm_rms_epsilon").f), 1e-5f);
  EXPECT_FLOAT_EQ(static_cast<float>(f.at("llama.rope.freq_base").f), 10000.0f);
  EXPECT_EQ(f.kv.count("llama.rope.scaling.type"), 0u);

  // 2 layers x 9 tensors + embeddings, final norm, LM head; every tensor byte checked.
  EXPECT_EQ(f.tensor_count, 21u);
  EXPECT_EQ(f.tensors.front().name, "token_embd.weight");
  expect_tensors_match(f, *ckpt, TensorType::kF32, true);
}

TEST(GgufWriter, SentencePieceVocab) {
  const fs::path model = tiny();
  const File f = convert_and_read(model, scratch_dir() / "tiny.gguf", TensorType::kF32);
  EXPECT_EQ(str(f, "tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.kv.count("tokenizer.ggml.pre"), 0u);
  EXPECT_EQ(f.kv.count("tokenizer.ggml.merges"), 0u);
  const Value& tokens = array(f, "tokenizer.ggml.tokens", kString);
  const Value& types = array(f, "tokenizer.ggml.token_type", kI32);
  const Value& scores = array(f, "tokenizer.ggml.scores", kF32Value);
  ASSERT_EQ(tokens.items.size(), 32000u);
  ASSERT_EQ(types.items.size(), 32000u);
  ASSERT_EQ(scores.items.size(), 32000u);
  EXPECT_EQ(tokens.items[0].s, "<unk>");
  EXPECT_EQ(types.items[0].u, 2u);  // unknown
  EXPECT_EQ(tokens.items[1].s, "<s>");
  EXPECT_EQ(types.items[1].u, 3u);  // control
  EXPECT_EQ(tokens.items[3 + 0x0A].s, "<0x0A>");
  EXPECT_EQ(types.items[3 + 0x0A].u, 6u);  // byte
  EXPECT_EQ(u32(f, "tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(u32(f, "tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(u32(f, "tokenizer.ggml.unknown_token_id"), 0u);
  EXPECT_EQ(f.at("tokenizer.ggml.add_bos_token").type, kBool);
  EXPECT_EQ(f.at("tokenizer.ggml.add_bos_token").u, 1u);
  EXPECT_EQ(f.at("tokenizer.ggml.add_eos_token").u, 0u);
  EXPECT_EQ(f.at("tokenizer.ggml.add_space_prefix").u, 1u);

  // Every token equals tokenizer.json's, and a token made by merge rank r scores -r: SPM's
  // highest-score-first merging then follows tokenizer.json's merge order.
  const nlohmann::json json = model::read_json_file(model / "tokenizer.json");
  for (const auto& [text, id] : json["model"]["vocab"].items()) ASSERT_EQ(tokens.items[id.get<size_t>()].s, text);
  const auto& merges = json["model"]["merges"];
  for (size_t rank = 0; rank < merges.size(); rank += 97) {
    const std::string m = merges[rank].get<std::string>();
    const std::string merged = m.substr(0, m.find(' ')) + m.substr(m.find(' ') + 1);
    const size_t id = json["model"]["vocab"][merged].get<size_t>();
    EXPECT_GE(scores.items[id].f, -static_cast<double>(rank)) << merged;
  }
  EXPECT_GT(scores.items[json["model"]["vocab"]["\xE2\x96\x81t"].get<size_t>()].f,
            scores.items[json["model"]["vocab"]["\xE2\x96\x81\xE2\x96\x81"].get<size_t>()].f);
}

// llama.cpp's interleaved RoPE on the permuted rows computes what rotate-half RoPE computes on
// the checkpoint's rows: same rotated values (permuted) and the same q.k attention scores.
TEST(GgufWriter, PermutedQkGiveTheSameRopeAttentionScores) {
  const fs::path model = tiny();
  const File f = convert_and_read(model, scratch_dir() / "tiny.gguf", TensorType::kF32);
  const auto ckpt = Checkpoint::open(model);
  const auto& c = ckpt->config();
  const int64_t hd = c.head_dim, half = hd / 2, hidden = c.hidden_size;
  const std::vector<float> x = values_of(*ckpt->find("model.embed_tokens.weight"));  // row 0 is the input
  const std::vector<float> inv = kernels::rope_inv_freq(hd, c.rope_theta, {});
  const int32_t pos = 7;
  std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
  kernels::rope_cos_sin(kernels::Device::kCpu, &pos, 1, inv.data(), half, cs.data(), sn.data());

  auto project = [&](const float* w, int64_t rows) {
    std::vector<float> y(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < hidden; ++k) y[r] += w[r * hidden + k] * x[k];
    return y;
  };
  auto rope_pair = [&](std::vector<float> y) {  // ggml's LLAMA_ROPE_TYPE_NORM: pairs (2i, 2i+1)
    for (size_t h = 0; h < y.size() / hd; ++h)
      for (int64_t i = 0; i < half; ++i) {
        float& a = y[h * hd + 2 * i];
        float& b = y[h * hd + 2 * i + 1];
        const float a0 = a, b0 = b;
        a = a0 * cs[i] - b0 * sn[i];
        b = b0 * cs[i] + a0 * sn[i];
      }
    return y;
  };
  for (const char* part : {"q", "k"}) {
    const std::string gg = std::string("blk.1.attn_") + part + ".weight";
    const TensorView& src = *ckpt->find(std::string("model.layers.1.self_attn.") + part + "_proj.weight");
    const int64_t rows = src.shape[0];
    std::vector<float> hf = project(values_of(src).data(), rows);
    const auto* info = f.tensor(gg);
    ASSERT_NE(info, nullptr);
    std::vector<float> gw(static_cast<size_t>(rows * hidden));
    std::memcpy(gw.data(), f.data(*info, gw.size() * 4), gw.size() * 4);
    const std::vector<float> ggr = rope_pair(project(gw.data(), rows));
    kernels::rope_apply(kernels::Device::kCpu, hf.data(), 1, rows / hd, hd, cs.data(), sn.data());
    for (int64_t h = 0; h < rows / hd; ++h) {
      double dot_hf = 0, dot_gg = 0;
      for (int64_t i = 0; i < half; ++i)
        for (int64_t j = 0; j < 2; ++j) {
          EXPECT_NEAR(ggr[h * hd + 2 * i + j], hf[h * hd + j * half + i], 1e-5) << gg << " head " << h;
          dot_hf += hf[h * hd + j * half + i] * hf[h * hd + j * half + i];
          dot_gg += ggr[h * hd + 2 * i + j] * ggr[h * hd + 2 * i + j];
        }
      EXPECT_NEAR(dot_gg, dot_hf, 1e-5 * (1 + dot_hf));
    }
  }
}

TEST(GgufWriter, SixteenBitTypesNarrowTwoDimensionalTensors) {
  const fs::path model = tiny();
  const auto ckpt = Checkpoint::open(model);
  const fs::path dir = scratch_dir();
  for (TensorType type : {TensorType::kF16, TensorType::kBF16}) {
    const File f = convert_and_read(model, dir / "tiny.gguf", type);
    expect_layout(f);
    EXPECT_EQ(u32(f, "general.file_type"), type == TensorType::kF16 ? 1u : 32u);
    expect_tensors_match(f, *ckpt, type, true);
  }
  // A BF16 checkpoint written as BF16 keeps its exact bits.
  const fs::path bf16_model = tiny("tiny", DType::kBF16);
  const File f = convert_and_read(bf16_model, dir / "tiny-bf16.gguf", TensorType::kBF16);
  const auto bf16_ckpt = Checkpoint::open(bf16_model);
  const TensorView& embed = *bf16_ckpt->find("model.embed_tokens.weight");
  ASSERT_EQ(std::memcmp(f.data(*f.tensor("token_embd.weight"), embed.nbytes), embed.data, embed.nbytes), 0);
}

TEST(GgufWriter, LayersWritesAStandaloneSelfDraft) {
  const fs::path model = tiny();
  const fs::path dir = scratch_dir();
  const File f = convert_and_read(fs::path(model.string() + "/"), dir / "draft.gguf", TensorType::kF32, 1);
  expect_layout(f);
  EXPECT_EQ(str(f, "general.name"), "tiny-f32");
  EXPECT_EQ(u32(f, "llama.block_count"), 1u);
  EXPECT_EQ(f.tensor_count, 12u);
  for (const TensorInfo& t : f.tensors) EXPECT_FALSE(t.name.starts_with("blk.1.")) << t.name;
  EXPECT_NE(f.tensor("output.weight"), nullptr);
  expect_tensors_match(f, *Checkpoint::open(model), TensorType::kF32, true);

  ConvertOptions too_deep;
  too_deep.layers = 3;
  expect_error([&] { convert_checkpoint(model, dir / "x.gguf", too_deep); }, ErrorCode::kInvalidArgument,
               {"--layers 3", "has 2 layers"});
  expect_error([&] { convert_checkpoint(dir / "missing", dir / "x.gguf", {}); }, ErrorCode::kNotFound, {"missing"});
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));
  for (const auto& entry : fs::directory_iterator(dir)) {
    EXPECT_FALSE(entry.path().filename().string().starts_with("x.gguf.tmp")) << entry.path();
  }
}

TEST(GgufWriter, ByteLevelVocabAndLlama3RopeFactors) {
  const fs::path model = tiny("tiny-llama3");
  const File f = convert_and_read(model, scratch_dir() / "l3.gguf", TensorType::kBF16);
  expect_layout(f);
  EXPECT_EQ(str(f, "tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(str(f, "tokenizer.ggml.pre"), "llama-bpe");
  EXPECT_EQ(f.kv.count("tokenizer.ggml.scores"), 0u);
  const nlohmann::json json = model::read_json_file(model / "tokenizer.json");
  const Value& merges = array(f, "tokenizer.ggml.merges", kString);
  ASSERT_EQ(merges.items.size(), json["model"]["merges"].size());
  EXPECT_EQ(merges.items[0].s, json["model"]["merges"][0].get<std::string>());
  const Value& tokens = array(f, "tokenizer.ggml.tokens", kString);
  const Value& types = array(f, "tokenizer.ggml.token_type", kI32);
  ASSERT_EQ(tokens.items.size(), 128256u);
  EXPECT_EQ(tokens.items[128000].s, "<|begin_of_text|>");
  EXPECT_EQ(types.items[128000].u, 3u);
  EXPECT_EQ(types.items[300].u, 1u);
  EXPECT_EQ(u32(f, "tokenizer.ggml.bos_token_id"), 128000u);
  // This tokenizer.json's post-processor is ByteLevel alone: encoding adds no BOS.
  EXPECT_EQ(f.at("tokenizer.ggml.add_bos_token").u, 0u);
  EXPECT_EQ(f.kv.count("tokenizer.ggml.add_space_prefix"), 0u);
  EXPECT_EQ(str(f, "tokenizer.chat_template"),
            model::read_json_file(model / "tokenizer_config.json")["chat_template"].get<std::string>());

  // rope_freqs: llama.cpp divides frequency i by factor i. Short wavelengths keep 1, long ones
  // get the scaling factor (8), the band between is interpolated.
  const TensorInfo* rf = f.tensor("rope_freqs.weight");
  ASSERT_NE(rf, nullptr);
  EXPECT_EQ(rf->type, kGgmlF32);
  ASSERT_EQ(rf->ne, std::vector<uint64_t>{8});
  std::vector<float> factors(8);
  std::memcpy(factors.data(), f.data(*rf, 32), 32);
  EXPECT_FLOAT_EQ(factors.front(), 1.0f);
  EXPECT_FLOAT_EQ(factors.back(), 8.0f);
  EXPECT_TRUE(std::is_sorted(factors.begin(), factors.end()));
  expect_tensors_match(f, *Checkpoint::open(model), TensorType::kBF16, true);
}

TEST(GgufWriter, Qwen2KeepsRowOrderBiasesAndTiedEmbeddings) {
  const fs::path model = tiny("tiny-qwen2");
  const File f = convert_and_read(model, scratch_dir() / "qwen2.gguf", TensorType::kF32);
  expect_layout(f);
  EXPECT_EQ(str(f, "general.architecture"), "qwen2");
  EXPECT_EQ(u32(f, "qwen2.block_count"), 2u);
  EXPECT_EQ(str(f, "tokenizer.ggml.pre"), "qwen2");
  const Value& tokens = array(f, "tokenizer.ggml.tokens", kString);
  ASSERT_EQ(tokens.items.size(), 151936u);  // the embedding rows; the tokenizer has 151669 ids
  EXPECT_EQ(tokens.items[151935].s, "[PAD151935]");
  EXPECT_EQ(array(f, "tokenizer.ggml.token_type", kI32).items[151935].u, 5u);  // unused
  EXPECT_EQ(f.kv.count("tokenizer.ggml.bos_token_id"), 0u);
  EXPECT_EQ(u32(f, "tokenizer.ggml.eos_token_id"), 151645u);
  EXPECT_EQ(u32(f, "tokenizer.ggml.padding_token_id"), 151643u);
  EXPECT_EQ(f.tensor("output.weight"), nullptr);
  EXPECT_NE(f.tensor("blk.0.attn_q.bias"), nullptr);
  expect_tensors_match(f, *Checkpoint::open(model), TensorType::kF32, false);
}

// Q8_0 / Q4_0: the layer matrices hold kernels::from_f32's blocks of the (permuted) rows, the
// embeddings and LM head F16, norms F32; and qwen3 writes its per-head q/k norms.
TEST(GgufWriter, QuantizedTypesAndQwen3) {
  const fs::path model = tiny();
  const auto ckpt = Checkpoint::open(model);
  for (const auto& [type, ggml, ftype] :
       {std::tuple{TensorType::kQ8_0, 8u, 7u}, std::tuple{TensorType::kQ4_0, 2u, 2u}}) {
    const File f = convert_and_read(model, scratch_dir() / "q.gguf", type);
    EXPECT_EQ(u32(f, "general.file_type"), ftype);
    EXPECT_EQ(f.tensor("token_embd.weight")->type, kGgmlF16);
    EXPECT_EQ(f.tensor("output.weight")->type, kGgmlF16);
    EXPECT_EQ(f.tensor("blk.0.attn_norm.weight")->type, kGgmlF32);
    for (const char* name : {"blk.1.attn_q.weight", "blk.0.ffn_down.weight"}) {
      const TensorInfo* t = f.tensor(name);
      ASSERT_NE(t, nullptr);
      ASSERT_EQ(t->type, ggml) << name;
      const TensorView& src = *ckpt->find(hf_name(name));
      std::vector<float> v = values_of(src);
      if (std::string(name).find("attn_q") != std::string::npos)
        v = permute_rows(v, src.shape[0], src.shape[1], ckpt->config().head_dim);
      const model::DType dt = type == TensorType::kQ8_0 ? model::DType::kQ8_0 : model::DType::kQ4_0;
      std::string want(kernels::row_bytes(dt, static_cast<int64_t>(v.size())), '\0');
      kernels::from_f32(kernels::Device::kCpu, v.data(), dt, want.data(), static_cast<int64_t>(v.size()));
      ASSERT_EQ(std::string(f.data(*t, want.size()), want.size()), want) << name;
    }
  }
  const File q3 = convert_and_read(tiny("tiny-qwen3"), scratch_dir() / "qwen3.gguf", TensorType::kF32);
  EXPECT_EQ(str(q3, "general.architecture"), "qwen3");
  EXPECT_EQ(u32(q3, "qwen3.attention.key_length"), 32u);
  ASSERT_NE(q3.tensor("blk.1.attn_k_norm.weight"), nullptr);
  EXPECT_EQ(q3.tensor("blk.1.attn_k_norm.weight")->ne, std::vector<uint64_t>{32});
  EXPECT_EQ(q3.tensor("blk.0.attn_q.bias"), nullptr);
}

}  // namespace
}  // namespace specd::gguf::test

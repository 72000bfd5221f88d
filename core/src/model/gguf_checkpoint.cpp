// A GGUF file as a Checkpoint: llama.cpp's metadata mapped to ModelConfig and its tensors to
// the Hugging Face names the weights loader looks up (docs/model-formats.md "GGUF files").
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

#include "model/checkpoint.hpp"
#include "model/gguf.hpp"
#include "model/gguf_quants.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"

namespace specd::model {

namespace {

using gguf::File;

// GGUF tensor name -> Hugging Face name, for the names outside the decoder blocks.
constexpr std::pair<std::string_view, std::string_view> kGlobalNames[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};
// blk.N.<gguf> -> model.layers.N.<hf>, followed by ".weight" or ".bias".
constexpr std::pair<std::string_view, std::string_view> kBlockNames[] = {
    {"attn_norm", "input_layernorm"},    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},      {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"}, {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"}, {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},       {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};
constexpr std::string_view kRopeFreqs = "rope_freqs.weight";

// A mixture-of-experts block's router and merged expert tensors ([experts, rows, cols]), under
// the family's Hugging Face names (weights.cpp reads the merged form as well as one tensor per
// expert).
std::string hf_moe_name(std::string_view part, Architecture arch) {
  const bool mixtral = arch == Architecture::kMixtral;
  const std::string p = mixtral ? "block_sparse_moe." : "mlp.";
  if (part == "ffn_gate_inp") return p + "gate";
  if (part == "ffn_gate_exps") return p + (mixtral ? "experts.w1" : "experts.gate_proj");
  if (part == "ffn_up_exps") return p + (mixtral ? "experts.w3" : "experts.up_proj");
  if (part == "ffn_down_exps") return p + (mixtral ? "experts.w2" : "experts.down_proj");
  return {};
}

// The HF name of a GGUF tensor, or "" when specd has no use for it.
std::string hf_name(std::string_view name, const ModelConfig& c) {
  const int64_t num_layers = c.num_layers;
  for (const auto& [g, h] : kGlobalNames)
    if (name == g) return std::string(h);
  if (!name.starts_with("blk.")) return {};
  const size_t dot = name.find('.', 4);
  const size_t last = name.rfind('.');
  if (dot == std::string_view::npos || last <= dot) return {};
  const std::string_view digits = name.substr(4, dot - 4), part = name.substr(dot + 1, last - dot - 1),
                         kind = name.substr(last + 1);
  if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string_view::npos)
    return {};
  if (std::stoll(std::string(digits)) >= num_layers || (kind != "weight" && kind != "bias")) return {};
  std::string hf;
  if (c.arch == Architecture::kPhi3) {  // fused projections
    if (part == "attn_qkv") hf = "self_attn.qkv_proj";
    if (part == "ffn_up") hf = "mlp.gate_up_proj";
    if (part == "attn_q" || part == "attn_k" || part == "attn_v" || part == "ffn_gate") return {};
  }
  if (c.gemma) {  // the norms around both blocks
    if (part == "post_attention_norm") hf = "post_attention_layernorm";
    if (part == "ffn_norm") hf = "pre_feedforward_layernorm";
    if (part == "post_ffw_norm") hf = "post_feedforward_layernorm";
  }
  if (c.moe) {
    hf = hf_moe_name(part, c.arch);
    if (part == "ffn_gate" || part == "ffn_up" || part == "ffn_down") return {};  // no dense MLP
  }
  for (const auto& [g, h] : kBlockNames)
    if (hf.empty() && part == g) hf = h;
  if (hf.empty()) return {};
  return "model.layers." + std::string(digits) + "." + hf + "." + std::string(kind);
}

std::optional<DType> in_place_dtype(uint32_t ggml_type) {
  switch (ggml_type) {
    case gguf::kTypeF32:
      return DType::kF32;
    case gguf::kTypeF16:
      return DType::kF16;
    case gguf::kTypeBF16:
      return DType::kBF16;
    case gguf::kTypeQ8_0:
      return DType::kQ8_0;
    case gguf::kTypeQ4_0:
      return DType::kQ4_0;
    case gguf::kTypeQ4_K:
      return DType::kQ4_K;
    case gguf::kTypeQ5_K:
      return DType::kQ5_K;
    case gguf::kTypeQ6_K:
      return DType::kQ6_K;
    case gguf::kTypeQ3_K:
      return DType::kQ3_K;
    case gguf::kTypeQ2_K:
      return DType::kQ2_K;
    default:
      return std::nullopt;
  }
}

TensorView tensor_view(const File& f, const gguf::TensorInfo& t, std::string hf) {
  TensorView v;
  v.name = std::move(hf);
  v.file = f.path();
  v.data = t.data;
  v.nbytes = static_cast<size_t>(t.nbytes);
  for (uint32_t d = t.n_dims; d-- > 0;) v.shape.push_back(static_cast<int64_t>(t.ne[d]));
  if (const std::optional<DType> dtype = in_place_dtype(t.type)) {
    v.dtype = *dtype;
  } else if (gguf::is_converted_type(t.type)) {
    v.dtype = gguf::converted_dtype(t.type);
    v.converted_from = t.type;
  } else {
    f.fail("tensor '" + std::string(t.name) + "' has type " + gguf::type_name(t.type) +
               ", which specd does not read (F32, F16, BF16, Q8_0, Q4_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K in place; "
               "Q4_1, Q5_0, Q5_1, Q8_K converted to Q8_0)",
           true);
  }
  return v;
}

// `<arch>.<key>` as a positive integer; a per-layer array must hold one value for all layers.
int64_t positive(const File& f, const std::string& key, std::optional<int64_t> fallback = std::nullopt) {
  const gguf::Value* v = f.find(key);
  int64_t value = 0;
  if (v == nullptr) {
    if (!fallback) f.fail("missing metadata key '" + key + "'");
    value = *fallback;
  } else if (v->type == gguf::ValueType::kArray) {
    const gguf::Value* a = f.array(key, gguf::ValueType::kInt64);
    if (a->count == 0) f.fail("metadata key '" + key + "' is an empty array");
    value = f.integer_at(*a, 0, key);
    for (uint64_t i = 1; i < a->count; ++i) {
      if (f.integer_at(*a, i, key) != value)
        f.fail("metadata key '" + key + "' differs between layers; specd runs models whose layers are alike", true);
    }
  } else {
    value = f.require_integer(key);
  }
  if (value <= 0 || value > (int64_t{1} << 31))
    f.fail("metadata key '" + key + "' = " + std::to_string(value) + " is out of range");
  return value;
}

std::optional<int32_t> token_id(const File& f, const std::string& key, int64_t vocab) {
  const std::optional<int64_t> id = f.integer(key);
  if (!id) return std::nullopt;
  if (*id < 0 || *id >= vocab) {
    f.fail("metadata key '" + key + "' = " + std::to_string(*id) + " is outside the vocabulary of " +
           std::to_string(vocab) + " tokens");
  }
  return static_cast<int32_t>(*id);
}

Architecture architecture(const File& f) {
  const std::string_view arch = f.require_string("general.architecture");
  if (arch == "llama")  // Mixtral is a llama file with experts
    return f.integer("llama.expert_count").value_or(0) > 0 ? Architecture::kMixtral : Architecture::kLlama;
  if (arch == "qwen2") return Architecture::kQwen2;
  if (arch == "qwen3") return Architecture::kQwen3;
  if (arch == "qwen3moe") return Architecture::kQwen3Moe;
  if (arch == "phi3") return Architecture::kPhi3;
  if (arch == "gemma2") return Architecture::kGemma2;
  if (arch == "gemma3") return Architecture::kGemma3;
  f.fail("general.architecture '" + std::string(arch).substr(0, 40) +
             "' is not supported (specd runs llama, qwen2, qwen3, qwen3moe, phi3, gemma2 and gemma3)",
         true);
}

// gemma2 / gemma3 as llama.cpp runs them: soft caps from the file; the query scale, the sliding
// pattern (every other layer; 5 of 6) and Gemma 3's local RoPE base (10000) are the families'
// fixed values, and the 27B models scale queries by hidden / heads instead of the head size.
void gemma_config(const File& f, const std::string& p, ModelConfig& c) {
  if (c.arch != Architecture::kGemma2 && c.arch != Architecture::kGemma3) return;
  const bool gemma2 = c.arch == Architecture::kGemma2;
  ModelConfig::Gemma g;
  g.attn_softcap = f.real(p + "attn_logit_softcapping").value_or(0.0);
  g.final_softcap = f.real(p + "final_logit_softcapping").value_or(0.0);
  if (g.attn_softcap < 0 || g.final_softcap < 0) f.fail("negative logit soft-capping");
  const bool big = c.num_layers == (gemma2 ? 46 : 62);  // Gemma 2 27B, Gemma 3 27B
  g.query_scale = 1.0 / std::sqrt(static_cast<double>(big ? c.hidden_size / c.num_heads : c.head_dim));
  if (!gemma2) g.rope_local_theta = 10000.0;
  c.sliding_window = positive(f, p + "attention.sliding_window", 4096);
  c.sliding_period = gemma2 ? 2 : 6;
  c.gemma = g;
}

// <arch>.expert_count and friends (llama.cpp's names); both families renormalize the top-k
// weights (llama.cpp's norm_w).
void moe_config(const File& f, const std::string& p, ModelConfig& c) {
  if (c.arch != Architecture::kQwen3Moe && c.arch != Architecture::kMixtral) return;
  ModelConfig::Moe m;
  m.num_experts = positive(f, p + "expert_count");
  m.experts_per_token = positive(f, p + "expert_used_count");
  m.expert_intermediate = c.arch == Architecture::kMixtral ? c.intermediate_size
                                                           : positive(f, p + "expert_feed_forward_length",
                                                                      c.intermediate_size / m.experts_per_token);
  if (m.experts_per_token > m.num_experts)
    f.fail("metadata key '" + p + "expert_used_count' = " + std::to_string(m.experts_per_token) + " exceeds " + p +
           "expert_count = " + std::to_string(m.num_experts));
  if (f.integer(p + "expert_shared_count").value_or(0) > 0) f.fail("shared experts are not supported", true);
  m.norm_topk_prob = true;
  c.moe = m;
}

void rope_config(const File& f, const std::string& p, ModelConfig& c) {
  c.rope_theta = f.real(p + "rope.freq_base").value_or(10000.0);
  if (!(c.rope_theta > 0)) f.fail("metadata key '" + p + "rope.freq_base' must be positive");
  if (positive(f, p + "rope.dimension_count", c.head_dim) != c.head_dim) {
    f.fail("metadata key '" + p + "rope.dimension_count' = " +
               std::to_string(f.require_integer(p + "rope.dimension_count")) + " differs from the head dimension " +
               std::to_string(c.head_dim) + ": partial rotary embeddings are not supported",
           true);
  }
  std::optional<double> factor = f.real(p + "rope.scaling.factor");
  if (!factor) factor = f.real(p + "rope.scale_linear");  // older files
  const std::string type(f.string(p + "rope.scaling.type").value_or(factor && *factor != 1.0 ? "linear" : "none"));
  if (type == "linear") {
    if (!factor || !(*factor > 0)) f.fail("linear rope scaling needs a positive '" + p + "rope.scaling.factor'");
    c.rope_scaling.type = RopeScaling::Type::kLinear;
    c.rope_scaling.factor = *factor;
  } else if (type != "none") {
    f.fail("metadata key '" + p + "rope.scaling.type' = '" + type.substr(0, 20) +
               "' is not supported (specd implements linear, and Llama 3 scaling as rope_freqs.weight)",
           true);
  }
}

ModelConfig model_config(const File& f) {
  ModelConfig c;
  c.arch = architecture(f);
  c.config_path = f.path();
  const std::string p = std::string(f.require_string("general.architecture")) + ".";
  c.hidden_size = positive(f, p + "embedding_length");
  c.intermediate_size = positive(f, p + "feed_forward_length");
  c.num_layers = positive(f, p + "block_count");
  c.num_heads = positive(f, p + "attention.head_count");
  c.num_kv_heads = positive(f, p + "attention.head_count_kv", c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0) {
    f.fail("attention.head_count " + std::to_string(c.num_heads) + " is not a multiple of attention.head_count_kv " +
           std::to_string(c.num_kv_heads));
  }
  const bool divisible = c.hidden_size % c.num_heads == 0;
  c.head_dim = positive(f, p + "attention.key_length",
                        divisible ? std::optional<int64_t>(c.hidden_size / c.num_heads) : std::nullopt);
  if (positive(f, p + "attention.value_length", c.head_dim) != c.head_dim)
    f.fail("attention.value_length differs from attention.key_length; specd needs them equal", true);
  if (c.head_dim % 2 != 0) f.fail("head dimension " + std::to_string(c.head_dim) + " must be even for RoPE");
  c.max_position_embeddings = positive(f, p + "context_length");
  c.rms_norm_eps = f.real(p + "attention.layer_norm_rms_epsilon").value_or(1e-5);
  if (!(c.rms_norm_eps > 0)) f.fail("metadata key '" + p + "attention.layer_norm_rms_epsilon' must be positive");
  rope_config(f, p, c);
  moe_config(f, p, c);
  gemma_config(f, p, c);
  // phi3: the window llama.cpp's converter writes from config.json (llama.cpp itself runs Phi-3
  // without it for now; transformers applies it, and so does specd).
  if (c.arch == Architecture::kPhi3)
    if (const std::optional<int64_t> w = f.integer(p + "attention.sliding_window");
        w && *w > 0 && *w < c.max_position_embeddings)
      c.sliding_window = *w;
  c.qk_norm = c.arch == Architecture::kQwen3 || c.arch == Architecture::kQwen3Moe || c.arch == Architecture::kGemma3;
  // llama.cpp's converter permutes only llama (Mixtral's files are llama files)
  c.qk_rows_interleaved = c.arch == Architecture::kLlama || c.arch == Architecture::kMixtral;

  const gguf::TensorInfo* embed = f.find_tensor("token_embd.weight");
  if (embed == nullptr || embed->n_dims != 2) f.fail("missing 2-D tensor 'token_embd.weight'");
  const gguf::Value* tokens = f.array("tokenizer.ggml.tokens", gguf::ValueType::kString);
  c.vocab_size = tokens != nullptr ? static_cast<int64_t>(tokens->count) : static_cast<int64_t>(embed->ne[1]);
  if (c.vocab_size != static_cast<int64_t>(embed->ne[1])) {
    f.fail("tokenizer.ggml.tokens holds " + std::to_string(c.vocab_size) + " tokens but token_embd.weight has " +
           std::to_string(embed->ne[1]) + " rows");
  }
  if (const std::optional<int64_t> declared = f.integer(p + "vocab_size"); declared && *declared != c.vocab_size) {
    f.fail("metadata key '" + p + "vocab_size' = " + std::to_string(*declared) + " but the model has " +
           std::to_string(c.vocab_size) + " tokens");
  }
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
  c.attention_bias = c.arch == Architecture::kQwen2 || f.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.attention_out_bias = c.arch != Architecture::kQwen2 && f.find_tensor("blk.0.attn_output.bias") != nullptr;
  c.bos_token_id = token_id(f, "tokenizer.ggml.bos_token_id", c.vocab_size);
  for (const char* key :
       {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    const std::optional<int32_t> id = token_id(f, key, c.vocab_size);
    if (id && std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), *id) == c.eos_token_ids.end())
      c.eos_token_ids.push_back(*id);
  }
  return c;
}

// rope_freqs.weight (and phi3's rope_factors_long/short.weight): one F32 factor per rotated pair.
std::vector<float> rope_freq_factors(const File& f, const gguf::TensorInfo& t, int64_t head_dim) {
  const std::string name(t.name);
  if (t.type != gguf::kTypeF32 || t.n_dims != 1 || static_cast<int64_t>(t.ne[0]) != head_dim / 2) {
    f.fail("tensor '" + name + "' must be F32 [" + std::to_string(head_dim / 2) + "], got " + gguf::type_name(t.type) +
           " with " + std::to_string(t.ne[0]) + " elements");
  }
  std::vector<float> factors(static_cast<size_t>(t.ne[0]));
  std::memcpy(factors.data(), t.data, factors.size() * sizeof(float));
  for (float x : factors)
    if (!(x > 0)) f.fail("tensor '" + name + "' holds a factor that is not positive");
  return factors;
}

// phi3's longrope as llama.cpp's converter writes it: the two factor tensors, the original
// context and the cos/sin scale.
void longrope_config(const File& f, ModelConfig& c) {
  const gguf::TensorInfo* lo = f.find_tensor("rope_factors_short.weight");
  const gguf::TensorInfo* hi = f.find_tensor("rope_factors_long.weight");
  if (lo == nullptr && hi == nullptr) return;
  if (lo == nullptr || hi == nullptr || c.arch != Architecture::kPhi3)
    f.fail("rope_factors_short/long.weight come in pairs, in phi3 files");
  RopeScaling& r = c.rope_scaling;
  r.type = RopeScaling::Type::kLongRope;
  r.short_factor = rope_freq_factors(f, *lo, c.head_dim);
  r.long_factor = rope_freq_factors(f, *hi, c.head_dim);
  r.original_max_position_embeddings = positive(f, "phi3.rope.scaling.original_context_length");
  r.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(r.original_max_position_embeddings);
  r.attention_factor =
      f.real("phi3.rope.scaling.attn_factor")
          .value_or(r.factor <= 1.0
                        ? 1.0
                        : std::sqrt(1.0 + std::log(r.factor) /
                                              std::log(static_cast<double>(r.original_max_position_embeddings))));
  if (!(r.attention_factor > 0)) f.fail("metadata key 'phi3.rope.scaling.attn_factor' must be positive");
}

}  // namespace

std::unique_ptr<Checkpoint> Checkpoint::open_gguf(const std::filesystem::path& file) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = file;
  ckpt->gguf_ = File::open(file);
  const File& f = *ckpt->gguf_;
  ckpt->config_ = model_config(f);
  longrope_config(f, ckpt->config_);
  const ModelConfig& c = ckpt->config_;
  std::set<uint32_t> converted;  // GGUF types read by conversion, for one warning each
  for (const gguf::TensorInfo& t : f.tensors()) {
    if (t.name == kRopeFreqs) {
      ckpt->config_.rope_freq_factors = rope_freq_factors(f, t, c.head_dim);
      continue;
    }
    if (t.name == "rope_factors_short.weight" || t.name == "rope_factors_long.weight") continue;  // longrope_config
    std::string hf = hf_name(t.name, c);
    if (hf.empty()) {
      f.fail("tensor '" + std::string(t.name).substr(0, 80) + "' is not part of a " +
                 std::string(f.require_string("general.architecture")) + " model as specd runs it (" +
                 std::to_string(c.num_layers) + " blocks)",
             true);
    }
    TensorView view = tensor_view(f, t, hf);
    if (view.converted_from) converted.insert(*view.converted_from);
    ckpt->tensors_.emplace(std::move(hf), std::move(view));
  }
  for (uint32_t type : converted)
    log::get("model").warn(
        "{}: {} tensors are converted to Q8_0 at load (specd computes F32, F16, BF16, Q8_0, "
        "Q4_0, Q4_K, Q5_K and Q6_K in place)",
        f.path().string(), gguf::type_name(type));
  if (!ckpt->holds_last_layer()) {
    f.fail("metadata key '" + std::string(f.require_string("general.architecture")) +
           ".block_count' = " + std::to_string(c.num_layers) + " but the file holds no tensor blk." +
           std::to_string(c.num_layers - 1) + ".*");
  }
  return ckpt;
}

}  // namespace specd::model

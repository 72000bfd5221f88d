// The per-family fields of config.json (ModelConfig): biases, q/k norms, sliding windows, Gemma
// 2/3, mixtures of experts.
#include <cmath>
#include <cstdint>
#include <string>

#include "model/config_fields.hpp"

namespace specd::model::config_json {
namespace {

// Qwen2/Qwen3's use_sliding_window (windows on the layers from max_window_layers on) is not
// implemented; a window at least as long as the context is plain causal attention.
void refuse_sliding_window(const Fields& f, const std::filesystem::path& path, const ModelConfig& c) {
  if (!f.bool_or("use_sliding_window", false)) return;
  if (!f.has("sliding_window") || f.require_int("sliding_window") >= c.max_position_embeddings) return;
  fail(ErrorCode::kUnsupported, path,
       "use_sliding_window with sliding_window " + std::to_string(f.require_int("sliding_window")) +
           " < max_position_embeddings " + std::to_string(c.max_position_embeddings) +
           ": specd does not implement Qwen's per-layer sliding windows (max_window_layers)");
}

// Mistral-style sliding_window: every layer's attention sees the last `sliding_window`
// positions. null, or at least the context, is plain causal attention.
void read_sliding_window(const Fields& f, ModelConfig& c) {
  if (!f.has("sliding_window")) return;
  const int64_t w = f.require_int("sliding_window");
  require_positive(f, "sliding_window", w);
  if (w < c.max_position_embeddings) c.sliding_window = w;
}

void read_gemma(const Fields& f, const std::filesystem::path& path, ModelConfig& c);

}  // namespace

// What differs between the families: biases, q/k norms, sliding windows, Gemma.
void read_family(const Fields& f, const std::filesystem::path& path, ModelConfig& c) {
  switch (c.arch) {
    case Architecture::kLlama:
      // Llama's attention_bias covers q, k, v and o; mlp_bias would add biases to the MLP.
      c.attention_bias = f.bool_or("attention_bias", false);
      c.attention_out_bias = c.attention_bias;
      if (f.bool_or("mlp_bias", false)) fail(ErrorCode::kUnsupported, path, "mlp_bias: true is not supported");
      break;
    case Architecture::kQwen2:
      c.attention_bias = true;  // Qwen2 always has q/k/v biases and no o_proj bias
      refuse_sliding_window(f, path, c);
      break;
    case Architecture::kQwen3:
    case Architecture::kQwen3Moe:
      // Qwen3: per-head q/k RMSNorm; attention_bias (default false) covers q, k, v and o.
      c.qk_norm = true;
      c.attention_bias = f.bool_or("attention_bias", false);
      c.attention_out_bias = c.attention_bias;
      refuse_sliding_window(f, path, c);
      break;
    case Architecture::kMistral:
    case Architecture::kMixtral:
      read_sliding_window(f, c);
      break;
    case Architecture::kPhi3:
      // Fused qkv_proj and gate_up_proj (weights.cpp), no biases, a window on every layer.
      if (f.number_or("partial_rotary_factor", 1.0) != 1.0)
        fail(ErrorCode::kUnsupported, path,
             "partial_rotary_factor " + std::to_string(f.number_or("partial_rotary_factor", 1.0)) +
                 ": specd rotates whole heads");
      read_sliding_window(f, c);
      break;
    case Architecture::kGemma2:
    case Architecture::kGemma3:
      read_gemma(f, path, c);
      break;
  }
}

namespace {

// Gemma 2 / Gemma 3 (ModelConfig::Gemma): soft caps, the query scale, and which layers slide:
// `layer_types` when given, else Gemma 2's even layers and Gemma 3's all but every
// sliding_window_pattern-th.
void read_gemma(const Fields& f, const std::filesystem::path& path, ModelConfig& c) {
  const bool gemma2 = c.arch == Architecture::kGemma2;
  ModelConfig::Gemma g;
  g.attn_softcap = f.number_or("attn_logit_softcapping", gemma2 ? 50.0 : 0.0);
  g.final_softcap = f.number_or("final_logit_softcapping", gemma2 ? 30.0 : 0.0);
  const double scalar = f.number_or("query_pre_attn_scalar", 256.0);
  if (!(scalar > 0) || g.attn_softcap < 0 || g.final_softcap < 0)
    fail(ErrorCode::kModelFormat, path, "query_pre_attn_scalar must be positive and the soft caps not negative");
  g.query_scale = 1.0 / std::sqrt(scalar);
  if (!gemma2) {
    c.qk_norm = true;
    g.rope_local_theta = f.number_or("rope_local_base_freq", 10000.0);
    if (!(g.rope_local_theta > 0)) fail(ErrorCode::kModelFormat, path, "rope_local_base_freq must be positive");
  }
  c.attention_bias = f.bool_or("attention_bias", false);
  c.attention_out_bias = c.attention_bias;
  c.sliding_window = f.int_or("sliding_window", 4096);
  require_positive(f, "sliding_window", c.sliding_window);
  if (f.has("layer_types")) {  // its length is checked against num_hidden_layers before the table is sized
    const json& types = f.doc().at("layer_types");
    if (!types.is_array() || static_cast<int64_t>(types.size()) != c.num_layers)
      fail(ErrorCode::kModelFormat, path, "layer_types must list one type per layer (num_hidden_layers)");
    c.sliding_layers.assign(types.size(), false);
    for (size_t i = 0; i < types.size(); ++i) {
      const std::string t = types[i].is_string() ? types[i].get<std::string>() : std::string();
      if (t != "sliding_attention" && t != "full_attention") {
        std::string what = "layer_types[";
        what += std::to_string(i);
        what += "] = \"";
        what += clip(t);
        what += "\" (specd runs sliding_attention and full_attention)";
        fail(ErrorCode::kUnsupported, path, what);
      }
      c.sliding_layers[i] = t == "sliding_attention";
    }
  } else {
    c.sliding_period = gemma2 ? 2 : f.int_or("sliding_window_pattern", 6);
    require_positive(f, "sliding_window_pattern", c.sliding_period);
  }
  c.gemma = g;
}

}  // namespace

// The mixture-of-experts fields (ModelConfig::Moe) of Qwen3-MoE and Mixtral. Layouts specd does
// not run (dense layers between sparse ones, shared experts) are refused, naming the field.
void read_moe(const Fields& f, const std::filesystem::path& path, ModelConfig& c) {
  ModelConfig::Moe m;
  if (c.arch == Architecture::kQwen3Moe) {
    m.num_experts = f.require_int("num_experts");
    m.expert_intermediate = f.require_int("moe_intermediate_size");
    m.norm_topk_prob = f.bool_or("norm_topk_prob", false);  // transformers' Qwen3MoeConfig default
    require_positive(f, "moe_intermediate_size", m.expert_intermediate);
    if (f.int_or("decoder_sparse_step", 1) != 1)
      fail(ErrorCode::kUnsupported, path,
           "decoder_sparse_step " + std::to_string(f.int_or("decoder_sparse_step", 1)) +
               ": specd runs MoE models whose every layer is sparse (decoder_sparse_step 1)");
    if (f.has("mlp_only_layers") &&
        !(f.doc().at("mlp_only_layers").is_array() && f.doc().at("mlp_only_layers").empty()))
      fail(ErrorCode::kUnsupported, path,
           "mlp_only_layers is not empty: specd runs MoE models whose every layer is sparse");
    if (f.int_or("shared_expert_intermediate_size", 0) > 0)
      fail(ErrorCode::kUnsupported, path, "shared_expert_intermediate_size: shared experts are not supported");
  } else if (c.arch == Architecture::kMixtral) {
    m.num_experts = f.int_or("num_local_experts", 8);
    m.expert_intermediate = c.intermediate_size;
    m.norm_topk_prob = true;  // Mixtral always renormalizes its top-k weights
  } else {
    return;
  }
  m.experts_per_token = f.int_or("num_experts_per_tok", 2);
  require_positive(f, c.arch == Architecture::kMixtral ? "num_local_experts" : "num_experts", m.num_experts);
  require_positive(f, "num_experts_per_tok", m.experts_per_token);
  if (m.experts_per_token > m.num_experts)
    fail(ErrorCode::kModelFormat, path,
         "num_experts_per_tok " + std::to_string(m.experts_per_token) + " exceeds the " +
             std::to_string(m.num_experts) + " experts");
  c.moe = m;
}

}  // namespace specd::model::config_json

#include "model/weights.hpp"

#include <cstdint>
#include <string>

#include "specd/error.hpp"

namespace specd::model {

const float* LlamaWeights::f32(const std::string& name, const std::vector<int64_t>& shape) {
  const TensorView& t = checkpoint_->require(name, shape);
  const bool aligned = reinterpret_cast<uintptr_t>(t.data) % alignof(float) == 0;
  if (t.dtype == DType::kF32 && aligned) return reinterpret_cast<const float*>(t.data);
  std::unique_ptr<float[]> buf(new float[static_cast<size_t>(t.numel())]);
  Checkpoint::to_f32(t, buf.get());
  owned_bytes_ += static_cast<size_t>(t.numel()) * sizeof(float);
  owned_.push_back(std::move(buf));
  return owned_.back().get();
}

std::shared_ptr<const LlamaWeights> LlamaWeights::load(std::shared_ptr<const Checkpoint> checkpoint,
                                                       int64_t num_layers) {
  SPECD_CHECK(checkpoint != nullptr, ErrorCode::kInternal, "LlamaWeights::load: null checkpoint");
  std::shared_ptr<LlamaWeights> w(new LlamaWeights());
  w->checkpoint_ = std::move(checkpoint);
  const ModelConfig& c = w->config();
  if (num_layers < 0) num_layers = c.num_layers;
  if (num_layers == 0 || num_layers > c.num_layers) {
    throw Error(ErrorCode::kInvalidArgument,
                "cannot build a model of " + std::to_string(num_layers) + " layers from " +
                    w->checkpoint_->dir().string() + ", which has " + std::to_string(c.num_layers));
  }
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t q_out = c.num_heads * c.head_dim, kv_out = c.num_kv_heads * c.head_dim;

  w->embed_ = w->f32("model.embed_tokens.weight", {V, H});
  w->final_norm_ = w->f32("model.norm.weight", {H});
  if (c.tie_word_embeddings && w->checkpoint_->find("lm_head.weight") == nullptr) {
    w->lm_head_ = w->embed_;
  } else {
    w->lm_head_ = w->f32("lm_head.weight", {V, H});
  }
  w->layers_.resize(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    LayerWeights& l = w->layers_[static_cast<size_t>(i)];
    l.attn_norm = w->f32(p + "input_layernorm.weight", {H});
    l.wq = w->f32(p + "self_attn.q_proj.weight", {q_out, H});
    l.wk = w->f32(p + "self_attn.k_proj.weight", {kv_out, H});
    l.wv = w->f32(p + "self_attn.v_proj.weight", {kv_out, H});
    if (c.attention_bias) {
      l.bq = w->f32(p + "self_attn.q_proj.bias", {q_out});
      l.bk = w->f32(p + "self_attn.k_proj.bias", {kv_out});
      l.bv = w->f32(p + "self_attn.v_proj.bias", {kv_out});
    }
    l.wo = w->f32(p + "self_attn.o_proj.weight", {H, q_out});
    if (c.attention_out_bias) l.bo = w->f32(p + "self_attn.o_proj.bias", {H});
    l.mlp_norm = w->f32(p + "post_attention_layernorm.weight", {H});
    l.w_gate = w->f32(p + "mlp.gate_proj.weight", {I, H});
    l.w_up = w->f32(p + "mlp.up_proj.weight", {I, H});
    l.w_down = w->f32(p + "mlp.down_proj.weight", {H, I});
  }
  return w;
}

size_t LlamaWeights::decode_bytes(int64_t num_layers) const {
  const ModelConfig& c = config();
  const size_t H = static_cast<size_t>(c.hidden_size), I = static_cast<size_t>(c.intermediate_size);
  const size_t q_out = static_cast<size_t>(c.num_heads * c.head_dim);
  const size_t kv_out = static_cast<size_t>(c.num_kv_heads * c.head_dim);
  size_t per_layer = 2 * H + q_out * H + 2 * kv_out * H + H * q_out + 3 * I * H;
  if (c.attention_bias) per_layer += q_out + 2 * kv_out;
  if (c.attention_out_bias) per_layer += H;
  const size_t floats = per_layer * static_cast<size_t>(num_layers) + H +
                        static_cast<size_t>(c.vocab_size) * H;
  return floats * sizeof(float);
}

}  // namespace specd::model

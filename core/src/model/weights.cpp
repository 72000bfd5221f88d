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

void LlamaWeights::load_layer(const std::string& p, LayerWeights& l) {
  const ModelConfig& c = config();
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t q_out = c.num_heads * c.head_dim, kv_out = c.num_kv_heads * c.head_dim;
  l.attn_norm = f32(p + "input_layernorm.weight", {H});
  l.wq = f32(p + "self_attn.q_proj.weight", {q_out, H});
  l.wk = f32(p + "self_attn.k_proj.weight", {kv_out, H});
  l.wv = f32(p + "self_attn.v_proj.weight", {kv_out, H});
  if (c.attention_bias) {
    l.bq = f32(p + "self_attn.q_proj.bias", {q_out});
    l.bk = f32(p + "self_attn.k_proj.bias", {kv_out});
    l.bv = f32(p + "self_attn.v_proj.bias", {kv_out});
  }
  l.wo = f32(p + "self_attn.o_proj.weight", {H, q_out});
  if (c.attention_out_bias) l.bo = f32(p + "self_attn.o_proj.bias", {H});
  l.mlp_norm = f32(p + "post_attention_layernorm.weight", {H});
  l.w_gate = f32(p + "mlp.gate_proj.weight", {I, H});
  l.w_up = f32(p + "mlp.up_proj.weight", {I, H});
  l.w_down = f32(p + "mlp.down_proj.weight", {H, I});
}

std::shared_ptr<const LlamaWeights> LlamaWeights::load_mtp(std::shared_ptr<const LlamaWeights> target,
                                                           int64_t module) {
  SPECD_CHECK(target != nullptr, ErrorCode::kInternal, "LlamaWeights::load_mtp: null target");
  SPECD_CHECK(!target->is_mtp(), ErrorCode::kInvalidArgument, "load_mtp: the target is itself an MTP module");
  const ModelConfig& c = target->config();
  if (module < 0 || module >= c.num_mtp_modules) {
    throw Error(ErrorCode::kInvalidArgument, "MTP module " + std::to_string(module) + " requested but " +
                                                 target->checkpoint_->dir().string() + " has " +
                                                 std::to_string(c.num_mtp_modules) + " MTP modules");
  }
  std::shared_ptr<LlamaWeights> w(new LlamaWeights());
  w->checkpoint_ = target->checkpoint_;
  w->embed_ = target->embed_;
  w->final_norm_ = target->final_norm_;
  w->lm_head_ = target->lm_head_;
  const int64_t H = c.hidden_size;
  const std::string p = "mtp." + std::to_string(module) + ".";
  w->enorm_ = w->f32(p + "enorm.weight", {H});
  w->hnorm_ = w->f32(p + "hnorm.weight", {H});
  w->eh_proj_ = w->f32(p + "eh_proj.weight", {H, 2 * H});
  w->layers_.resize(1);
  w->load_layer(p + "block.", w->layers_[0]);
  w->base_ = std::move(target);
  return w;
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
  const int64_t H = c.hidden_size, V = c.vocab_size;
  w->embed_ = w->f32("model.embed_tokens.weight", {V, H});
  w->final_norm_ = w->f32("model.norm.weight", {H});
  if (c.tie_word_embeddings && w->checkpoint_->find("lm_head.weight") == nullptr) {
    w->lm_head_ = w->embed_;
  } else {
    w->lm_head_ = w->f32("lm_head.weight", {V, H});
  }
  w->layers_.resize(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i)
    w->load_layer("model.layers." + std::to_string(i) + ".", w->layers_[static_cast<size_t>(i)]);
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
  size_t floats = per_layer * static_cast<size_t>(num_layers) + H + static_cast<size_t>(c.vocab_size) * H;
  if (is_mtp()) floats += 2 * H + 2 * H * H;  // enorm, hnorm, eh_proj
  return floats * sizeof(float);
}

}  // namespace specd::model

#include "model/weights.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "specd/error.hpp"
#include "specd/kernels/convert.hpp"

namespace specd::model {
namespace {

constexpr kernels::Device kCpu = kernels::Device::kCpu;
constexpr int64_t kConvertChunk = int64_t{1} << 20;  // elements widened at a time while converting

}  // namespace

std::optional<DType> resolve_weight_dtype(const std::string& requested, const std::string& what) {
  if (requested == "auto") return std::nullopt;
  try {
    return kernels::parse_dtype(requested);
  } catch (const Error&) {
    throw Error(ErrorCode::kInvalidArgument,
                what + ": unknown dtype \"" + requested + "\" (expected auto, f32, f16, bf16, q8_0 or q4_0)");
  }
}

std::byte* LlamaWeights::allocate(size_t bytes) {
  owned_.push_back(kernels::allocate_aligned(bytes));
  owned_bytes_ += bytes;
  return owned_.back().get();
}

WeightView LlamaWeights::matrix(const std::string& name, int64_t rows, int64_t cols, std::optional<DType> want) {
  const TensorView& t = checkpoint_->require(name, {rows, cols});
  const DType dtype = want.value_or(t.dtype);
  const size_t row = kernels::row_bytes_checked(dtype, cols, checkpoint_->dir().string() + ": " + name);
  const size_t align = dtype == DType::kF32 ? 4 : 2;  // the widest scalar the kernels read
  const bool stored = t.in_place() && t.dtype == dtype;
  if (placement_ == WeightPlacement::kMap && stored && reinterpret_cast<uintptr_t>(t.data) % align == 0)
    return {dtype, t.data, rows, cols};
  std::byte* dst = allocate(row * static_cast<size_t>(rows));
  if (stored) {
    std::memcpy(dst, t.data, t.nbytes);
  } else {
    // Widen to F32 and narrow/quantize, a chunk of whole rows at a time.
    const int64_t rows_per_chunk = std::max<int64_t>(1, kConvertChunk / cols);
    std::vector<float> tmp(static_cast<size_t>(std::min(rows, rows_per_chunk) * cols));
    const size_t src_row = t.nbytes / static_cast<size_t>(rows);
    for (int64_t r0 = 0; r0 < rows; r0 += rows_per_chunk) {
      const int64_t nr = std::min(rows_per_chunk, rows - r0);
      Checkpoint::to_f32(t, t.data + static_cast<size_t>(r0) * src_row, tmp.data(), nr * cols);
      kernels::from_f32(kCpu, tmp.data(), dtype, dst + static_cast<size_t>(r0) * row, nr * cols);
    }
  }
  return {dtype, dst, rows, cols};
}

const float* LlamaWeights::vector(const std::string& name, int64_t n) {
  const TensorView& t = checkpoint_->require(name, {n});
  auto* dst = reinterpret_cast<float*>(allocate(static_cast<size_t>(n) * sizeof(float)));
  Checkpoint::to_f32(t, dst);
  return dst;
}

void LlamaWeights::load_layer(const std::string& p, LayerWeights& l) {
  const ModelConfig& c = config();
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t q_out = c.num_heads * c.head_dim, kv_out = c.num_kv_heads * c.head_dim;
  l.attn_norm = vector(p + "input_layernorm.weight", H);
  l.wq = matrix(p + "self_attn.q_proj.weight", q_out, H, requested_);
  l.wk = matrix(p + "self_attn.k_proj.weight", kv_out, H, requested_);
  l.wv = matrix(p + "self_attn.v_proj.weight", kv_out, H, requested_);
  if (c.attention_bias) {
    l.bq = vector(p + "self_attn.q_proj.bias", q_out);
    l.bk = vector(p + "self_attn.k_proj.bias", kv_out);
    l.bv = vector(p + "self_attn.v_proj.bias", kv_out);
  }
  if (c.qk_norm) {
    l.q_norm = vector(p + "self_attn.q_norm.weight", c.head_dim);
    l.k_norm = vector(p + "self_attn.k_norm.weight", c.head_dim);
  }
  l.wo = matrix(p + "self_attn.o_proj.weight", H, q_out, requested_);
  if (c.attention_out_bias) l.bo = vector(p + "self_attn.o_proj.bias", H);
  l.mlp_norm = vector(p + "post_attention_layernorm.weight", H);
  l.w_gate = matrix(p + "mlp.gate_proj.weight", I, H, requested_);
  l.w_up = matrix(p + "mlp.up_proj.weight", I, H, requested_);
  l.w_down = matrix(p + "mlp.down_proj.weight", H, I, requested_);
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
  w->dtype_ = target->dtype_;
  w->requested_ = target->requested_;
  w->placement_ = target->placement_;
  w->embed_ = target->embed_;
  w->final_norm_ = target->final_norm_;
  w->lm_head_ = target->lm_head_;
  const int64_t H = c.hidden_size;
  const std::string p = "mtp." + std::to_string(module) + ".";
  w->enorm_ = w->vector(p + "enorm.weight", H);
  w->hnorm_ = w->vector(p + "hnorm.weight", H);
  w->eh_proj_ = w->matrix(p + "eh_proj.weight", H, 2 * H, w->requested_);
  w->layers_.resize(1);
  w->load_layer(p + "block.", w->layers_[0]);
  w->base_ = std::move(target);
  return w;
}

std::shared_ptr<const LlamaWeights> LlamaWeights::load(std::shared_ptr<const Checkpoint> checkpoint,
                                                       int64_t num_layers, std::optional<DType> dtype,
                                                       WeightPlacement placement) {
  SPECD_CHECK(checkpoint != nullptr, ErrorCode::kInternal, "LlamaWeights::load: null checkpoint");
  std::shared_ptr<LlamaWeights> w(new LlamaWeights());
  w->checkpoint_ = std::move(checkpoint);
  w->requested_ = dtype;
  w->placement_ = placement;
  const ModelConfig& c = w->config();
  if (num_layers < 0) num_layers = c.num_layers;
  if (num_layers == 0 || num_layers > c.num_layers) {
    throw Error(ErrorCode::kInvalidArgument,
                "cannot build a model of " + std::to_string(num_layers) + " layers from " +
                    w->checkpoint_->dir().string() + ", which has " + std::to_string(c.num_layers));
  }
  const int64_t H = c.hidden_size, V = c.vocab_size;
  // Models quantized at load keep the embeddings and the LM head in f16 (see the header).
  std::optional<DType> head_dtype = dtype;
  if (dtype && is_quantized(*dtype)) head_dtype = DType::kF16;
  const bool tied = c.tie_word_embeddings && w->checkpoint_->find("lm_head.weight") == nullptr;
  w->embed_ = w->matrix("model.embed_tokens.weight", V, H, head_dtype);
  w->final_norm_ = w->vector("model.norm.weight", H);
  w->lm_head_ = tied ? w->embed_ : w->matrix("lm_head.weight", V, H, head_dtype);
  w->layers_.resize(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i)
    w->load_layer("model.layers." + std::to_string(i) + ".", w->layers_[static_cast<size_t>(i)]);
  w->dtype_ = dtype ? *dtype : w->layers_dtype();
  return w;
}

DType LlamaWeights::layers_dtype() const {
  size_t bytes[kernels::kNumDTypes] = {};
  for (const LayerWeights& l : layers_)
    for (const WeightView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      bytes[static_cast<int>(m->dtype)] += m->bytes();
  return static_cast<DType>(std::max_element(std::begin(bytes), std::end(bytes)) - std::begin(bytes));
}

size_t LlamaWeights::decode_bytes(int64_t num_layers) const {
  const ModelConfig& c = config();
  const size_t H = static_cast<size_t>(c.hidden_size);
  const size_t q_out = static_cast<size_t>(c.num_heads * c.head_dim);
  const size_t kv_out = static_cast<size_t>(c.num_kv_heads * c.head_dim);
  size_t bytes = 0;
  for (int64_t i = 0; i < num_layers; ++i) {
    const LayerWeights& l = layer(i);
    bytes += l.wq.bytes() + l.wk.bytes() + l.wv.bytes() + l.wo.bytes() + l.w_gate.bytes() + l.w_up.bytes() +
             l.w_down.bytes() + 2 * H * sizeof(float);
    if (c.attention_bias) bytes += (q_out + 2 * kv_out) * sizeof(float);
    if (c.attention_out_bias) bytes += H * sizeof(float);
    if (c.qk_norm) bytes += 2 * static_cast<size_t>(c.head_dim) * sizeof(float);
  }
  bytes += H * sizeof(float) + lm_head_.bytes();
  if (is_mtp()) bytes += 2 * H * sizeof(float) + eh_proj_.bytes();
  return bytes;
}

}  // namespace specd::model

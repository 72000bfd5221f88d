#include "model/weights.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "model/gguf.hpp"
#include "specd/error.hpp"
#include "specd/kernels/convert.hpp"

namespace specd::model {
namespace {

constexpr kernels::Device kCpu = kernels::Device::kCpu;
constexpr int64_t kConvertChunk = int64_t{1} << 20;  // elements widened at a time while converting

// The block a tensor's bytes are stored in: elements per block and its name.
struct StoredBlock {
  int64_t elems = 1;
  std::string type;
};

StoredBlock stored_block(const TensorView& t) {
  if (t.converted_from) return {gguf::type_info(*t.converted_from).block, gguf::type_name(*t.converted_from)};
  return {kernels::block_elems(t.dtype), std::string(kernels::dtype_name(t.dtype))};
}

// Bytes of the first `elems` elements of a row of `t` (elems on a block boundary).
size_t stored_bytes(const TensorView& t, int64_t elems) {
  if (t.converted_from) {
    const gguf::TypeInfo& info = gguf::type_info(*t.converted_from);
    return static_cast<size_t>(elems / info.block) * info.bytes;
  }
  return kernels::row_bytes(t.dtype, elems);
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

ShardDims ShardDims::of(const ModelConfig& c, TensorShard shard) {
  SPECD_CHECK(shard.size >= 1 && shard.rank >= 0 && shard.rank < shard.size, ErrorCode::kInternal,
              "ShardDims: rank " + std::to_string(shard.rank) + " of " + std::to_string(shard.size));
  const int64_t n = shard.size;
  auto require_divides = [&](int64_t value, const char* field, const char* why) {
    if (value % n != 0) {
      throw Error(ErrorCode::kInvalidArgument, "tensor parallelism over " + std::to_string(n) + " ranks: " + field +
                                                   " = " + std::to_string(value) + " in " + c.config_path.string() +
                                                   " is not divisible by " + std::to_string(n) + " (" + why +
                                                   "); choose a tensor_parallel_size that divides it");
    }
  };
  require_divides(c.num_heads, "num_attention_heads", "each rank holds whole attention heads");
  require_divides(c.num_kv_heads, "num_key_value_heads", "each rank holds whole KV heads");
  require_divides(c.mlp_width(), c.arch == Architecture::kQwen3Moe ? "moe_intermediate_size" : "intermediate_size",
                  "each rank holds an equal part of the MLP");
  ShardDims d;
  d.num_heads = c.num_heads / n;
  d.num_kv_heads = c.num_kv_heads / n;
  d.intermediate = c.mlp_width() / n;
  d.vocab_stride = ceil_div(c.vocab_size, n);
  d.vocab_begin = std::min(c.vocab_size, shard.rank * d.vocab_stride);
  d.vocab_rows = std::min(c.vocab_size - d.vocab_begin, d.vocab_stride);
  if (d.vocab_rows <= 0) {
    throw Error(ErrorCode::kInvalidArgument, "tensor parallelism over " + std::to_string(n) + " ranks: vocab_size " +
                                                 std::to_string(c.vocab_size) + " in " + c.config_path.string() +
                                                 " leaves rank " + std::to_string(shard.rank) + " no vocabulary rows");
  }
  return d;
}

namespace {

// llama.cpp's use_more_bits: the first and last eighth of the layers and every third between.
bool more_bits(int64_t i, int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

}  // namespace

std::optional<DType> WeightDTypes::layer(LayerMatrix m, int64_t index, int64_t num_layers) const {
  if (mix && index >= 0 && (m == LayerMatrix::kV || m == LayerMatrix::kDown) && more_bits(index, num_layers))
    return DType::kQ6_K;
  return base;
}

std::optional<DType> WeightDTypes::embeddings() const {
  if (base && kernels::is_quantized(*base)) return DType::kF16;
  return base;
}

std::optional<DType> WeightDTypes::lm_head() const {
  return mix ? std::optional(DType::kQ6_K) : embeddings();
}

std::string WeightDTypes::name() const {
  if (!base) return "auto";
  return std::string(kernels::dtype_name(*base)) + (mix ? "_m" : "");
}

WeightDTypes resolve_weight_dtype(const std::string& requested, const std::string& what) {
  if (requested == "auto") return std::nullopt;
  if (requested == "q4_k_m") return WeightDTypes::k_mix(DType::kQ4_K);
  if (requested == "q5_k_m") return WeightDTypes::k_mix(DType::kQ5_K);
  try {
    return kernels::parse_dtype(requested);
  } catch (const Error&) {
    throw Error(ErrorCode::kInvalidArgument,
                what + ": unknown dtype \"" + requested +
                    "\" (expected auto, f32, f16, bf16, q8_0, q4_0, q2_k, q3_k, q4_k, q5_k, q6_k, q4_k_m or q5_k_m)");
  }
}

std::byte* LlamaWeights::allocate(size_t bytes) {
  owned_.push_back(kernels::allocate_aligned(bytes));
  owned_bytes_ += bytes;
  return owned_.back().get();
}

WeightView LlamaWeights::matrix(const std::string& name, int64_t rows, int64_t cols, std::optional<DType> want,
                                Slice rows_part, Slice cols_part) {
  return matrix_of(checkpoint_->require(name, {rows, cols}), rows, cols, want, rows_part, cols_part);
}

WeightView LlamaWeights::matrix_of(const TensorView& t, int64_t rows, int64_t cols, std::optional<DType> want,
                                   Slice rows_part, Slice cols_part) {
  const std::string& name = t.name;
  const DType dtype = want.value_or(t.dtype);
  const int64_t r0 = rows_part.begin, nr = rows_part.count < 0 ? rows : rows_part.count;
  const int64_t c0 = cols_part.begin, nc = cols_part.count < 0 ? cols : cols_part.count;
  const std::string what = checkpoint_->dir().string() + ": " + name;
  if (nc != cols) {  // row-parallel: this rank's input columns, whole blocks of both types
    const StoredBlock stored = stored_block(t);
    const int64_t compute_block = kernels::block_elems(dtype);
    for (const auto& [block, type] :
         {std::pair{stored.elems, stored.type}, std::pair{compute_block, std::string(kernels::dtype_name(dtype))}}) {
      if (c0 % block != 0 || nc % block != 0) {
        throw Error(ErrorCode::kInvalidArgument,
                    what + ": tensor parallelism over " + std::to_string(shard_.size) + " ranks gives each rank " +
                        std::to_string(nc) + " of its " + std::to_string(cols) + " input columns, which splits its " +
                        type + " blocks of " + std::to_string(block) +
                        " elements (quantized weights are split along whole blocks; choose a tensor_parallel_size "
                        "that keeps num_attention_heads * head_dim and intermediate_size per rank multiples of " +
                        std::to_string(block) + ")");
      }
    }
  }
  const size_t row = kernels::row_bytes_checked(dtype, nc, what);
  const size_t align = dtype == DType::kF32 ? 4 : 2;  // the widest scalar the kernels read
  const bool stored = t.in_place() && t.dtype == dtype;
  const size_t src_row = t.nbytes / static_cast<size_t>(rows);
  const std::byte* src = t.data + static_cast<size_t>(r0) * src_row + stored_bytes(t, c0);
  const bool whole_rows = nc == cols;
  if (placement_ == WeightPlacement::kMap && stored && whole_rows && reinterpret_cast<uintptr_t>(src) % align == 0)
    return {dtype, src, nr, nc};
  std::byte* dst = allocate(row * static_cast<size_t>(nr));
  if (stored && whole_rows) {
    std::memcpy(dst, src, row * static_cast<size_t>(nr));
  } else if (stored) {
    for (int64_t r = 0; r < nr; ++r)
      std::memcpy(dst + static_cast<size_t>(r) * row, src + static_cast<size_t>(r) * src_row, row);
  } else {
    // Widen to F32 and narrow/quantize, a chunk of whole (part) rows at a time.
    const int64_t rows_per_chunk = std::max<int64_t>(1, kConvertChunk / nc);
    std::vector<float> tmp(static_cast<size_t>(std::min(nr, rows_per_chunk) * nc));
    for (int64_t r0c = 0; r0c < nr; r0c += rows_per_chunk) {
      const int64_t n = std::min(rows_per_chunk, nr - r0c);
      if (whole_rows) {
        Checkpoint::to_f32(t, src + static_cast<size_t>(r0c) * src_row, tmp.data(), n * nc);
      } else {
        for (int64_t r = 0; r < n; ++r)
          Checkpoint::to_f32(t, src + static_cast<size_t>(r0c + r) * src_row, tmp.data() + r * nc, nc);
      }
      kernels::from_f32(kCpu, tmp.data(), dtype, dst + static_cast<size_t>(r0c) * row, n * nc);
    }
  }
  return {dtype, dst, nr, nc};
}

const float* LlamaWeights::vector(const std::string& name, int64_t n, Slice part, float add) {
  const TensorView& t = checkpoint_->require(name, {n});
  const int64_t count = part.count < 0 ? n : part.count;
  auto* dst = reinterpret_cast<float*>(allocate(static_cast<size_t>(count) * sizeof(float)));
  Checkpoint::to_f32(t, t.data + stored_bytes(t, part.begin), dst, count);
  if (add != 0.0f)
    for (int64_t i = 0; i < count; ++i) dst[i] += add;
  return dst;
}

const float* LlamaWeights::norm(const std::string& name, int64_t n) {
  // llama.cpp's converter writes Gemma's norms as 1 + w already.
  return vector(name, n, {}, config().gemma && !checkpoint_->is_gguf() ? 1.0f : 0.0f);
}

void LlamaWeights::load_layer(const std::string& p, int64_t index, LayerWeights& l, int64_t in_features) {
  const ModelConfig& c = config();
  const auto want = [&](LayerMatrix m) { return requested_.layer(m, index, c.num_layers); };
  const int64_t H = c.hidden_size, I = c.intermediate_size, hd = c.head_dim;
  const int64_t in = in_features > 0 ? in_features : H;
  const int64_t q_out = c.num_heads * hd, kv_out = c.num_kv_heads * hd;
  // This rank's heads, KV heads and MLP columns (all of them without tensor parallelism).
  const int64_t rank = shard_.rank;
  const Slice q_part{rank * dims_.num_heads * hd, dims_.num_heads * hd};
  const Slice kv_part{rank * dims_.num_kv_heads * hd, dims_.num_kv_heads * hd};
  const Slice mlp_part{rank * dims_.intermediate, dims_.intermediate};
  l.attn_norm = norm(p + "input_layernorm.weight", H);
  if (c.arch == Architecture::kPhi3) {  // q, k and v as row ranges of one fused projection
    const std::string qkv = p + "self_attn.qkv_proj.weight";
    const int64_t rows = q_out + 2 * kv_out;
    l.wq = matrix(qkv, rows, in, want(LayerMatrix::kQ), q_part);
    l.wk = matrix(qkv, rows, in, want(LayerMatrix::kK), {q_out + kv_part.begin, kv_part.count});
    l.wv = matrix(qkv, rows, in, want(LayerMatrix::kV), {q_out + kv_out + kv_part.begin, kv_part.count});
  } else {
    l.wq = matrix(p + "self_attn.q_proj.weight", q_out, in, want(LayerMatrix::kQ), q_part);
    l.wk = matrix(p + "self_attn.k_proj.weight", kv_out, in, want(LayerMatrix::kK), kv_part);
    l.wv = matrix(p + "self_attn.v_proj.weight", kv_out, in, want(LayerMatrix::kV), kv_part);
  }
  if (c.attention_bias) {
    l.bq = vector(p + "self_attn.q_proj.bias", q_out, q_part);
    l.bk = vector(p + "self_attn.k_proj.bias", kv_out, kv_part);
    l.bv = vector(p + "self_attn.v_proj.bias", kv_out, kv_part);
  }
  if (c.qk_norm) {
    l.q_norm = norm(p + "self_attn.q_norm.weight", c.head_dim);
    l.k_norm = norm(p + "self_attn.k_norm.weight", c.head_dim);
  }
  l.wo = matrix(p + "self_attn.o_proj.weight", H, q_out, want(LayerMatrix::kO), {}, q_part);
  // Row-parallel: the ranks' partial outputs are summed, so the bias is added by one of them.
  if (c.attention_out_bias && rank == 0) l.bo = vector(p + "self_attn.o_proj.bias", H);
  if (c.gemma) {  // post_attention_layernorm is Gemma's attention output norm
    l.post_attn_norm = norm(p + "post_attention_layernorm.weight", H);
    l.mlp_norm = norm(p + "pre_feedforward_layernorm.weight", H);
    l.post_mlp_norm = norm(p + "post_feedforward_layernorm.weight", H);
  } else {
    l.mlp_norm = vector(p + "post_attention_layernorm.weight", H);
  }
  if (c.moe && index >= 0) {
    load_experts(p, index, l);
    return;
  }
  if (c.arch == Architecture::kPhi3) {  // gate rows first, then up rows
    const std::string gate_up = p + "mlp.gate_up_proj.weight";
    l.w_gate = matrix(gate_up, 2 * I, H, want(LayerMatrix::kGate), mlp_part);
    l.w_up = matrix(gate_up, 2 * I, H, want(LayerMatrix::kUp), {I + mlp_part.begin, mlp_part.count});
  } else {
    l.w_gate = matrix(p + "mlp.gate_proj.weight", I, H, want(LayerMatrix::kGate), mlp_part);
    l.w_up = matrix(p + "mlp.up_proj.weight", I, H, want(LayerMatrix::kUp), mlp_part);
  }
  l.w_down = matrix(p + "mlp.down_proj.weight", H, I, want(LayerMatrix::kDown), {}, mlp_part);
}

std::shared_ptr<const LlamaWeights> LlamaWeights::load_mtp(std::shared_ptr<const LlamaWeights> target, int64_t module) {
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
  w->shard_ = target->shard_;
  w->dims_ = target->dims_;
  w->embed_ = target->embed_;
  w->final_norm_ = target->final_norm_;
  w->lm_head_ = target->lm_head_;
  const int64_t H = c.hidden_size;
  const std::string p = "mtp." + std::to_string(module) + ".";
  w->enorm_ = w->vector(p + "enorm.weight", H);
  w->hnorm_ = w->vector(p + "hnorm.weight", H);
  w->eh_proj_ = w->matrix(p + "eh_proj.weight", H, 2 * H, w->requested_.base);
  w->layers_.resize(1);
  w->load_layer(p + "block.", -1, w->layers_[0]);
  w->base_ = std::move(target);
  return w;
}

std::shared_ptr<const LlamaWeights> LlamaWeights::load(std::shared_ptr<const Checkpoint> checkpoint, int64_t num_layers,
                                                       WeightDTypes dtype, WeightPlacement placement,
                                                       TensorShard shard) {
  SPECD_CHECK(checkpoint != nullptr, ErrorCode::kInternal, "LlamaWeights::load: null checkpoint");
  std::shared_ptr<LlamaWeights> w(new LlamaWeights());
  w->checkpoint_ = std::move(checkpoint);
  w->requested_ = dtype;
  w->placement_ = placement;
  w->shard_ = shard;
  const ModelConfig& c = w->config();
  if (c.eagle3)
    throw Error(ErrorCode::kInvalidArgument, w->checkpoint_->dir().string() +
                                                 " is an EAGLE-3 draft head (LlamaForCausalLMEagle3), not a model "
                                                 "that runs on its own");
  w->dims_ = ShardDims::of(c, shard);
  if (num_layers < 0) num_layers = c.num_layers;
  if (num_layers == 0 || num_layers > c.num_layers) {
    throw Error(ErrorCode::kInvalidArgument, "cannot build a model of " + std::to_string(num_layers) + " layers from " +
                                                 w->checkpoint_->dir().string() + ", which has " +
                                                 std::to_string(c.num_layers));
  }
  const int64_t H = c.hidden_size, V = c.vocab_size;
  const bool tied = c.tie_word_embeddings && w->checkpoint_->find("lm_head.weight") == nullptr;
  const Slice vocab_part{w->dims_.vocab_begin, w->dims_.vocab_rows};
  w->embed_ = w->matrix("model.embed_tokens.weight", V, H, tied ? dtype.lm_head() : dtype.embeddings(), vocab_part);
  w->final_norm_ = w->norm("model.norm.weight", H);
  w->lm_head_ = tied ? w->embed_ : w->matrix("lm_head.weight", V, H, dtype.lm_head(), vocab_part);
  w->layers_.resize(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i)
    w->load_layer("model.layers." + std::to_string(i) + ".", i, w->layers_[static_cast<size_t>(i)]);
  w->dtype_ = dtype.base && !dtype.mix ? *dtype.base : w->layers_dtype();
  return w;
}

DType LlamaWeights::layers_dtype() const {
  size_t bytes[kernels::kNumDTypes] = {};
  for (const LayerWeights& l : layers_) {
    for (const WeightView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down})
      if (m->data != nullptr) bytes[static_cast<int>(m->dtype)] += m->bytes();
    for (const ExpertWeights& e : l.experts)
      for (const WeightView* m : {&e.gate, &e.up, &e.down}) bytes[static_cast<int>(m->dtype)] += m->bytes();
  }
  return static_cast<DType>(std::max_element(std::begin(bytes), std::end(bytes)) - std::begin(bytes));
}

size_t LlamaWeights::decode_bytes(int64_t num_layers) const {
  const ModelConfig& c = config();
  const size_t H = static_cast<size_t>(c.hidden_size);
  const size_t q_out = static_cast<size_t>(dims_.num_heads * c.head_dim);
  const size_t kv_out = static_cast<size_t>(dims_.num_kv_heads * c.head_dim);
  size_t bytes = 0;
  for (int64_t i = 0; i < num_layers; ++i) {
    const LayerWeights& l = layer(i);
    bytes += l.wq.bytes() + l.wk.bytes() + l.wv.bytes() + l.wo.bytes() + 2 * H * sizeof(float);
    if (l.experts.empty()) {
      bytes += l.w_gate.bytes() + l.w_up.bytes() + l.w_down.bytes();
    } else {
      bytes += l.router.bytes() + expert_bytes(i) * static_cast<size_t>(c.moe->experts_per_token);
    }
    if (c.attention_bias) bytes += (q_out + 2 * kv_out) * sizeof(float);
    if (l.bo != nullptr) bytes += H * sizeof(float);
    if (c.qk_norm) bytes += 2 * static_cast<size_t>(c.head_dim) * sizeof(float);
    if (l.post_attn_norm != nullptr) bytes += 2 * H * sizeof(float);
  }
  bytes += H * sizeof(float) + lm_head_.bytes();
  if (is_mtp()) bytes += 2 * H * sizeof(float) + eh_proj_.bytes();
  return bytes;
}

}  // namespace specd::model

#include "model/llama.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "model/device_weights.hpp"
#include "specd/error.hpp"
#include "specd/kernels/attention.hpp"
#include "specd/kernels/embedding.hpp"
#include "specd/kernels/matmul.hpp"
#include "specd/kernels/rmsnorm.hpp"
#include "specd/kernels/rope.hpp"

namespace specd::model {
namespace {

constexpr kernels::Device kCpu = kernels::Device::kCpu;

kernels::RopeScalingParams to_kernel_scaling(const RopeScaling& r) {
  kernels::RopeScalingParams p;
  switch (r.type) {
    case RopeScaling::Type::kNone:
      p.kind = kernels::RopeScalingParams::Kind::kNone;
      break;
    case RopeScaling::Type::kLinear:
      p.kind = kernels::RopeScalingParams::Kind::kLinear;
      break;
    case RopeScaling::Type::kLlama3:
      p.kind = kernels::RopeScalingParams::Kind::kLlama3;
      break;
    case RopeScaling::Type::kLongRope:  // per-frequency factors, applied by LlamaModel
      p.kind = kernels::RopeScalingParams::Kind::kNone;
      break;
  }
  p.factor = r.factor;
  p.low_freq_factor = r.low_freq_factor;
  p.high_freq_factor = r.high_freq_factor;
  p.original_max_position_embeddings = static_cast<double>(r.original_max_position_embeddings);
  return p;
}

// rows [n, head_dim] from llama.cpp's interleaved RoPE order (element 2i + j) back to
// rotate-half order (element j * head_dim / 2 + i); `tmp` holds head_dim floats.
void deinterleave_heads(float* rows, int64_t n, int64_t head_dim, float* tmp) {
  const int64_t half = head_dim / 2;
  for (int64_t r = 0; r < n; ++r) {
    float* x = rows + r * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      tmp[i] = x[2 * i];
      tmp[half + i] = x[2 * i + 1];
    }
    std::memcpy(x, tmp, static_cast<size_t>(head_dim) * sizeof(float));
  }
}

}  // namespace

LlamaModel::LlamaModel(std::shared_ptr<const LlamaWeights> weights, int64_t num_layers, dist::Communicator* comm,
                       Placement placement)
    : weights_(std::move(weights)), placement_(placement) {
  SPECD_CHECK(weights_ != nullptr, ErrorCode::kInternal, "LlamaModel: null weights");
  const TensorShard shard = weights_->shard();
  SPECD_CHECK(shard.size == 1 || (comm != nullptr && comm->size() == shard.size && comm->rank() == shard.rank),
              ErrorCode::kInternal,
              "LlamaModel: weights of rank " + std::to_string(shard.rank) + " of " + std::to_string(shard.size) +
                  " need that rank's communicator");
  if (comm != nullptr && comm->size() > 1) comm_ = comm;
  num_layers_ = num_layers < 0 ? weights_->num_layers() : num_layers;
  if (num_layers_ <= 0 || num_layers_ > weights_->num_layers()) {
    throw Error(ErrorCode::kInvalidArgument, "LlamaModel: " + std::to_string(num_layers) +
                                                 " layers requested but the loaded weights hold " +
                                                 std::to_string(weights_->num_layers()));
  }
  const ModelConfig& c = config();
  set_context_length(0);
  if (c.gemma && c.gemma->rope_local_theta > 0)
    inv_freq_local_ = kernels::rope_inv_freq(c.head_dim, c.gemma->rope_local_theta, {});
  if (placement_.device_runtime()) dev_ = std::make_unique<DeviceState>(*weights_, num_layers_, placement_.device);
}

LlamaModel::~LlamaModel() = default;

size_t LlamaModel::device_weight_bytes() const {
  return dev_ != nullptr ? dev_->weights.bytes() : 0;
}

ForwardGraphs::Stats LlamaModel::device_graph_stats() const {
  return dev_ != nullptr ? dev_->graphs.stats() : ForwardGraphs::Stats{};
}

void LlamaModel::set_context_length(int64_t max_model_len) {
  const ModelConfig& c = config();
  inv_freq_ = kernels::rope_inv_freq(c.head_dim, c.rope_theta, to_kernel_scaling(c.rope_scaling));
  const RopeScaling& r = c.rope_scaling;
  const bool longrope = r.type == RopeScaling::Type::kLongRope;
  const std::vector<float>& factors =
      !longrope ? c.rope_freq_factors
                : (max_model_len > r.original_max_position_embeddings ? r.long_factor : r.short_factor);
  if (!factors.empty()) {
    SPECD_CHECK(factors.size() == inv_freq_.size(), ErrorCode::kInternal,
                "LlamaModel: RoPE frequency factors do not match head_dim");
    for (size_t i = 0; i < inv_freq_.size(); ++i) inv_freq_[i] /= factors[i];
  }
  rope_scale_ = longrope ? static_cast<float>(r.attention_factor) : 1.0f;
}

kv::KvCacheShape LlamaModel::kv_shape(int32_t block_size, DType kv_dtype) const {
  return {static_cast<int32_t>(num_layers_), static_cast<int32_t>(weights_->dims().num_kv_heads),
          static_cast<int32_t>(config().head_dim), block_size, kv_dtype};
}

void LlamaModel::forward(const ForwardBatch& batch, kv::KvCache& kv, ForwardOutput& out) {
  const ModelConfig& c = config();
  const kv::KvCacheShape& ks = kv.shape();
  SPECD_CHECK(
      ks.num_layers == num_layers_ && ks.num_kv_heads == weights_->dims().num_kv_heads && ks.head_dim == c.head_dim,
      ErrorCode::kInternal, "LlamaModel::forward: KV cache shape does not match the model");
  out.vocab_size = c.vocab_size;
  out.hidden_size = c.hidden_size;
  out.row_start.assign(1, 0);
  out.token_start.assign(1, 0);
  if (batch.seqs.empty()) {
    out.logits.clear();
    out.hidden.clear();
    return;
  }
  const bool mtp = weights_->is_mtp() || weights_->is_eagle3();
  SPECD_CHECK(mtp == (batch.input_hidden != nullptr), ErrorCode::kInvalidArgument,
              mtp ? "forward: an MTP module or EAGLE-3 head needs input_hidden"
                  : "forward: input_hidden given to a model that is not an MTP module or EAGLE-3 head");
  const int64_t width = batch.input_hidden_width == 0 ? config().hidden_size : batch.input_hidden_width;
  SPECD_CHECK(width == config().hidden_size || (weights_->is_eagle3() && width == weights_->eagle3_fc().cols),
              ErrorCode::kInvalidArgument,
              "forward: input_hidden rows of width " + std::to_string(width) + " (the model takes " +
                  std::to_string(config().hidden_size) +
                  (weights_->is_eagle3() ? " or " + std::to_string(weights_->eagle3_fc().cols) : std::string()) + ")");
  for (const int32_t l : batch.aux_layers)
    SPECD_CHECK(l >= 0 && l <= num_layers_, ErrorCode::kInvalidArgument,
                "forward: auxiliary hidden state of layer " + std::to_string(l) + " asked for, outside [0, " +
                    std::to_string(num_layers_) + "]");
  SPECD_CHECK(batch.aux_layers.empty() || (batch.return_hidden && batch.hidden_all), ErrorCode::kInvalidArgument,
              "forward: auxiliary hidden states come with the hidden states of every token");
  layout(batch, kv, out);

  if (announce_) announce_(batch, kv);
  if (comm_ == nullptr) {
    compute(batch, kv, out);
    return;
  }
  try {
    compute(batch, kv, out);
  } catch (const std::exception& e) {
    comm_->abort(std::string("a tensor-parallel forward failed after its collectives began: ") + e.what());
  }
}

// The batch layout in s_: token order, positions, cache slots, block tables, output rows. Every
// check of the batch's content happens here, before anything is written to the cache or sent
// to other ranks.
void LlamaModel::layout(const ForwardBatch& batch, kv::KvCache& kv, ForwardOutput& out) {
  const int64_t V = config().vocab_size;
  const auto S = static_cast<int32_t>(batch.seqs.size());
  s_.tokens.clear();
  s_.positions.clear();
  s_.slots.clear();
  s_.out_rows.clear();
  s_.query_start.assign(1, 0);
  s_.context_lens.clear();
  s_.tree_offsets.assign(1, 0);
  s_.tree_parents.clear();
  int32_t stride = 1;
  for (int32_t s = 0; s < S; ++s) {
    const SequenceInput& in = batch.seqs[static_cast<size_t>(s)];
    const auto n = static_cast<int32_t>(in.tokens.size());
    if (n == 0)
      throw Error(ErrorCode::kInvalidArgument, "forward: sequence " + std::to_string(in.seq) + " has no new tokens");
    // A sequence's later rows continue its earlier ones (batch expansion, forward.hpp).
    int32_t start = kv.num_tokens(in.seq);
    for (int32_t e = 0; e < s; ++e) {
      const SequenceInput& earlier = batch.seqs[static_cast<size_t>(e)];
      if (earlier.seq == in.seq) start += static_cast<int32_t>(earlier.tokens.size());
    }
    SPECD_CHECK(start + n <= kv.capacity(in.seq), ErrorCode::kInternal,
                "forward: sequence " + std::to_string(in.seq) + " needs KV room for " + std::to_string(start + n) +
                    " tokens but has " + std::to_string(kv.capacity(in.seq)) + " reserved");
    const int32_t tree_base = tree_layout(batch, s, start + n);
    const auto t0 = static_cast<int32_t>(s_.tokens.size());
    for (int32_t i = 0; i < n; ++i) {
      const int32_t token = in.tokens[static_cast<size_t>(i)];
      if (token < 0 || token >= V) {
        throw Error(ErrorCode::kInvalidArgument,
                    "token id " + std::to_string(token) + " is outside the vocabulary [0, " + std::to_string(V) + ")");
      }
      const int32_t pos = start + i;
      s_.tokens.push_back(token);
      s_.positions.push_back(pos < tree_base ? pos : tree_base + s_.depth[static_cast<size_t>(pos - tree_base)]);
      s_.slots.push_back(kv.slot(in.seq, pos));
    }
    switch (in.logits) {
      case LogitsMode::kNone:
        break;
      case LogitsMode::kLast:
        s_.out_rows.push_back(t0 + n - 1);
        break;
      case LogitsMode::kAll:
        for (int32_t i = 0; i < n; ++i) s_.out_rows.push_back(t0 + i);
        break;
    }
    out.row_start.push_back(static_cast<int32_t>(s_.out_rows.size()));
    s_.query_start.push_back(t0 + n);
    s_.context_lens.push_back(start + n);
    stride = std::max(stride, static_cast<int32_t>(kv.block_table(in.seq).size()));
  }
  if (s_.tree_parents.empty()) s_.tree_offsets.clear();  // no tree: every sequence causal
  // A recorded graph holds the stride: a power of two lets one graph serve a context's growth
  // through many blocks (the padding, block 0, is never read).
  if (placement_.graphs && stride > 0) stride = static_cast<int32_t>(std::bit_ceil(static_cast<uint32_t>(stride)));
  s_.block_tables.assign(static_cast<size_t>(S) * stride, 0);
  for (int32_t s = 0; s < S; ++s) {
    const auto table = kv.block_table(batch.seqs[static_cast<size_t>(s)].seq);
    std::copy(table.begin(), table.end(), s_.block_tables.begin() + static_cast<int64_t>(s) * stride);
  }
  s_.block_table_stride = stride;
}

// Sequence s's tree region (SequenceInput::tree) when its length after the call is `total`: its
// parents appended to s_.tree_parents, the nodes' depths in s_.depth. Returns where the region
// starts (`total` without a tree).
int32_t LlamaModel::tree_layout(const ForwardBatch& batch, int32_t s, int32_t total) {
  const SequenceInput& in = batch.seqs[static_cast<size_t>(s)];
  const auto m = static_cast<int32_t>(in.tree.size());
  if (m > 0) {
    const std::string who = "forward: sequence " + std::to_string(in.seq);
    SPECD_CHECK(m <= total, ErrorCode::kInvalidArgument,
                who + " has a tree of " + std::to_string(m) + " positions but only " + std::to_string(total));
    for (const SequenceInput& other : batch.seqs)
      SPECD_CHECK(&other == &in || other.seq != in.seq, ErrorCode::kInvalidArgument,
                  who + " has a tree and appears in more than one row");
    s_.depth.resize(static_cast<size_t>(m));
    try {
      kernels::tree_depths(in.tree.data(), m, s_.depth.data());
    } catch (const Error& e) {
      throw Error(ErrorCode::kInvalidArgument, who + ": " + e.what());
    }
    s_.tree_parents.insert(s_.tree_parents.end(), in.tree.begin(), in.tree.end());
  }
  s_.tree_offsets.push_back(static_cast<int32_t>(s_.tree_parents.size()));
  return total - m;
}

void LlamaModel::compute(const ForwardBatch& batch, kv::KvCache& kv, ForwardOutput& out) {
  if (dev_ != nullptr) return device_compute(batch, kv, out);
  const ModelConfig& c = config();
  const ShardDims& d = weights_->dims();
  const int64_t H = c.hidden_size, I = d.intermediate, hd = c.head_dim;
  const auto T = static_cast<int64_t>(s_.tokens.size());
  ensure(s_.x, T * H);
  ensure(s_.h, T * H);
  ensure(s_.o, T * H);
  ensure(s_.q, T * d.num_heads * hd);
  ensure(s_.attn, T * d.num_heads * hd);
  ensure(s_.k, T * d.num_kv_heads * hd);
  ensure(s_.v, T * d.num_kv_heads * hd);
  ensure(s_.gate, T * I);
  ensure(s_.head, hd);

  input_embeddings(batch, T);
  out.aux_hidden.resize(static_cast<size_t>(T * H) * batch.aux_layers.size());
  rope_tables(T);
  if (!inv_freq_local_.empty()) {
    ensure(s_.cos_local, T * (hd / 2));
    ensure(s_.sin_local, T * (hd / 2));
    kernels::rope_cos_sin(kCpu, s_.positions.data(), T, inv_freq_local_.data(), hd / 2, s_.cos_local.data(),
                          s_.sin_local.data());
  }
  kernels::PagedAttentionParams ap = attention_params(kv, static_cast<int32_t>(batch.seqs.size()));
  const float eps = static_cast<float>(c.rms_norm_eps);
  float* x = s_.x.data();
  float* h = s_.h.data();
  float* o = s_.o.data();
  for (int64_t l = 0; l < num_layers_; ++l) {
    const LayerWeights& w = weights_->layer(l);
    // x += (previous layer's MLP output); h = norm(x)
    if (l == 0 && weights_->is_eagle3()) {  // s_.cat holds the layer's input (eagle3_input)
    } else if (l == 0) {
      kernels::rmsnorm(kCpu, x, w.attn_norm, h, T, H, eps);
    } else {
      kernels::rmsnorm_residual(kCpu, o, x, w.attn_norm, h, T, H, eps);
    }
    capture_aux(batch, l, T, out);
    attention(w, static_cast<int32_t>(l), kv, ap, T, l == 0 && weights_->is_eagle3() ? s_.cat.data() : h);
    if (w.post_attn_norm != nullptr) kernels::rmsnorm(kCpu, o, w.post_attn_norm, o, T, H, eps);  // Gemma
    kernels::rmsnorm_residual(kCpu, o, x, w.mlp_norm, h, T, H, eps);
    mlp(w, T);
    if (w.post_mlp_norm != nullptr) kernels::rmsnorm(kCpu, o, w.post_mlp_norm, o, T, H, eps);
  }
  kernels::rmsnorm_residual(kCpu, o, x, weights_->final_norm(), h, T, H, eps);
  capture_aux(batch, num_layers_, T, out);
  outputs(batch, kv, out);
}

void LlamaModel::rope_tables(int64_t T) {
  const int64_t half = config().head_dim / 2;
  ensure(s_.cos, T * half);
  ensure(s_.sin, T * half);
  kernels::rope_cos_sin(kCpu, s_.positions.data(), T, inv_freq_.data(), half, s_.cos.data(), s_.sin.data());
  if (rope_scale_ != 1.0f) {  // longrope's attention factor
    for (int64_t i = 0; i < T * half; ++i) {
      s_.cos[static_cast<size_t>(i)] *= rope_scale_;
      s_.sin[static_cast<size_t>(i)] *= rope_scale_;
    }
  }
}

int32_t LlamaModel::attention_window(int64_t l) const {
  return weights_->is_mtp() || weights_->is_eagle3() ? 0 : config().layer_window(l);
}

void LlamaModel::capture_aux(const ForwardBatch& batch, int64_t l, int64_t T, ForwardOutput& out) {
  capture_aux_rows(batch, l, T, s_.x.data(), out);
}

void LlamaModel::capture_aux_rows(const ForwardBatch& batch, int64_t l, int64_t T, const float* x,
                                  ForwardOutput& out) const {
  const int64_t H = config().hidden_size;
  const auto n = static_cast<int64_t>(batch.aux_layers.size());
  for (int64_t a = 0; a < n; ++a) {
    if (batch.aux_layers[static_cast<size_t>(a)] != l) continue;
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(out.aux_hidden.data() + (t * n + a) * H, x + t * H, static_cast<size_t>(H) * sizeof(float));
  }
}

// x [T, hidden]: the token embeddings; for an MTP module eh_proj · concat(enorm(embedding),
// hnorm(the base's hidden state)), row by row; for an EAGLE-3 head see eagle3_input.
void LlamaModel::input_embeddings(const ForwardBatch& batch, int64_t T) {
  const int64_t H = config().hidden_size;
  const float eps = static_cast<float>(config().rms_norm_eps);
  const float* input_hidden = batch.input_hidden;
  float* x = s_.x.data();
  if (weights_->is_eagle3()) return eagle3_input(batch, T);
  embed(T, x);
  if (config().gemma) {  // Gemma scales its embeddings by sqrt(hidden)
    const float scale = std::sqrt(static_cast<float>(H));
    for (int64_t i = 0; i < T * H; ++i) x[i] *= scale;
  }
  if (!weights_->is_mtp()) return;
  float* h = s_.h.data();
  float* o = s_.o.data();
  ensure(s_.cat, T * 2 * H);
  kernels::rmsnorm(kCpu, x, weights_->mtp_enorm(), h, T, H, eps);
  kernels::rmsnorm(kCpu, input_hidden, weights_->mtp_hnorm(), o, T, H, eps);
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(s_.cat.data() + t * 2 * H, h + t * H, static_cast<size_t>(H) * sizeof(float));
    std::memcpy(s_.cat.data() + t * 2 * H + H, o + t * H, static_cast<size_t>(H) * sizeof(float));
  }
  kernels::matmul(kCpu, s_.cat.data(), weights_->mtp_eh_proj(), nullptr, x, T);
}

kernels::PagedAttentionParams LlamaModel::attention_params(const kv::KvCache& kv, int32_t num_seqs) {
  const ShardDims& d = weights_->dims();
  const int64_t hd = config().head_dim;
  kernels::PagedAttentionParams ap;
  ap.q = s_.q.data();
  ap.out = s_.attn.data();
  ap.kv_dtype = kv.dtype();
  ap.num_seqs = num_seqs;
  ap.query_start = s_.query_start.data();
  ap.context_lens = s_.context_lens.data();
  ap.block_tables = s_.block_tables.data();
  ap.block_table_stride = s_.block_table_stride;
  ap.num_blocks = kv.num_blocks();
  ap.block_size = kv.block_size();
  ap.num_heads = static_cast<int32_t>(d.num_heads);
  ap.num_kv_heads = static_cast<int32_t>(d.num_kv_heads);
  ap.head_dim = static_cast<int32_t>(hd);
  const auto& gemma = config().gemma;
  ap.scale = gemma ? static_cast<float>(gemma->query_scale) : 1.0f / std::sqrt(static_cast<float>(hd));
  ap.softcap = gemma ? static_cast<float>(gemma->attn_softcap) : 0.0f;
  if (!s_.tree_offsets.empty()) {
    ap.tree_offsets = s_.tree_offsets.data();
    ap.tree_parents = s_.tree_parents.data();
  }
  return ap;
}

// o [T, hidden] = the attention block of layer l on h: QKV, (Qwen3) q/k norms, RoPE, the KV
// write, paged attention and the output projection (all-reduced across ranks).
void LlamaModel::attention(const LayerWeights& w, int32_t l, kv::KvCache& kv, kernels::PagedAttentionParams& ap,
                           int64_t T, const float* h) {
  const ModelConfig& c = config();
  const int64_t nh = weights_->dims().num_heads, nkv = weights_->dims().num_kv_heads, hd = c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const kernels::MatmulOutput qkv[] = {{w.wq, w.bq, s_.q.data()}, {w.wk, w.bk, s_.k.data()}, {w.wv, w.bv, s_.v.data()}};
  if (w.wq.dtype == w.wk.dtype && w.wq.dtype == w.wv.dtype) {
    kernels::matmul_multi(kCpu, h, T, w.wq.cols, qkv);
  } else {  // a GGUF file with mixed types (model.dtype auto)
    for (const kernels::MatmulOutput& m : qkv) kernels::matmul(kCpu, h, m.w, m.bias, m.c, T);
  }
  if (c.qk_rows_interleaved) {
    deinterleave_heads(s_.q.data(), T * nh, hd, s_.head.data());
    deinterleave_heads(s_.k.data(), T * nkv, hd, s_.head.data());
  }
  if (w.q_norm != nullptr) {  // Qwen3: per-head RMSNorm of q and k before RoPE
    kernels::rmsnorm(kCpu, s_.q.data(), w.q_norm, s_.q.data(), T * nh, hd, eps);
    kernels::rmsnorm(kCpu, s_.k.data(), w.k_norm, s_.k.data(), T * nkv, hd, eps);
  }
  const bool local = !inv_freq_local_.empty() && c.layer_window(l) > 0;  // Gemma 3's sliding layers
  const float* cos = local ? s_.cos_local.data() : s_.cos.data();
  const float* sin = local ? s_.sin_local.data() : s_.sin.data();
  kernels::rope_apply(kCpu, s_.q.data(), T, nh, hd, cos, sin);
  void* k_cache = kv.k_layer(l);
  void* v_cache = kv.v_layer(l);
  kernels::write_kv(kCpu, s_.k.data(), s_.v.data(), T, nkv, hd, cos, sin, s_.slots.data(), kv.dtype(), k_cache,
                    v_cache);
  ap.k_cache = k_cache;
  ap.v_cache = v_cache;
  ap.window = attention_window(l);
  kernels::paged_attention(kCpu, ap);
  kernels::matmul(kCpu, s_.attn.data(), w.wo, w.bo, s_.o.data(), T);
  all_reduce(s_.o.data(), T * c.hidden_size);
}

// o [T, hidden] = down(silu(gate(h)) * up(h)), all-reduced across ranks.
void LlamaModel::mlp(const LayerWeights& w, int64_t T) {
  if (!w.experts.empty()) {
    moe_mlp(w, T);
    return;
  }
  const int64_t I = weights_->dims().intermediate;
  const float* h = s_.h.data();
  if (config().gemma) {  // GELU-tanh gate
    ensure(s_.up, T * I);
    const kernels::MatmulOutput gate_up[] = {{w.w_gate, nullptr, s_.gate.data()}, {w.w_up, nullptr, s_.up.data()}};
    if (w.w_gate.dtype == w.w_up.dtype) {
      kernels::matmul_multi(kCpu, h, T, w.w_gate.cols, gate_up);
    } else {
      for (const kernels::MatmulOutput& m : gate_up) kernels::matmul(kCpu, h, m.w, nullptr, m.c, T);
    }
    kernels::gelu_tanh_mul(kCpu, s_.gate.data(), s_.up.data(), T * I);
  } else if (w.w_gate.dtype == w.w_up.dtype) {
    kernels::matmul_swiglu(kCpu, h, w.w_gate, w.w_up, s_.gate.data(), T);
  } else {  // mixed types: the two GEMVs, then silu(gate) * up
    ensure(s_.up, T * I);
    kernels::matmul(kCpu, h, w.w_gate, nullptr, s_.gate.data(), T);
    kernels::matmul(kCpu, h, w.w_up, nullptr, s_.up.data(), T);
    kernels::silu_mul(kCpu, s_.gate.data(), s_.up.data(), T * I);
  }
  kernels::matmul(kCpu, s_.gate.data(), w.w_down, nullptr, s_.o.data(), T);
  all_reduce(s_.o.data(), T * config().hidden_size);
}

// Only the requested rows of h go through the LM head; hidden states as asked; the KV commit.
void LlamaModel::outputs(const ForwardBatch& batch, kv::KvCache& kv, ForwardOutput& out) {
  const int64_t H = config().hidden_size, V = config().vocab_size;
  const auto T = static_cast<int64_t>(s_.tokens.size());
  const auto R = static_cast<int64_t>(s_.out_rows.size());
  const float* h = s_.h.data();
  ensure(s_.rows, R * H);
  for (int64_t r = 0; r < R; ++r) {
    std::memcpy(s_.rows.data() + r * H, h + static_cast<int64_t>(s_.out_rows[static_cast<size_t>(r)]) * H,
                static_cast<size_t>(H) * sizeof(float));
  }
  out.logits.resize(static_cast<size_t>(R * V));
  if (R > 0 && weights_->is_eagle3()) {
    eagle3_logits(s_.rows.data(), R, out.logits.data());
    h = s_.x.data();  // its hidden output: the pre-norm stream, the next draft step's input
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(s_.rows.data() + r * H, h + static_cast<int64_t>(s_.out_rows[static_cast<size_t>(r)]) * H,
                  static_cast<size_t>(H) * sizeof(float));
  } else if (R > 0) {
    lm_head(s_.rows.data(), R, out.logits.data());
    if (const auto& g = config().gemma; g && g->final_softcap > 0) {  // Gemma 2's final soft cap
      const auto cap = static_cast<float>(g->final_softcap);
      for (float& z : out.logits) z = cap * std::tanh(z / cap);
    }
  }
  out.token_start = s_.query_start;
  if (batch.return_hidden && batch.hidden_all) {
    out.hidden.assign(h, h + T * H);
  } else if (batch.return_hidden) {
    out.hidden.assign(s_.rows.begin(), s_.rows.begin() + R * H);
  } else {
    out.hidden.clear();
  }
  for (const SequenceInput& in : batch.seqs) kv.commit(in.seq, static_cast<int32_t>(in.tokens.size()));
}

void LlamaModel::embed(int64_t T, float* x) {
  const WeightView& table = weights_->embed();
  if (comm_ == nullptr) {
    kernels::embedding(kCpu, table, s_.tokens.data(), T, x);
    return;
  }
  // Each rank fills the rows of its vocabulary slice and zeros the rest; the sum has exactly
  // one non-zero term per element.
  const int64_t H = config().hidden_size, begin = weights_->dims().vocab_begin;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t local = s_.tokens[static_cast<size_t>(t)] - static_cast<int32_t>(begin);
    if (local >= 0 && local < table.rows) {
      kernels::embedding(kCpu, table, &local, 1, x + t * H);
    } else {
      std::fill(x + t * H, x + (t + 1) * H, 0.0f);
    }
  }
  all_reduce(x, T * H);
}

void LlamaModel::lm_head(const float* rows, int64_t R, float* logits) {
  const WeightView& head = weights_->lm_head();
  if (comm_ == nullptr) {
    kernels::matmul(kCpu, rows, head, nullptr, logits, R);
    return;
  }
  // Every rank sends [R, stride] (its vocabulary slice, zero-padded on the last rank).
  const ShardDims& d = weights_->dims();
  const int64_t V = config().vocab_size, stride = d.vocab_stride, n = comm_->size();
  ensure(s_.head_local, R * stride);
  ensure(s_.head_all, n * R * stride);
  kernels::matmul(kCpu, rows, head, nullptr, s_.head_local.data(), R);
  if (d.vocab_rows < stride) {
    for (int64_t r = R - 1; r >= 0; --r) {  // spread [R, vocab_rows] to [R, stride] in place
      float* dst = s_.head_local.data() + r * stride;
      std::memmove(dst, s_.head_local.data() + r * d.vocab_rows, static_cast<size_t>(d.vocab_rows) * sizeof(float));
      std::fill(dst + d.vocab_rows, dst + stride, 0.0f);
    }
  }
  comm_->all_gather(s_.head_local.data(), s_.head_all.data(), R * stride);
  for (int64_t rank = 0; rank < n; ++rank) {
    const int64_t begin = rank * stride, count = std::min(stride, V - begin);
    for (int64_t r = 0; r < R; ++r) {
      const float* src = s_.head_all.data() + (rank * R + r) * stride;
      std::copy(src, src + count, logits + r * V + begin);
    }
  }
}

}  // namespace specd::model

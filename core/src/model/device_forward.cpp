// LlamaModel's forward on its device runtime (Placement; docs/cuda.md "Model runtime"): the
// dense Llama-family graph (Llama, Mistral, Qwen2, Qwen3; MTP modules, EAGLE-3 heads) with every op on the device, in
// the CPU path's order and with the CPU path's operands, so each kernel sees what it sees there. Per call: the layout
// that forward() built on the host (token order, cache slots, block tables, output rows) and the RoPE tables (computed
// on the host, as the CPU path does) go up in one copy; the logits of the asked-for rows, and the hidden states where
// asked, come back.
#include <algorithm>
#include <cstring>
#include <string>

#include "model/device_weights.hpp"
#include "model/llama.hpp"
#include "specd/error.hpp"
#include "specd/kernels/attention.hpp"
#include "specd/kernels/device_memory.hpp"
#include "specd/kernels/embedding.hpp"
#include "specd/kernels/matmul.hpp"
#include "specd/kernels/rmsnorm.hpp"
#include "specd/kernels/rope.hpp"

namespace specd::model {
namespace {

// The call's metadata in one host block of 64-byte aligned pieces, for one upload.
class MetaPack {
 public:
  explicit MetaPack(std::vector<std::byte>& host) : host_(host) { host_.clear(); }
  // Appends v[0, n) and returns its offset (-1 when n == 0).
  template <class T>
  int64_t add(const std::vector<T>& v, int64_t n) {
    if (n <= 0) return -1;
    const size_t at = (host_.size() + 63) / 64 * 64, bytes = static_cast<size_t>(n) * sizeof(T);
    host_.resize(at + bytes);
    std::memcpy(host_.data() + at, v.data(), bytes);
    return static_cast<int64_t>(at);
  }
  template <class T>
  static T* at(std::byte* base, int64_t offset) {
    return offset < 0 ? nullptr : reinterpret_cast<T*>(base + offset);
  }

 private:
  std::vector<std::byte>& host_;
};

template <class T>
int64_t count(const std::vector<T>& v) {
  return static_cast<int64_t>(v.size());
}

}  // namespace

void LlamaModel::device_compute(const ForwardBatch& batch, kv::KvCache& kv, ForwardOutput& out) {
  const kernels::Device dev = placement_.device;
  SPECD_CHECK(kv.device() == dev, ErrorCode::kInternal,
              "LlamaModel::forward: the KV cache is on " + std::string(kernels::device_name(kv.device())) +
                  ", the model on " + std::string(kernels::device_name(dev)));
  DeviceState& d = *dev_;
  const int64_t H = config().hidden_size;
  const auto T = count(s_.tokens), R = count(s_.out_rows);
  kernels::PagedAttentionParams ap = device_upload(kv, static_cast<int32_t>(batch.seqs.size()), T);
  out.aux_hidden.resize(static_cast<size_t>(T * H) * batch.aux_layers.size());
  // Every buffer the kernels write is in place before they are queued (a graph records them).
  float* rows = d.rows_buf.get<float>(dev, R * H);
  float* logits = d.logits_buf.get<float>(dev, R * d.weights.lm_head().rows);
  auto work = [&] {
    device_layers(batch, kv, ap, T, out);
    device_head(batch, rows, logits, T, R);
  };
  // Graphs hold kernels only: MTP and EAGLE-3 inputs and auxiliary states go through the host.
  const bool graph = placement_.graphs && dev == kernels::Device::kCuda && !weights_->is_eagle3() &&
                     !weights_->is_mtp() && batch.aux_layers.empty();
  if (graph) {
    d.graphs.run(dev, graph_key(batch, kv, ap, rows, logits), work);
  } else {
    work();
  }
  device_outputs(batch, kv, rows, logits, out);
}

// Every value the forward's kernels hold (ForwardGraphs): its shape, the call's metadata on the
// device, the activations, the KV cache and the attention layout.
ForwardGraphs::Key LlamaModel::graph_key(const ForwardBatch& batch, const kv::KvCache& kv,
                                         const kernels::PagedAttentionParams& ap, const float* rows,
                                         const float* logits) const {
  const DeviceState& d = *dev_;
  auto at = [](const void* p) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(p)); };
  return {count(s_.tokens),
          count(s_.out_rows),
          ap.num_seqs,
          ap.block_table_stride,
          ap.num_blocks,
          batch.return_hidden ? 1 : 0,
          batch.hidden_all ? 1 : 0,
          at(d.tokens),
          at(d.slots),
          at(d.out_rows),
          at(d.cos),
          at(d.sin),
          at(ap.query_start),
          at(ap.context_lens),
          at(ap.block_tables),
          at(ap.tree_offsets),
          at(ap.tree_parents),
          at(d.x),
          at(d.h),
          at(d.o),
          at(d.q),
          at(d.k),
          at(d.v),
          at(d.attn),
          at(d.gate),
          at(rows),
          at(logits),
          at(d.attention_plan.data()),
          at(kv.k_layer(0)),
          at(kv.v_layer(0)),
          static_cast<int64_t>(kv.dtype())};
}

// The input, every layer and the final norm: x, then h = the final norm of the stream.
void LlamaModel::device_layers(const ForwardBatch& batch, kv::KvCache& kv, kernels::PagedAttentionParams& ap, int64_t T,
                               ForwardOutput& out) {
  const kernels::Device dev = placement_.device;
  DeviceState& d = *dev_;
  const ModelConfig& c = config();
  const int64_t H = c.hidden_size;
  if (weights_->is_eagle3()) {
    device_eagle3_input(batch, T);
  } else if (weights_->is_mtp()) {
    device_mtp_input(batch, T);
  } else {
    kernels::embedding_of_checked_ids(dev, d.weights.embed(), d.tokens, T, d.x);  // forward() checked the ids
  }
  const float eps = static_cast<float>(c.rms_norm_eps);
  for (int64_t l = 0; l < num_layers_; ++l) {
    const DeviceLayer& w = d.weights.layer(l);
    // x += (previous layer's MLP output); h = norm(x)
    const bool eagle3_input = l == 0 && weights_->is_eagle3();  // d.cat is the layer's input
    if (eagle3_input) {
    } else if (l == 0) {
      kernels::rmsnorm(dev, d.x, w.attn_norm, d.h, T, H, eps);
    } else {
      kernels::rmsnorm_residual(dev, d.o, d.x, w.attn_norm, d.h, T, H, eps);
    }
    device_aux(batch, l, T, out);
    device_attention(l, kv, ap, T, eagle3_input ? d.cat : d.h);
    kernels::rmsnorm_residual(dev, d.o, d.x, w.mlp_norm, d.h, T, H, eps);
    device_mlp(l, T);
  }
  kernels::rmsnorm_residual(dev, d.o, d.x, d.weights.final_norm(), d.h, T, H, eps);
  device_aux(batch, num_layers_, T, out);
}

kernels::PagedAttentionParams LlamaModel::device_upload(kv::KvCache& kv, int32_t num_seqs, int64_t T) {
  const kernels::Device dev = placement_.device;
  DeviceState& d = *dev_;
  const int64_t hd = config().head_dim, half = hd / 2;
  rope_tables(T);  // on the host, as compute() makes them
  MetaPack pack(d.meta_host);
  const int64_t tokens = pack.add(s_.tokens, T), slots = pack.add(s_.slots, T),
                qs = pack.add(s_.query_start, count(s_.query_start)),
                ctx = pack.add(s_.context_lens, count(s_.context_lens)),
                bt = pack.add(s_.block_tables, count(s_.block_tables)),
                to = pack.add(s_.tree_offsets, count(s_.tree_offsets)),
                tp = pack.add(s_.tree_parents, count(s_.tree_parents)),
                rows = pack.add(s_.out_rows, count(s_.out_rows)), cos = pack.add(s_.cos, T * half),
                sin = pack.add(s_.sin, T * half);
  auto* meta = d.meta_buf.get<std::byte>(dev, d.meta_host.size());
  kernels::copy_to_device(dev, meta, d.meta_host.data(), d.meta_host.size());
  d.tokens = MetaPack::at<const int32_t>(meta, tokens);
  d.slots = MetaPack::at<const int64_t>(meta, slots);
  d.out_rows = MetaPack::at<const int32_t>(meta, rows);
  d.cos = MetaPack::at<const float>(meta, cos);
  d.sin = MetaPack::at<const float>(meta, sin);

  const ShardDims& sd = weights_->dims();
  const int64_t H = config().hidden_size;
  d.x = d.x_buf.get<float>(dev, T * H);
  d.h = d.h_buf.get<float>(dev, T * H);
  d.o = d.o_buf.get<float>(dev, T * H);
  d.q = d.q_buf.get<float>(dev, T * sd.num_heads * hd);
  d.attn = d.attn_buf.get<float>(dev, T * sd.num_heads * hd);
  d.k = d.k_buf.get<float>(dev, T * sd.num_kv_heads * hd);
  d.v = d.v_buf.get<float>(dev, T * sd.num_kv_heads * hd);
  d.gate = d.gate_buf.get<float>(dev, T * sd.intermediate);

  kernels::PagedAttentionParams ap = attention_params(kv, num_seqs);
  ap.q = d.q;
  ap.out = d.attn;
  ap.query_start = MetaPack::at<const int32_t>(meta, qs);
  ap.context_lens = MetaPack::at<const int32_t>(meta, ctx);
  ap.block_tables = MetaPack::at<const int32_t>(meta, bt);
  ap.tree_offsets = MetaPack::at<const int32_t>(meta, to);
  ap.tree_parents = MetaPack::at<const int32_t>(meta, tp);
  // The batch's attention layout, validated and laid out once from the host copies; the
  // layers' calls then only launch (no read-back per layer).
  kernels::PagedAttentionParams host = ap;
  host.k_cache = kv.k_layer(0);
  host.v_cache = kv.v_layer(0);
  host.query_start = s_.query_start.data();
  host.context_lens = s_.context_lens.data();
  host.block_tables = s_.block_tables.data();
  host.tree_offsets = ap.tree_offsets == nullptr ? nullptr : s_.tree_offsets.data();
  host.tree_parents = ap.tree_parents == nullptr ? nullptr : s_.tree_parents.data();
  d.attention_plan.prepare(dev, host);
  return ap;
}

// o = the attention block of layer l over h: QKV, Qwen3's q/k norms, RoPE, the KV write, paged
// attention, the output projection.
void LlamaModel::device_attention(int64_t l, kv::KvCache& kv, kernels::PagedAttentionParams& ap, int64_t T,
                                  const float* in) {
  const kernels::Device dev = placement_.device;
  DeviceState& d = *dev_;
  const DeviceLayer& w = d.weights.layer(l);
  const ShardDims& sd = weights_->dims();
  const int64_t nh = sd.num_heads, nkv = sd.num_kv_heads, hd = config().head_dim;
  const float eps = static_cast<float>(config().rms_norm_eps);
  const kernels::MatmulOutput qkv[] = {{w.wq, w.bq, d.q}, {w.wk, w.bk, d.k}, {w.wv, w.bv, d.v}};
  if (w.wq.dtype == w.wk.dtype && w.wq.dtype == w.wv.dtype) {
    kernels::matmul_multi(dev, in, T, w.wq.cols, qkv);
  } else {  // a GGUF file with mixed types
    for (const kernels::MatmulOutput& m : qkv) kernels::matmul(dev, in, m.w, m.bias, m.c, T);
  }
  if (w.q_norm != nullptr) {  // Qwen3
    kernels::rmsnorm(dev, d.q, w.q_norm, d.q, T * nh, hd, eps);
    kernels::rmsnorm(dev, d.k, w.k_norm, d.k, T * nkv, hd, eps);
  }
  kernels::rope_apply(dev, d.q, T, nh, hd, d.cos, d.sin);
  const auto layer = static_cast<int32_t>(l);
  void* k_cache = kv.k_layer(layer);
  void* v_cache = kv.v_layer(layer);
  kernels::write_kv(dev, d.k, d.v, T, nkv, hd, d.cos, d.sin, d.slots, kv.dtype(), k_cache, v_cache);
  ap.k_cache = k_cache;
  ap.v_cache = v_cache;
  ap.window = attention_window(l);
  kernels::paged_attention(dev, ap, d.attention_plan);
  kernels::matmul(dev, d.attn, w.wo, w.bo, d.o, T);
}

// An MTP module's input (input_embeddings on the CPU path): x = eh_proj · concat(enorm(embed(token)),
// hnorm(the base's hidden state)), row by row; the hidden states come from the host.
void LlamaModel::device_mtp_input(const ForwardBatch& batch, int64_t T) {
  const kernels::Device dev = placement_.device;
  DeviceState& d = *dev_;
  const int64_t H = config().hidden_size;
  const float eps = static_cast<float>(config().rms_norm_eps);
  const size_t row = static_cast<size_t>(H) * sizeof(float);
  float* in = d.in_buf.get<float>(dev, T * H);
  d.cat = d.cat_buf.get<float>(dev, T * 2 * H);
  kernels::copy_to_device(dev, in, batch.input_hidden, static_cast<size_t>(T) * row);
  kernels::embedding(dev, d.weights.embed(), d.tokens, T, d.x);
  kernels::rmsnorm(dev, d.x, d.weights.mtp_enorm(), d.h, T, H, eps);
  kernels::rmsnorm(dev, in, d.weights.mtp_hnorm(), d.o, T, H, eps);
  kernels::copy_rows_on_device(dev, d.cat, 2 * row, d.h, row, row, static_cast<size_t>(T));
  kernels::copy_rows_on_device(dev, d.cat + H, 2 * row, d.o, row, row, static_cast<size_t>(T));
  kernels::matmul(dev, d.cat, d.weights.mtp_eh_proj(), nullptr, d.x, T);
}

// An EAGLE-3 head's input (eagle3_input on the CPU path): x = g (fc of the target's three states,
// or the head's own previous output), cat = [input_layernorm(embed(t)) | hidden_norm(g)].
void LlamaModel::device_eagle3_input(const ForwardBatch& batch, int64_t T) {
  const kernels::Device dev = placement_.device;
  DeviceState& d = *dev_;
  const int64_t H = config().hidden_size;
  const int64_t width = batch.input_hidden_width == 0 ? H : batch.input_hidden_width;
  const float eps = static_cast<float>(config().rms_norm_eps);
  const size_t row = static_cast<size_t>(H) * sizeof(float);
  float* in = d.in_buf.get<float>(dev, T * width);
  d.cat = d.cat_buf.get<float>(dev, T * 2 * H);
  kernels::copy_to_device(dev, in, batch.input_hidden, static_cast<size_t>(T * width) * sizeof(float));
  if (width == H) {
    kernels::copy_on_device(dev, d.x, in, static_cast<size_t>(T) * row);
  } else {  // the target's three states, fused
    kernels::matmul(dev, in, d.weights.eagle3_fc(), nullptr, d.x, T);
  }
  kernels::embedding(dev, d.weights.embed(), d.tokens, T, d.o);
  kernels::rmsnorm(dev, d.o, d.weights.layer(0).attn_norm, d.h, T, H, eps);
  kernels::rmsnorm(dev, d.x, d.weights.eagle3_hidden_norm(), d.o, T, H, eps);
  kernels::copy_rows_on_device(dev, d.cat, 2 * row, d.h, row, row, static_cast<size_t>(T));
  kernels::copy_rows_on_device(dev, d.cat + H, 2 * row, d.o, row, row, static_cast<size_t>(T));
}

// o = down(silu(gate(h)) * up(h)).
void LlamaModel::device_mlp(int64_t l, int64_t T) {
  const kernels::Device dev = placement_.device;
  DeviceState& d = *dev_;
  const DeviceLayer& w = d.weights.layer(l);
  if (w.w_gate.dtype == w.w_up.dtype) {
    kernels::matmul_swiglu(dev, d.h, w.w_gate, w.w_up, d.gate, T);
  } else {  // mixed types: the two GEMVs, then silu(gate) * up
    const int64_t I = weights_->dims().intermediate;
    float* up = d.up_buf.get<float>(dev, T * I);
    kernels::matmul(dev, d.h, w.w_gate, nullptr, d.gate, T);
    kernels::matmul(dev, d.h, w.w_up, nullptr, up, T);
    kernels::silu_mul(dev, d.gate, up, T * I);
  }
  kernels::matmul(dev, d.gate, w.w_down, nullptr, d.o, T);
}

// The residual stream entering layer l into the aux_hidden slots of the aux layers equal to l
// (capture_aux's layout), through one copy back.
void LlamaModel::device_aux(const ForwardBatch& batch, int64_t l, int64_t T, ForwardOutput& out) {
  if (std::find(batch.aux_layers.begin(), batch.aux_layers.end(), l) == batch.aux_layers.end()) return;
  DeviceState& d = *dev_;
  const int64_t H = config().hidden_size;
  ensure(d.host_rows, T * H);
  kernels::copy_to_host(placement_.device, d.host_rows.data(), d.x, static_cast<size_t>(T * H) * sizeof(float));
  capture_aux_rows(batch, l, T, d.host_rows.data(), out);
}

// The asked-for rows of h gathered on the device and their logits through the LM head (an
// EAGLE-3 head: then its pre-norm rows, the hidden states it returns).
void LlamaModel::device_head(const ForwardBatch& batch, float* rows, float* logits, int64_t T, int64_t R) {
  if (R == 0) return;
  const kernels::Device dev = placement_.device;
  DeviceState& d = *dev_;
  const int64_t H = config().hidden_size;
  // The output rows were laid out on the host, within [0, T).
  kernels::embedding_of_checked_ids(dev, kernels::WeightView{DType::kF32, d.h, T, H}, d.out_rows, R, rows);
  kernels::matmul(dev, rows, d.weights.lm_head(), nullptr, logits, R);
  if (weights_->is_eagle3() && batch.return_hidden && !batch.hidden_all)  // its rows, as returned
    kernels::embedding_of_checked_ids(dev, kernels::WeightView{DType::kF32, d.x, T, H}, d.out_rows, R, rows);
}

// The logits of the R rows (an EAGLE-3 head's draft vocabulary scattered to target ids, -inf
// elsewhere, as eagle3_logits) and the hidden states asked for copied back; the KV commit.
void LlamaModel::device_outputs(const ForwardBatch& batch, kv::KvCache& kv, const float* rows, const float* logits,
                                ForwardOutput& out) {
  const kernels::Device dev = placement_.device;
  DeviceState& d = *dev_;
  const int64_t H = config().hidden_size, V = config().vocab_size;
  const auto T = count(s_.tokens), R = count(s_.out_rows);
  out.logits.resize(static_cast<size_t>(R * V));
  if (R > 0 && !weights_->is_eagle3()) {
    kernels::copy_to_host(dev, out.logits.data(), logits, out.logits.size() * sizeof(float));
  } else if (R > 0) {
    const int64_t draft_vocab = d.weights.lm_head().rows;
    ensure(d.host_rows, R * draft_vocab);
    kernels::copy_to_host(dev, d.host_rows.data(), logits, static_cast<size_t>(R * draft_vocab) * sizeof(float));
    scatter_draft_logits(d.host_rows.data(), R, out.logits.data());
  }
  // An EAGLE-3 head's hidden output is its pre-norm stream (the next draft step's input).
  const float* hidden = weights_->is_eagle3() ? d.x : d.h;
  out.token_start = s_.query_start;
  if (batch.return_hidden && batch.hidden_all) {
    out.hidden.resize(static_cast<size_t>(T * H));
    kernels::copy_to_host(dev, out.hidden.data(), hidden, out.hidden.size() * sizeof(float));
  } else if (batch.return_hidden) {
    out.hidden.resize(static_cast<size_t>(R * H));
    if (R > 0) kernels::copy_to_host(dev, out.hidden.data(), rows, out.hidden.size() * sizeof(float));
  } else {
    out.hidden.clear();
  }
  for (const SequenceInput& in : batch.seqs) kv.commit(in.seq, static_cast<int32_t>(in.tokens.size()));
}

}  // namespace specd::model

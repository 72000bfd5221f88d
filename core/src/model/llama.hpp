// The Llama-family decoder (Llama 2/3, TinyLlama, Mistral, Qwen2, Qwen3) and its relatives:
// pre-norm blocks of GQA attention with rotary embeddings (Qwen3, Gemma 3: per-head q/k RMSNorm
// first; Mistral, Phi-3, Gemma: sliding windows) and a SwiGLU MLP, a mixture of SwiGLU experts
// (Qwen3-MoE, Mixtral: moe_forward.cpp) or Gemma's GELU MLP between extra norms, on the CPU
// kernels (docs/model-formats.md). Weights are in their compute dtype (weights.hpp),
// activations in F32, the KV cache in its own dtype.
//
// Tensor parallelism (docs/distributed.md): built from sharded weights and their group's
// communicator, every rank runs the same forward on its shard (Megatron): q/k/v and gate/up
// produce this rank's heads and MLP columns, o_proj and down_proj produce partial sums that
// one all-reduce each completes, the embedding lookup is vocabulary-parallel (one all-reduce
// per forward) and the LM head's vocabulary slices are all-gathered into full logit rows. The
// all-reduce is rank-ordered and batch invariant (dist/communicator.hpp), so greedy
// speculative output still equals plain output.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "dist/communicator.hpp"
#include "kv/kv_cache.hpp"
#include "model/device_graphs.hpp"
#include "model/forward.hpp"
#include "model/placement.hpp"
#include "model/weights.hpp"
#include "specd/kernels/attention.hpp"
#include "specd/kernels/matmul.hpp"

namespace specd::model {

// Grows a scratch vector to at least n elements (the forward's buffers only grow).
template <class T>
void ensure(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
}

struct DeviceState;  // device_weights.hpp

class LlamaModel {
 public:
  // Runs the first `num_layers` layers of `weights` (< 0: all it holds). Several models may
  // share one LlamaWeights: a self-draft is the target's weights with fewer layers. `comm`:
  // the tensor-parallel group of sharded weights (rank and size equal to weights.shard());
  // null for a whole model. It must outlive the model. A device runtime (Placement) uploads the
  // weights here; it throws kUnsupported for what it does not run yet (DeviceWeights), naming
  // it, and the device's errors (absent, out of memory).
  explicit LlamaModel(std::shared_ptr<const LlamaWeights> weights, int64_t num_layers = -1,
                      dist::Communicator* comm = nullptr, Placement placement = {});
  ~LlamaModel();
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;
  const Placement& placement() const { return placement_; }
  // Weight bytes this model uploaded to its device runtime (0 on the CPU path); uploads shared
  // with another model over the same host tensors count with the model that made them.
  size_t device_weight_bytes() const;
  // The device runtime's CUDA graphs so far (all zero without Placement::graphs).
  ForwardGraphs::Stats device_graph_stats() const;

  const ModelConfig& config() const { return weights_->config(); }
  // The context the model serves (the engine's max_model_len), which picks longrope's factors
  // (RopeScaling::kLongRope): the long ones when it exceeds original_max_position_embeddings,
  // else the short ones (the default), for every position alike, as llama.cpp picks them by its
  // context size: a row's rotation never depends on the batch. No effect on other RoPE types.
  void set_context_length(int64_t max_model_len);
  const LlamaWeights& weights() const { return *weights_; }
  int64_t num_layers() const { return num_layers_; }
  int64_t vocab_size() const { return config().vocab_size; }
  // The KV cache shape this model needs for a given block size and cache dtype.
  kv::KvCacheShape kv_shape(int32_t block_size, DType kv_dtype) const;
  // Weight bytes read per decode step (the memory-bandwidth floor's numerator), this rank's.
  size_t decode_bytes() const { return weights_->decode_bytes(num_layers_); }
  int32_t tensor_parallel_size() const { return weights_->shard().size; }

  // Tensor parallelism, rank 0: called once per forward, after the batch was checked and
  // before any collective, to send the call to the other ranks (tp::Leader). Every forward
  // that passes its checks runs on all ranks; one that fails them fails on rank 0 alone.
  using Announce = std::function<void(const ForwardBatch& batch, kv::KvCache& kv)>;
  void set_announce(Announce announce) { announce_ = std::move(announce); }

  // An MTP module (weights().is_mtp()) takes batch.input_hidden and runs its one block over
  // eh_proj(concat(enorm(embed(token)), hnorm(input_hidden))) (docs/model-formats.md).
  // Runs the batch, writes each new token's K/V into `kv` and commits them
  // (kv.num_tokens(seq) grows by the number of new tokens), and fills `out`.
  // Throws specd::Error: kInvalidArgument for a token id outside the vocabulary or an empty
  // sequence input, kInternal when the KV reservation does not cover the new tokens or the
  // cache does not match this model. On throw, no sequence's length has changed. Under tensor
  // parallelism a failure after the collectives began ends the whole job (the ranks would
  // fall out of step), through Communicator::abort.
  // On a device runtime `kv` must be in the placement's device (KvCache::device()).
  // Not thread-safe: one call at a time per LlamaModel (it owns its scratch buffers).
  void forward(const ForwardBatch& batch, kv::KvCache& kv, ForwardOutput& out);

  // Mixture-of-experts work since construction (all zero for a dense model): layer passes (one
  // per MoE layer per forward), distinct experts read over them, and routed (token, expert)
  // pairs. experts_read / (layer_passes * experts_per_token) is the expert bytes a forward read
  // against what one row alone would read: 1 for a single token, up to the batch's rows when
  // no two rows share an expert.
  struct MoeStats {
    uint64_t layer_passes = 0;
    uint64_t experts_read = 0;
    uint64_t expert_rows = 0;
  };
  const MoeStats& moe_stats() const { return moe_stats_; }

 private:
  struct Scratch {
    std::vector<int32_t> tokens, positions, query_start, context_lens, block_tables, out_rows, tree_offsets,
        tree_parents, depth, route_ids, expert_start, expert_slots, expert_fill, expert_pos;
    std::vector<kernels::GroupedMatmul> groups, groups_up, groups_down;
    std::vector<int64_t> slots;
    std::vector<float> x, h, q, k, v, attn, o, gate, up, cos, sin, cos_local, sin_local, rows, cat, head, head_local,
        head_all, router, route_weights, expert_in, expert_out;
    int32_t block_table_stride = 1;
  };
  // The batch layout in s_ (token order, positions, slots, block tables, output rows), with the
  // checks of the batch's content.
  void layout(const ForwardBatch& batch, kv::KvCache& kv, ForwardOutput& out);
  int32_t tree_layout(const ForwardBatch& batch, int32_t s, int32_t total);
  // The layers and the LM head over the batch layout in s_.
  void compute(const ForwardBatch& batch, kv::KvCache& kv, ForwardOutput& out);
  void input_embeddings(const ForwardBatch& batch, int64_t T);
  // An EAGLE-3 head's input (eagle3_forward.cpp): x = the fused state g (fc of the target's
  // three states, or the head's own previous output), s_.cat = [input_layernorm(embed) |
  // hidden_norm(g)], the midlayer's attention input.
  void eagle3_input(const ForwardBatch& batch, int64_t T);
  // An EAGLE-3 head's logits: its draft-vocabulary rows scattered to target ids, -inf elsewhere.
  void eagle3_logits(const float* rows, int64_t R, float* logits);
  // logits [R, vocab] = -inf but for the draft vocabulary's rows draft [R, draft vocab] at their
  // target ids.
  void scatter_draft_logits(const float* draft, int64_t R, float* logits) const;
  // The residual stream x entering layer l (l == num_layers: before the final norm) into the
  // aux_hidden slots of every aux layer equal to l; x: host rows [T, hidden].
  void capture_aux(const ForwardBatch& batch, int64_t l, int64_t T, ForwardOutput& out);
  void capture_aux_rows(const ForwardBatch& batch, int64_t l, int64_t T, const float* x, ForwardOutput& out) const;
  // s_.cos / s_.sin [T, head_dim / 2] for s_.positions (longrope's attention factor applied).
  void rope_tables(int64_t T);
  // Layer l's sliding window (0: none; an MTP module's or EAGLE-3 head's layer attends fully).
  int32_t attention_window(int64_t l) const;
  kernels::PagedAttentionParams attention_params(const kv::KvCache& kv, int32_t num_seqs);
  // h: the layer's normalized input [T, q/k/v input width].
  void attention(const LayerWeights& w, int32_t layer, kv::KvCache& kv, kernels::PagedAttentionParams& ap, int64_t T,
                 const float* h);
  void mlp(const LayerWeights& w, int64_t T);
  // A mixture-of-experts MLP, expert-grouped (moe_forward.cpp): o = the routed experts' weighted
  // sum over s_.h.
  void moe_mlp(const LayerWeights& w, int64_t T);
  void outputs(const ForwardBatch& batch, kv::KvCache& kv, ForwardOutput& out);
  // compute() on the device runtime (device_forward.cpp).
  void device_compute(const ForwardBatch& batch, kv::KvCache& kv, ForwardOutput& out);
  // The call's metadata and RoPE tables up in one copy; activations sized for T tokens.
  kernels::PagedAttentionParams device_upload(kv::KvCache& kv, int32_t num_seqs, int64_t T);
  // in: the layer's attention input on the device (the normalized stream; an EAGLE-3 head's
  // layer 0: its [T, 2 * hidden] concatenation).
  void device_attention(int64_t l, kv::KvCache& kv, kernels::PagedAttentionParams& ap, int64_t T, const float* in);
  void device_mlp(int64_t l, int64_t T);
  void device_layers(const ForwardBatch& batch, kv::KvCache& kv, kernels::PagedAttentionParams& ap, int64_t T,
                     ForwardOutput& out);
  void device_head(const ForwardBatch& batch, float* rows, float* logits, int64_t T, int64_t R);
  void device_outputs(const ForwardBatch& batch, kv::KvCache& kv, const float* rows, const float* logits,
                      ForwardOutput& out);
  ForwardGraphs::Key graph_key(const ForwardBatch& batch, const kv::KvCache& kv,
                               const kernels::PagedAttentionParams& ap, const float* rows, const float* logits) const;
  void device_aux(const ForwardBatch& batch, int64_t l, int64_t T, ForwardOutput& out);
  void device_mtp_input(const ForwardBatch& batch, int64_t T);
  void device_eagle3_input(const ForwardBatch& batch, int64_t T);
  // x [T, hidden] = the embeddings of s_.tokens (vocabulary-parallel under tensor parallelism).
  void embed(int64_t T, float* x);
  // logits [R, vocab] = rows [R, hidden] · lm_headᵀ (vocabulary slices gathered from the ranks).
  void lm_head(const float* rows, int64_t R, float* logits);
  // Completes the row-parallel projections' partial sums (no-op without tensor parallelism).
  void all_reduce(float* data, int64_t count) {
    if (comm_ != nullptr) comm_->all_reduce_sum(data, count);
  }

  std::shared_ptr<const LlamaWeights> weights_;
  int64_t num_layers_;
  dist::Communicator* comm_ = nullptr;  // null or size 1: no collectives
  Announce announce_;
  std::vector<float> inv_freq_;
  float rope_scale_ = 1.0f;            // longrope's attention_factor on cos/sin
  std::vector<float> inv_freq_local_;  // Gemma 3's sliding layers (ModelConfig::Gemma::rope_local_theta)
  Scratch s_;
  MoeStats moe_stats_;
  Placement placement_;
  std::unique_ptr<DeviceState> dev_;  // the device runtime's weights and buffers
};

}  // namespace specd::model

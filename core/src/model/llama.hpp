// The Llama-family decoder (Llama 2/3, TinyLlama, Mistral, Qwen2, Qwen3): pre-norm blocks of
// GQA attention with rotary embeddings (Qwen3: per-head q/k RMSNorm first) and a SwiGLU MLP,
// on the CPU kernels. Weights are in
// their compute dtype (weights.hpp), activations in F32, the KV cache in its own dtype.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kv/kv_cache.hpp"
#include "model/forward.hpp"
#include "model/weights.hpp"

namespace specd::model {

class LlamaModel {
 public:
  // Runs the first `num_layers` layers of `weights` (< 0: all it holds). Several models may
  // share one LlamaWeights: a self-draft is the target's weights with fewer layers.
  explicit LlamaModel(std::shared_ptr<const LlamaWeights> weights, int64_t num_layers = -1);

  const ModelConfig& config() const { return weights_->config(); }
  const LlamaWeights& weights() const { return *weights_; }
  int64_t num_layers() const { return num_layers_; }
  int64_t vocab_size() const { return config().vocab_size; }
  // The KV cache shape this model needs for a given block size and cache dtype.
  kv::KvCacheShape kv_shape(int32_t block_size, DType kv_dtype) const;
  // Weight bytes read per decode step (the memory-bandwidth floor's numerator).
  size_t decode_bytes() const { return weights_->decode_bytes(num_layers_); }

  // An MTP module (weights().is_mtp()) takes batch.input_hidden and runs its one block over
  // eh_proj(concat(enorm(embed(token)), hnorm(input_hidden))) (docs/model-formats.md).
  // Runs the batch, writes each new token's K/V into `kv` and commits them
  // (kv.num_tokens(seq) grows by the number of new tokens), and fills `out`.
  // Throws specd::Error: kInvalidArgument for a token id outside the vocabulary or an empty
  // sequence input, kInternal when the KV reservation does not cover the new tokens or the
  // cache does not match this model. On throw, no sequence's length has changed.
  // Not thread-safe: one call at a time per LlamaModel (it owns its scratch buffers).
  void forward(const ForwardBatch& batch, kv::KvCache& kv, ForwardOutput& out);

 private:
  struct Scratch {
    std::vector<int32_t> tokens, positions, query_start, context_lens, block_tables, out_rows;
    std::vector<int64_t> slots;
    std::vector<float> x, h, q, k, v, attn, o, gate, up, cos, sin, rows, cat, head;
  };

  std::shared_ptr<const LlamaWeights> weights_;
  int64_t num_layers_;
  std::vector<float> inv_freq_;
  Scratch s_;
};

}  // namespace specd::model

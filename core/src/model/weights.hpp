// The Llama-family weights in their compute dtype, ready for the CPU kernels.
//
// The dtype of the matrices is chosen at load (model.dtype):
//   auto: every matrix in the dtype it is stored in when the kernels read it (f32, f16, bf16,
//     q8_0, q4_0, Q4_K, Q5_K, Q6_K: a GGUF file's tensors keep their own types, so a Q4_K_M
//     file runs its Q4_K and Q6_K tensors in place); GGUF-only block types (Q4_1, Q5_0, Q5_1,
//     Q8_K, Q2_K, Q3_K) are converted to q8_0 (model/gguf_quants.hpp);
//   f32 / f16 / bf16: every matrix converted to it (the checkpoint's own bytes when it matches);
//   q8_0 / q4_0 / q4_k / q5_k / q6_k: the decoder layers' projections are quantized at load
//   (GGUF block layouts, llama.cpp's reference rounding); q4_k_m / q5_k_m: llama.cpp's mix
//   (WeightDTypes below);
//   the token embeddings and the LM head stay in f16. The LM head decides the logits that
//   verification compares: quantized to 8 bits it alone moves log-probs by 0.01-0.02 nats on
//   the fixtures, at f16 the whole q8_0 model moves them by < 0.006 (tests/e2e/model/
//   dtype_test.cpp); llama.cpp likewise keeps its output layer above 4 bits. The embedding
//   table costs no bandwidth (one row per token) and 4-bit rows were the largest error source.
// Norm weights and biases are always F32 (a few KB).
//
// Placement (model.mmap): by default every tensor is copied once into owned, 2 MiB-aligned
// memory with transparent huge pages (kernels/aligned_buffer.hpp): decoding streams every
// weight byte per step, and with the 4 KiB pages of a file mapping the page walks cost a
// measurable share of the bandwidth (docs/performance.md). With WeightPlacement::kMap a tensor
// already stored in its compute dtype is used in place in the checkpoint's memory map (fast
// start, pages shared with the page cache; a GGUF file's Q/K rows too, see
// ModelConfig::qk_rows_interleaved); others are converted into owned memory either way.
// Pointers stay valid as long as the LlamaWeights object lives (it keeps the Checkpoint).
//
// Tensor parallelism (docs/distributed.md): with a TensorShard of size N, rank r holds only its
// part of each matrix, Megatron style, and reads only those bytes of the checkpoint:
//   column-parallel (whole rows): q/k/v (whole heads; KV heads split too), gate/up, their biases;
//   row-parallel (input columns): o_proj, down_proj; o_proj's bias on rank 0 only (added once);
//   vocabulary-parallel: rows [vocab_begin, vocab_begin + vocab_rows) of the embeddings and the
//     LM head (one slice when they are tied);
//   replicated: norms, Qwen3's q/k norms, an MTP module's enorm/hnorm/eh_proj.
// A quantized matrix is split along whole blocks (32 elements for q8_0/q4_0, the GGUF type's
// block for a type converted at load); a split inside a block is refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/checkpoint.hpp"
#include "specd/kernels/aligned_buffer.hpp"
#include "specd/kernels/matmul.hpp"

namespace specd::model {

using kernels::WeightView;

// Rank `rank` of a tensor-parallel group of `size` ranks; {0, 1} is the whole model.
struct TensorShard {
  int32_t rank = 0;
  int32_t size = 1;
  bool operator==(const TensorShard&) const = default;
};

// Part of a dimension: [begin, begin + count); count < 0 = all of it.
struct Slice {
  int64_t begin = 0;
  int64_t count = -1;
};

// One rank's part of each split dimension.
struct ShardDims {
  int64_t num_heads = 0;     // attention heads on this rank
  int64_t num_kv_heads = 0;  // KV heads on this rank (its KV cache holds only these)
  int64_t intermediate = 0;  // MLP width on this rank
  int64_t vocab_begin = 0;   // this rank's vocabulary rows: [vocab_begin, vocab_begin + vocab_rows)
  int64_t vocab_rows = 0;
  int64_t vocab_stride = 0;  // ceil(vocab / size): rank r's logits start at r * vocab_stride

  // Throws specd::Error(kInvalidArgument) naming the config file when shard.size does not
  // divide the attention heads, the KV heads or the MLP width, or leaves a rank no vocabulary.
  static ShardDims of(const ModelConfig& config, TensorShard shard);
};

// One expert of a mixture-of-experts MLP: a SwiGLU MLP of the expert width (this rank's part).
struct ExpertWeights {
  WeightView gate;  // [expert intermediate, hidden]
  WeightView up;    // [expert intermediate, hidden]
  WeightView down;  // [hidden, expert intermediate]
};

// One decoder layer. Shapes follow the checkpoint ([out, in] for projections); the biases are
// null unless the architecture has them (Qwen2), q_norm/k_norm unless it has them (Qwen3).
struct LayerWeights {
  const float* attn_norm = nullptr;  // [hidden]
  WeightView wq;                     // [num_heads * head_dim, hidden]
  WeightView wk;                     // [num_kv_heads * head_dim, hidden]
  WeightView wv;                     // [num_kv_heads * head_dim, hidden]
  const float* bq = nullptr;
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* q_norm = nullptr;    // [head_dim]
  const float* k_norm = nullptr;    // [head_dim]
  WeightView wo;                    // [hidden, num_heads * head_dim]
  const float* bo = nullptr;        // [hidden]; Llama with attention_bias (not Qwen2)
  const float* mlp_norm = nullptr;  // [hidden]
  // Gemma: the attention block's and the MLP's outputs are normalized before the residual add.
  const float* post_attn_norm = nullptr;  // [hidden]
  const float* post_mlp_norm = nullptr;   // [hidden]
  WeightView w_gate;                      // [intermediate, hidden]
  WeightView w_up;                        // [intermediate, hidden]
  WeightView w_down;                      // [hidden, intermediate]
  // Mixture of experts (ModelConfig::moe): the router [num_experts, hidden] in F32 and the
  // experts; the dense w_gate/w_up/w_down are then empty.
  WeightView router;
  std::vector<ExpertWeights> experts;
};

// A decoder layer's projection, for dtype choices that differ by tensor.
enum class LayerMatrix { kQ, kK, kV, kO, kGate, kUp, kDown };

// What model.dtype asks for: `base` for every decoder-layer projection (nullopt: auto, each
// matrix as stored), or with `mix` llama.cpp's _M recipe (q4_k_m, q5_k_m): attn_v and
// ffn_down of the first and last eighth of the layers and of every third layer between
// (use_more_bits in llama.cpp's quantizer) in Q6_K, the rest in `base`; the LM head in Q6_K.
struct WeightDTypes {
  std::optional<DType> base;
  bool mix = false;

  WeightDTypes() = default;
  WeightDTypes(std::nullopt_t) {}                    // NOLINT(google-explicit-constructor): auto
  WeightDTypes(DType d) : base(d) {}                 // NOLINT(google-explicit-constructor)
  WeightDTypes(std::optional<DType> d) : base(d) {}  // NOLINT(google-explicit-constructor)
  static WeightDTypes k_mix(DType base) {
    WeightDTypes w(base);
    w.mix = true;
    return w;
  }
  bool operator==(const WeightDTypes&) const = default;

  // The dtype of projection `m` of decoder layer `layer` of a model of `num_layers` (the
  // checkpoint's count, so that a self-draft's layers match the target's).
  std::optional<DType> layer(LayerMatrix m, int64_t layer, int64_t num_layers) const;
  // The embeddings' and the LM head's dtype: as stored (auto), the 16-bit or f32 base itself,
  // f16 for a quantized base (see the top of this file), Q6_K for the LM head of a mix.
  std::optional<DType> embeddings() const;
  std::optional<DType> lm_head() const;
  // "auto", "q4_0", "q4_k_m", ...
  std::string name() const;
};

// The model.dtype setting: "auto" (each matrix in its stored dtype, see above), f32 | f16 |
// bf16 | q8_0 | q4_0 | q4_k | q5_k | q6_k, or the mixes q4_k_m | q5_k_m. Throws specd::Error
// (kInvalidArgument) naming `what` for any other text.
WeightDTypes resolve_weight_dtype(const std::string& requested, const std::string& what);

enum class WeightPlacement { kCopy, kMap };

class LlamaWeights {
 public:
  // Loads the first `num_layers` decoder layers (< 0: all) plus embeddings, final norm and LM
  // head, converted to `dtype` (nullopt: auto, see above). Throws specd::Error naming the
  // tensor and file on a missing tensor or wrong shape, or a matrix whose rows cannot be
  // quantized (not whole blocks of 32). `shard`: only this rank's part (see the top of this
  // file); throws as ShardDims::of does, and on a split inside a quantized block.
  static std::shared_ptr<const LlamaWeights> load(std::shared_ptr<const Checkpoint> checkpoint, int64_t num_layers,
                                                  WeightDTypes dtype,
                                                  WeightPlacement placement = WeightPlacement::kCopy,
                                                  TensorShard shard = {});

  // MTP module `module` of `target`'s checkpoint (docs/model-formats.md "MTP modules"): one
  // decoder layer (mtp.<module>.block.*) plus enorm/hnorm/eh_proj, in the target's dtype and
  // placement and shard (eh_proj is replicated); the
  // embeddings, final norm and LM head are the target's (kept alive through `target`). Throws
  // specd::Error (kInvalidArgument) for a module the checkpoint does not have, or on a missing
  // tensor.
  static std::shared_ptr<const LlamaWeights> load_mtp(std::shared_ptr<const LlamaWeights> target, int64_t module);

  // An EAGLE-3 draft head (ModelConfig::eagle3; docs/model-formats.md "EAGLE-3 heads") for
  // `target`: fc, the `midlayer.*` decoder layer (q/k/v over 2 * hidden inputs) with its
  // hidden_norm, norm, lm_head over the draft vocabulary and d2t. The embeddings are the head's
  // own (embed_tokens.weight) or else the target's. Throws specd::Error naming the file and
  // tensor on a missing tensor or a wrong shape (a wrong fc width), a d2t entry that maps outside
  // the target's vocabulary, or a head whose vocabulary or target width is not the target's.
  static std::shared_ptr<const LlamaWeights> load_eagle3(std::shared_ptr<const Checkpoint> head,
                                                         std::shared_ptr<const LlamaWeights> target,
                                                         WeightDTypes dtype);

  const ModelConfig& config() const { return checkpoint_->config(); }
  // The dtype of the decoder layers' projections; with auto and a checkpoint of mixed types,
  // the one holding most of their bytes.
  DType dtype() const { return dtype_; }
  // What load() was asked for.
  const WeightDTypes& requested_dtype() const { return requested_; }
  WeightPlacement placement() const { return placement_; }
  TensorShard shard() const { return shard_; }
  const ShardDims& dims() const { return dims_; }
  bool is_mtp() const { return eh_proj_.data != nullptr; }
  const float* mtp_enorm() const { return enorm_; }           // [hidden]
  const float* mtp_hnorm() const { return hnorm_; }           // [hidden]
  const WeightView& mtp_eh_proj() const { return eh_proj_; }  // [hidden, 2 * hidden]
  bool is_eagle3() const { return fc_.data != nullptr; }
  const WeightView& eagle3_fc() const { return fc_; }                   // [hidden, 3 * target hidden]
  const float* eagle3_hidden_norm() const { return hidden_norm_; }      // [hidden]
  const std::vector<int32_t>& draft_to_target() const { return d2t_; }  // [draft vocab] target ids
  const Checkpoint& checkpoint() const { return *checkpoint_; }
  const std::shared_ptr<const Checkpoint>& checkpoint_ptr() const { return checkpoint_; }
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  const LayerWeights& layer(int64_t i) const { return layers_[static_cast<size_t>(i)]; }
  // The embeddings and the LM head hold dims().vocab_rows rows under tensor parallelism.
  const WeightView& embed() const { return embed_; }       // [vocab, hidden]
  const float* final_norm() const { return final_norm_; }  // [hidden]
  const WeightView& lm_head() const { return lm_head_; }   // [vocab, hidden]; == embed() when tied

  // Bytes of weights a decode step with `num_layers` layers reads once per step: every layer's
  // projections and norms, the final norm and the LM head (one embedding row is negligible),
  // in the stored dtypes; this rank's shard only. A mixture-of-experts layer counts its router
  // and experts_per_token experts of average size (what one row reads).
  size_t decode_bytes(int64_t num_layers) const;
  // Bytes of one expert of layer `layer` (0 for a dense layer): gate, up and down.
  size_t expert_bytes(int64_t layer) const;
  // Bytes held in owned buffers (the rest is used in place in the checkpoint's map).
  size_t owned_bytes() const { return owned_bytes_; }

 private:
  LlamaWeights() = default;
  // Rows `rows_part` x columns `cols_part` of tensor `name` ([rows, cols] in the checkpoint).
  // `dtype` nullopt: the tensor's own (compute) dtype.
  WeightView matrix(const std::string& name, int64_t rows, int64_t cols, std::optional<DType> dtype,
                    Slice rows_part = {}, Slice cols_part = {});
  // `add` is added to every element (Gemma's norm weights w act as 1 + w).
  const float* vector(const std::string& name, int64_t n, Slice part = {}, float add = 0.0f);
  // A norm weight: as stored, or 1 + w for a Gemma checkpoint in the Hugging Face layout.
  const float* norm(const std::string& name, int64_t n);
  // `index`: the layer's index in the checkpoint (-1: an MTP module's block, in the base dtype).
  // in_features: the q/k/v input width (0: hidden; an EAGLE-3 midlayer: 2 * hidden).
  void load_layer(const std::string& prefix, int64_t index, LayerWeights& l, int64_t in_features = 0);
  // A mixture-of-experts MLP (moe_weights.cpp): the router and every expert, from one tensor per
  // expert (Hugging Face) or the merged [experts, rows, cols] tensors (GGUF).
  void load_experts(const std::string& prefix, int64_t index, LayerWeights& l);
  // Rows x columns of `t` as matrix() takes them, for a tensor view of its own.
  WeightView matrix_of(const TensorView& t, int64_t rows, int64_t cols, std::optional<DType> dtype,
                       Slice rows_part = {}, Slice cols_part = {});
  DType layers_dtype() const;  // the dtype holding most of the layers' projection bytes
  std::byte* allocate(size_t bytes);

  std::shared_ptr<const Checkpoint> checkpoint_;
  DType dtype_ = DType::kF32;
  WeightDTypes requested_;
  WeightPlacement placement_ = WeightPlacement::kCopy;
  TensorShard shard_;
  ShardDims dims_;
  std::vector<kernels::AlignedBuffer> owned_;
  size_t owned_bytes_ = 0;
  std::vector<LayerWeights> layers_;
  WeightView embed_;
  const float* final_norm_ = nullptr;
  WeightView lm_head_;
  std::shared_ptr<const LlamaWeights> base_;  // MTP: the target whose shared tensors are used
  const float* enorm_ = nullptr;
  const float* hnorm_ = nullptr;
  WeightView eh_proj_;
  WeightView fc_;  // EAGLE-3
  const float* hidden_norm_ = nullptr;
  std::vector<int32_t> d2t_;
};

}  // namespace specd::model

// The Llama-family weights as F32 arrays, ready for the CPU kernels.
//
// F32 tensors are used in place in the checkpoint's memory map (no copy; pages are shared with
// the page cache); F16/BF16 tensors are widened into owned buffers at load. Either way the
// pointers stay valid as long as the LlamaWeights object lives (it keeps the Checkpoint).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/checkpoint.hpp"

namespace specd::model {

// One decoder layer. Shapes follow the checkpoint ([out, in] for projections); the biases are
// null unless the architecture has them (Qwen2).
struct LayerWeights {
  const float* attn_norm = nullptr;  // [hidden]
  const float* wq = nullptr;         // [num_heads * head_dim, hidden]
  const float* wk = nullptr;         // [num_kv_heads * head_dim, hidden]
  const float* wv = nullptr;         // [num_kv_heads * head_dim, hidden]
  const float* bq = nullptr;
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* wo = nullptr;        // [hidden, num_heads * head_dim]
  const float* bo = nullptr;        // [hidden]; Llama with attention_bias (not Qwen2)
  const float* mlp_norm = nullptr;  // [hidden]
  const float* w_gate = nullptr;    // [intermediate, hidden]
  const float* w_up = nullptr;      // [intermediate, hidden]
  const float* w_down = nullptr;    // [hidden, intermediate]
};

class LlamaWeights {
 public:
  // Loads the first `num_layers` decoder layers (< 0: all) plus embeddings, final norm and LM
  // head. Throws specd::Error naming the tensor and file on a missing tensor or wrong shape.
  static std::shared_ptr<const LlamaWeights> load(std::shared_ptr<const Checkpoint> checkpoint,
                                                  int64_t num_layers = -1);

  // MTP module `module` of `target`'s checkpoint (docs/model-formats.md "MTP modules"): one
  // decoder layer (mtp.<module>.block.*) plus enorm/hnorm/eh_proj; the embeddings, final norm
  // and LM head are the target's (kept alive through `target`). Throws specd::Error
  // (kInvalidArgument) for a module the checkpoint does not have, or on a missing tensor.
  static std::shared_ptr<const LlamaWeights> load_mtp(std::shared_ptr<const LlamaWeights> target, int64_t module);

  const ModelConfig& config() const { return checkpoint_->config(); }
  bool is_mtp() const { return eh_proj_ != nullptr; }
  const float* mtp_enorm() const { return enorm_; }      // [hidden]
  const float* mtp_hnorm() const { return hnorm_; }      // [hidden]
  const float* mtp_eh_proj() const { return eh_proj_; }  // [hidden, 2 * hidden]
  const Checkpoint& checkpoint() const { return *checkpoint_; }
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  const LayerWeights& layer(int64_t i) const { return layers_[static_cast<size_t>(i)]; }
  const float* embed() const { return embed_; }       // [vocab, hidden]
  const float* final_norm() const { return final_norm_; }  // [hidden]
  const float* lm_head() const { return lm_head_; }   // [vocab, hidden]; == embed() when tied

  // Bytes of weights a decode step with `num_layers` layers reads once per step: every layer's
  // projections and norms, the final norm and the LM head (one embedding row is negligible).
  size_t decode_bytes(int64_t num_layers) const;
  // Bytes copied into owned buffers (0 for an F32 checkpoint with aligned tensors).
  size_t owned_bytes() const { return owned_bytes_; }

 private:
  LlamaWeights() = default;
  const float* f32(const std::string& name, const std::vector<int64_t>& shape);
  void load_layer(const std::string& prefix, LayerWeights& l);

  std::shared_ptr<const Checkpoint> checkpoint_;
  std::vector<std::unique_ptr<float[]>> owned_;
  size_t owned_bytes_ = 0;
  std::vector<LayerWeights> layers_;
  const float* embed_ = nullptr;
  const float* final_norm_ = nullptr;
  const float* lm_head_ = nullptr;
  std::shared_ptr<const LlamaWeights> base_;  // MTP: the target whose shared tensors are used
  const float* enorm_ = nullptr;
  const float* hnorm_ = nullptr;
  const float* eh_proj_ = nullptr;
};

}  // namespace specd::model

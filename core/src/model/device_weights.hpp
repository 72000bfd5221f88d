// The Llama-family weights in a device's memory, for LlamaModel's device runtime
// (device_forward.cpp; docs/cuda.md "Model runtime").
//
// Uploaded once from the LlamaWeights the CPU path reads, in the same dtypes (every dtype the
// kernels take), so a device computes from the same bytes: the projections of the first
// num_layers layers, their biases and norms, the embedding table, the final norm and the LM
// head (uploaded once when tied). A GGUF file's interleaved Q/K rows
// (ModelConfig::qk_rows_interleaved) are put in rotate-half order on the way, a permutation of
// whole rows: each output is computed as the CPU path computes it and lands where its
// de-interleaving would have put it.
//
// What the device runtime does not run yet is refused here, by name: tensor-parallel shards,
// mixture-of-experts layers and Gemma's blocks (the CPU path runs them). An MTP module's norms
// and eh_proj and an EAGLE-3 head's fc and hidden norm are uploaded with its layer; what they
// share with their target (embeddings; an MTP module's final norm and LM head) is the
// target's upload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/device_graphs.hpp"
#include "model/weights.hpp"
#include "specd/kernels/attention.hpp"
#include "specd/kernels/device_memory.hpp"

namespace specd::model {

struct DeviceLayer {
  const float* attn_norm = nullptr;
  WeightView wq, wk, wv, wo;
  const float* bq = nullptr;
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* bo = nullptr;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  const float* mlp_norm = nullptr;
  WeightView w_gate, w_up, w_down;
};

class DeviceWeights {
 public:
  // Throws specd::Error: kUnsupported for a model the device runtime does not run (naming what),
  // kUnsupported / kOutOfMemory from the device's allocator.
  DeviceWeights(const LlamaWeights& host, int64_t num_layers, kernels::Device device);
  // What of `host` the device runtime does not run yet ("" when it runs all of it).
  static std::string unsupported(const LlamaWeights& host);

  kernels::Device device() const { return device_; }
  const DeviceLayer& layer(int64_t i) const { return layers_[static_cast<size_t>(i)]; }
  const WeightView& embed() const { return embed_; }
  const float* final_norm() const { return final_norm_; }
  const WeightView& lm_head() const { return lm_head_; }
  // An MTP module's enorm, hnorm and eh_proj (LlamaWeights::is_mtp; null / empty otherwise).
  const float* mtp_enorm() const { return mtp_enorm_; }
  const float* mtp_hnorm() const { return mtp_hnorm_; }
  const WeightView& mtp_eh_proj() const { return mtp_eh_proj_; }
  // An EAGLE-3 head's fc and hidden_norm (LlamaWeights::is_eagle3; empty / null otherwise).
  const WeightView& eagle3_fc() const { return eagle3_fc_; }
  const float* eagle3_hidden_norm() const { return eagle3_hidden_norm_; }
  // Device bytes this object uploaded itself (not counting copies it shares).
  size_t bytes() const { return bytes_; }

 private:
  // A device copy of `w` (rows permuted to rotate-half order per head of head_dim when
  // `deinterleave`), shared with every other DeviceWeights on the device that uploaded the same
  // host tensor the same way.
  WeightView matrix(const WeightView& w, bool deinterleave = false);
  const float* vector(const float* v, int64_t n, bool deinterleave = false);
  void* upload(const void* host, size_t bytes, size_t row_bytes, bool deinterleave);

  kernels::Device device_;
  int64_t head_dim_ = 0;
  std::vector<std::shared_ptr<kernels::DeviceBuffer>> buffers_;
  std::vector<DeviceLayer> layers_;
  WeightView embed_, lm_head_, mtp_eh_proj_, eagle3_fc_;
  const float* eagle3_hidden_norm_ = nullptr;
  const float* final_norm_ = nullptr;
  const float* mtp_enorm_ = nullptr;
  const float* mtp_hnorm_ = nullptr;
  size_t bytes_ = 0;
};

// A growable scratch buffer in a device's memory (contents not kept when it grows).
class DeviceScratch {
 public:
  template <class T>
  T* get(kernels::Device device, size_t n) {
    if (buf_.size() < n * sizeof(T) || buf_.device() != device) buf_ = kernels::DeviceBuffer(device, n * sizeof(T));
    return buf_.as<T>();
  }

 private:
  kernels::DeviceBuffer buf_;
};

// LlamaModel's device runtime: the uploaded weights, the activations of a forward in device
// memory, and the metadata of a call (uploaded in one copy from `meta_host`).
struct DeviceState {
  DeviceState(const LlamaWeights& host, int64_t num_layers, kernels::Device device)
      : weights(host, num_layers, device) {}

  DeviceWeights weights;
  DeviceScratch x_buf, h_buf, o_buf, q_buf, k_buf, v_buf, attn_buf, gate_buf, up_buf, rows_buf, logits_buf, meta_buf,
      in_buf, cat_buf;
  // The current call: its activations (sized for its tokens) and its metadata on the device.
  float *x = nullptr, *h = nullptr, *o = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *attn = nullptr,
        *gate = nullptr;
  float* cat = nullptr;  // an MTP module's eh_proj input, an EAGLE-3 head's attention input [T, 2 * hidden]
  const int32_t* tokens = nullptr;
  const int64_t* slots = nullptr;
  const int32_t* out_rows = nullptr;
  const float* cos = nullptr;
  const float* sin = nullptr;
  kernels::AttentionPlan attention_plan;  // the call's attention layout, prepared once for every layer
  ForwardGraphs graphs;                   // Placement::graphs: the recorded forwards
  std::vector<std::byte> meta_host;
  std::vector<float> host_rows;  // device rows copied back (auxiliary hidden states, draft-vocabulary logits)
};

}  // namespace specd::model

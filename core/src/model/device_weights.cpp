#include "model/device_weights.hpp"

#include <cstring>
#include <string>

#include "specd/error.hpp"

namespace specd::model {
namespace {

// Row r of a head in rotate-half order is row source_row(r) of llama.cpp's interleaved order
// (element 2i + j of a head is element j * head_dim / 2 + i after de-interleaving).
int64_t source_row(int64_t r, int64_t head_dim) {
  const int64_t head = r / head_dim, i = r % head_dim, half = head_dim / 2;
  return head * head_dim + (i < half ? 2 * i : 2 * (i - half) + 1);
}

}  // namespace

std::string DeviceWeights::unsupported(const LlamaWeights& host) {
  const ModelConfig& c = host.config();
  if (host.shard().size != 1) return "tensor-parallel shards";
  if (host.is_mtp()) return "MTP modules";
  if (host.is_eagle3()) return "EAGLE-3 heads";
  if (c.moe) return "mixture-of-experts layers (" + c.config_path.string() + ")";
  if (c.gemma) return "Gemma's blocks (" + c.config_path.string() + ")";
  return {};
}

DeviceWeights::DeviceWeights(const LlamaWeights& host, int64_t num_layers, kernels::Device device)
    : device_(device), head_dim_(host.config().head_dim) {
  const ModelConfig& c = host.config();
  if (const std::string what = unsupported(host); !what.empty())
    throw Error(ErrorCode::kUnsupported, "the device runtime does not run " + what + " yet (model.device: cpu does)");
  const bool il = c.qk_rows_interleaved;
  layers_.reserve(static_cast<size_t>(num_layers));
  for (int64_t i = 0; i < num_layers; ++i) {
    const LayerWeights& w = host.layer(i);
    DeviceLayer d;
    d.attn_norm = vector(w.attn_norm, c.hidden_size);
    d.wq = matrix(w.wq, il);
    d.wk = matrix(w.wk, il);
    d.wv = matrix(w.wv);
    d.wo = matrix(w.wo);
    d.bq = vector(w.bq, w.wq.rows, il);
    d.bk = vector(w.bk, w.wk.rows, il);
    d.bv = vector(w.bv, w.wv.rows);
    d.bo = vector(w.bo, w.wo.rows);
    d.q_norm = vector(w.q_norm, head_dim_);
    d.k_norm = vector(w.k_norm, head_dim_);
    d.mlp_norm = vector(w.mlp_norm, c.hidden_size);
    d.w_gate = matrix(w.w_gate);
    d.w_up = matrix(w.w_up);
    d.w_down = matrix(w.w_down);
    layers_.push_back(d);
  }
  embed_ = matrix(host.embed());
  lm_head_ = host.lm_head().data == host.embed().data ? embed_ : matrix(host.lm_head());
  final_norm_ = vector(host.final_norm(), c.hidden_size);
}

WeightView DeviceWeights::matrix(const WeightView& w, bool deinterleave) {
  const size_t row = kernels::row_bytes(w.dtype, w.cols);
  kernels::DeviceBuffer& b = buffers_.emplace_back(device_, w.bytes());
  if (!deinterleave) {
    kernels::copy_to_device(device_, b.data(), w.data, w.bytes());
  } else {  // permuted in host memory, then one copy
    std::vector<std::byte> rows(w.bytes());
    const auto* src = static_cast<const std::byte*>(w.data);
    for (int64_t r = 0; r < w.rows; ++r)
      std::memcpy(rows.data() + static_cast<size_t>(r) * row, src + static_cast<size_t>(source_row(r, head_dim_)) * row,
                  row);
    kernels::copy_to_device(device_, b.data(), rows.data(), rows.size());
  }
  bytes_ += w.bytes();
  return {w.dtype, b.data(), w.rows, w.cols};
}

const float* DeviceWeights::vector(const float* v, int64_t n, bool deinterleave) {
  if (v == nullptr) return nullptr;
  std::vector<float> host(v, v + n);
  if (deinterleave)
    for (int64_t r = 0; r < n; ++r) host[static_cast<size_t>(r)] = v[source_row(r, head_dim_)];
  kernels::DeviceBuffer& b = buffers_.emplace_back(device_, host.size() * sizeof(float));
  kernels::copy_to_device(device_, b.data(), host.data(), b.size());
  bytes_ += b.size();
  return b.as<float>();
}

}  // namespace specd::model

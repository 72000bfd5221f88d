#include "model/device_weights.hpp"

#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "specd/error.hpp"

namespace specd::model {
namespace {

// Uploads alive on each device, by what they are a copy of: models over the same host tensors
// (a self-draft over its target's layers, a model's tied embedding and LM head) share one
// device copy. An entry lives as long as a DeviceWeights holds it, and a DeviceWeights lives
// inside a LlamaModel that keeps the host weights alive, so a host address is never reused
// while its entry is.
struct UploadKey {
  kernels::Device device;
  const void* host;
  size_t bytes;
  bool deinterleave;
  auto operator<=>(const UploadKey&) const = default;
};
std::mutex uploads_mutex;
std::map<UploadKey, std::weak_ptr<kernels::DeviceBuffer>>& uploads() {
  static std::map<UploadKey, std::weak_ptr<kernels::DeviceBuffer>> m;
  return m;
}

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
  lm_head_ = matrix(host.lm_head());  // the embedding's upload when tied
  final_norm_ = vector(host.final_norm(), c.hidden_size);
  if (host.is_eagle3()) {  // its fusion layer and hidden norm (its embeddings: the target's upload)
    eagle3_fc_ = matrix(host.eagle3_fc());
    eagle3_hidden_norm_ = vector(host.eagle3_hidden_norm(), c.hidden_size);
  }
  if (host.is_mtp()) {  // its own norms and projection; embeddings, final norm, LM head: the base's uploads
    mtp_enorm_ = vector(host.mtp_enorm(), c.hidden_size);
    mtp_hnorm_ = vector(host.mtp_hnorm(), c.hidden_size);
    mtp_eh_proj_ = matrix(host.mtp_eh_proj());
  }
}

void* DeviceWeights::upload(const void* host, size_t bytes, size_t row_bytes, bool deinterleave) {
  const std::lock_guard<std::mutex> lock(uploads_mutex);
  const UploadKey key{device_, host, bytes, deinterleave};
  std::shared_ptr<kernels::DeviceBuffer> b = uploads()[key].lock();
  if (b == nullptr) {
    b = std::make_shared<kernels::DeviceBuffer>(device_, bytes);
    if (!deinterleave) {
      kernels::copy_to_device(device_, b->data(), host, bytes);
    } else {  // whole rows permuted in host memory, then one copy
      std::vector<std::byte> rows(bytes);
      const auto* src = static_cast<const std::byte*>(host);
      for (size_t r = 0; r < bytes / row_bytes; ++r)
        std::memcpy(rows.data() + r * row_bytes,
                    src + static_cast<size_t>(source_row(static_cast<int64_t>(r), head_dim_)) * row_bytes, row_bytes);
      kernels::copy_to_device(device_, b->data(), rows.data(), rows.size());
    }
    uploads()[key] = b;
    bytes_ += bytes;
  }
  buffers_.push_back(b);
  return b->data();
}

WeightView DeviceWeights::matrix(const WeightView& w, bool deinterleave) {
  return {w.dtype, upload(w.data, w.bytes(), kernels::row_bytes(w.dtype, w.cols), deinterleave), w.rows, w.cols};
}

const float* DeviceWeights::vector(const float* v, int64_t n, bool deinterleave) {
  if (v == nullptr) return nullptr;
  return static_cast<const float*>(upload(v, static_cast<size_t>(n) * sizeof(float), sizeof(float), deinterleave));
}

}  // namespace specd::model

// The EAGLE-3 head's parts of LlamaModel's forward (docs/model-formats.md "EAGLE-3 heads"). Per
// new token t, with g_t its input state:
//   g = fc(target states) when given 3 * target hidden wide, else the head's own previous output
//   a = [input_layernorm(embed(t)) | hidden_norm(g)]        (2 * hidden)
//   x = g + o_proj(attention(q, k, v of a))                  (RoPE, paged KV, as any layer)
//   x = x + mlp(post_attention_layernorm(x))
//   logits = lm_head(norm(x)) over the draft vocabulary, scattered to target ids by d2t
// and its hidden output is x before the final norm: the next draft step's g.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "model/llama.hpp"
#include "specd/kernels/matmul.hpp"
#include "specd/kernels/rmsnorm.hpp"

namespace specd::model {
namespace {
constexpr kernels::Device kCpu = kernels::Device::kCpu;
}  // namespace

void LlamaModel::eagle3_input(const ForwardBatch& batch, int64_t T) {
  const int64_t H = config().hidden_size;
  const float eps = static_cast<float>(config().rms_norm_eps);
  float* x = s_.x.data();
  float* h = s_.h.data();
  float* o = s_.o.data();
  const int64_t width = batch.input_hidden_width == 0 ? H : batch.input_hidden_width;
  if (width == H) {
    std::memcpy(x, batch.input_hidden, static_cast<size_t>(T * H) * sizeof(float));
  } else {  // the target's three states, fused
    kernels::matmul(kCpu, batch.input_hidden, weights_->eagle3_fc(), nullptr, x, T);
  }
  embed(T, o);
  ensure(s_.cat, T * 2 * H);
  kernels::rmsnorm(kCpu, o, weights_->layer(0).attn_norm, h, T, H, eps);
  kernels::rmsnorm(kCpu, x, weights_->eagle3_hidden_norm(), o, T, H, eps);
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(s_.cat.data() + t * 2 * H, h + t * H, static_cast<size_t>(H) * sizeof(float));
    std::memcpy(s_.cat.data() + t * 2 * H + H, o + t * H, static_cast<size_t>(H) * sizeof(float));
  }
}

void LlamaModel::eagle3_logits(const float* rows, int64_t R, float* logits) {
  ensure(s_.head_local, R * weights_->lm_head().rows);  // the draft vocabulary
  kernels::matmul(kCpu, rows, weights_->lm_head(), nullptr, s_.head_local.data(), R);
  scatter_draft_logits(s_.head_local.data(), R, logits);
}

void LlamaModel::scatter_draft_logits(const float* draft, int64_t R, float* logits) const {
  const std::vector<int32_t>& d2t = weights_->draft_to_target();
  const auto Vd = static_cast<int64_t>(d2t.size());
  const int64_t V = config().vocab_size;
  std::fill(logits, logits + R * V, -std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < R; ++r)
    for (int64_t i = 0; i < Vd; ++i) logits[r * V + d2t[static_cast<size_t>(i)]] = draft[r * Vd + i];
}

}  // namespace specd::model

// The mixture-of-experts MLP of LlamaModel's forward (ModelConfig::moe), expert-grouped.
//
// Per new token t with normalized input h_t:
//   p = softmax(router · h_t); the experts_per_token experts of highest p (ties: the lower
//   index), their weights p renormalized to sum 1 when norm_topk_prob;
//   o_t = sum over them, in that order, of weight * down(silu(gate(h_t)) * up(h_t)).
// Every token of the batch (prefill chunks, decode rows, the k+1 rows of speculative scoring)
// is routed first; then each expert that any of them chose runs once over all its rows, so its
// weights are read once per forward however many rows use it. The dense kernels' rows do not
// depend on the other rows of a call (kernels/matmul.hpp), and each token sums its experts in
// its own fixed order, so a row's output is the same whatever else the batch routes where:
// scoring k+1 positions gives the logits of k+1 single-token decodes, bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "model/llama.hpp"
#include "specd/kernels/matmul.hpp"

namespace specd::model {
namespace {

constexpr kernels::Device kCpu = kernels::Device::kCpu;

template <class T>
void ensure(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
}

// The top `k` of softmax(logits[0..E)) into ids/weights, highest first (ties: lower index).
void route(const float* logits, int64_t E, int64_t k, bool renormalize, int32_t* ids, float* weights) {
  float max = logits[0];
  for (int64_t e = 1; e < E; ++e) max = std::max(max, logits[e]);
  double sum = 0;
  for (int64_t e = 0; e < E; ++e) sum += std::exp(static_cast<double>(logits[e] - max));
  for (int64_t j = 0; j < k; ++j) {
    int32_t best = -1;
    for (int64_t e = 0; e < E; ++e) {
      if (std::find(ids, ids + j, static_cast<int32_t>(e)) != ids + j) continue;
      if (best < 0 || logits[e] > logits[best]) best = static_cast<int32_t>(e);
    }
    ids[j] = best;
    weights[j] = static_cast<float>(std::exp(static_cast<double>(logits[best] - max)) / sum);
  }
  if (!renormalize) return;
  double chosen = 0;
  for (int64_t j = 0; j < k; ++j) chosen += weights[j];
  for (int64_t j = 0; j < k; ++j) weights[j] = static_cast<float>(weights[j] / chosen);
}

}  // namespace

void LlamaModel::moe_mlp(const LayerWeights& w, int64_t T) {
  const ModelConfig::Moe& m = *config().moe;
  const int64_t H = config().hidden_size, I = weights_->dims().intermediate;
  const int64_t E = m.num_experts, K = m.experts_per_token;
  const float* h = s_.h.data();
  // Route every token.
  ensure(s_.router, T * E);
  ensure(s_.route_ids, T * K);
  ensure(s_.route_weights, T * K);
  kernels::matmul(kCpu, h, w.router, nullptr, s_.router.data(), T);
  for (int64_t t = 0; t < T; ++t)
    route(s_.router.data() + t * E, E, K, m.norm_topk_prob, s_.route_ids.data() + t * K,
          s_.route_weights.data() + t * K);
  // Group the (token, choice) slots by expert: a counting sort, tokens in order within an expert.
  s_.expert_start.assign(static_cast<size_t>(E + 1), 0);
  for (int64_t i = 0; i < T * K; ++i) ++s_.expert_start[static_cast<size_t>(s_.route_ids[i]) + 1];
  for (int64_t e = 0; e < E; ++e) s_.expert_start[e + 1] += s_.expert_start[e];
  ensure(s_.expert_slots, T * K);
  std::vector<int32_t>& fill = s_.expert_fill;
  fill.assign(s_.expert_start.begin(), s_.expert_start.end() - 1);
  for (int64_t i = 0; i < T * K; ++i) s_.expert_slots[fill[s_.route_ids[i]]++] = static_cast<int32_t>(i);
  // Each chosen expert over its rows; its outputs into their (token, choice) slots.
  ensure(s_.expert_in, T * H);
  ensure(s_.expert_out, T * K * H);
  ensure(s_.gate, T * I);
  ensure(s_.up, T * I);
  int64_t read = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int32_t begin = s_.expert_start[e], n = s_.expert_start[e + 1] - begin;
    if (n == 0) continue;
    ++read;
    const ExpertWeights& x = w.experts[static_cast<size_t>(e)];
    for (int32_t r = 0; r < n; ++r)
      std::memcpy(s_.expert_in.data() + r * H, h + (s_.expert_slots[begin + r] / K) * H,
                  static_cast<size_t>(H) * sizeof(float));
    if (x.gate.dtype == x.up.dtype) {
      kernels::matmul_swiglu(kCpu, s_.expert_in.data(), x.gate, x.up, s_.gate.data(), n);
    } else {
      kernels::matmul(kCpu, s_.expert_in.data(), x.gate, nullptr, s_.gate.data(), n);
      kernels::matmul(kCpu, s_.expert_in.data(), x.up, nullptr, s_.up.data(), n);
      kernels::silu_mul(kCpu, s_.gate.data(), s_.up.data(), n * I);
    }
    kernels::matmul(kCpu, s_.gate.data(), x.down, nullptr, s_.expert_in.data(), n);
    for (int32_t r = 0; r < n; ++r)
      std::memcpy(s_.expert_out.data() + static_cast<int64_t>(s_.expert_slots[begin + r]) * H,
                  s_.expert_in.data() + r * H, static_cast<size_t>(H) * sizeof(float));
  }
  // o_t = the weighted sum of its experts' outputs, in its own choice order.
  float* o = s_.o.data();
  for (int64_t t = 0; t < T; ++t) {
    float* out = o + t * H;
    std::fill(out, out + H, 0.0f);
    for (int64_t j = 0; j < K; ++j) {
      const float wj = s_.route_weights[t * K + j];
      const float* y = s_.expert_out.data() + (t * K + j) * H;
      for (int64_t i = 0; i < H; ++i) out[i] += wj * y[i];
    }
  }
  moe_stats_.experts_read += static_cast<uint64_t>(read);
  moe_stats_.expert_rows += static_cast<uint64_t>(T * K);
  moe_stats_.layer_passes += 1;
  all_reduce(o, T * H);
}

}  // namespace specd::model

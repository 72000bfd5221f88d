// The mixture-of-experts MLP of LlamaModel's forward (ModelConfig::moe), expert-grouped.
//
// Per new token t with normalized input h_t:
//   p = softmax(router · h_t); the experts_per_token experts of highest p (ties: the lower
//   index), their weights p renormalized to sum 1 when norm_topk_prob;
//   o_t = sum over them, in that order, of weight * down(silu(gate(h_t)) * up(h_t)).
// Every token of the batch (prefill chunks, decode rows, the k+1 rows of speculative scoring)
// is routed first; then each expert that any of them chose runs once over all its rows, so its
// weights are read once per forward however many rows use it; all experts of a projection share
// one parallel region (kernels::matmul_grouped). The dense kernels' rows do not
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
  // Every chosen expert over its rows, all experts in one parallel region per projection
  // (kernels::matmul_grouped): inputs gathered in expert order, outputs in the same order.
  const int64_t n = T * K;
  ensure(s_.expert_in, n * H);
  ensure(s_.expert_out, n * H);
  ensure(s_.gate, n * I);
  ensure(s_.up, n * I);
  ensure(s_.expert_pos, n);
  for (int64_t p = 0; p < n; ++p) {
    const int32_t slot = s_.expert_slots[p];
    s_.expert_pos[slot] = static_cast<int32_t>(p);
    std::memcpy(s_.expert_in.data() + p * H, h + (slot / K) * H, static_cast<size_t>(H) * sizeof(float));
  }
  std::vector<kernels::GroupedMatmul>& gate_up = s_.groups;
  std::vector<kernels::GroupedMatmul>& up_only = s_.groups_up;
  std::vector<kernels::GroupedMatmul>& down = s_.groups_down;
  gate_up.clear();
  up_only.clear();
  down.clear();
  int64_t read = 0;
  bool mixed = false;
  for (int64_t e = 0; e < E; ++e) {
    const int32_t begin = s_.expert_start[e], rows = s_.expert_start[e + 1] - begin;
    if (rows == 0) continue;
    ++read;
    const ExpertWeights& x = w.experts[static_cast<size_t>(e)];
    const bool fused = x.gate.dtype == x.up.dtype;
    mixed = mixed || !fused;
    gate_up.push_back({s_.expert_in.data() + begin * H, rows, x.gate, s_.gate.data() + begin * I,
                       fused ? x.up : kernels::WeightView{}});
    if (!fused) up_only.push_back({s_.expert_in.data() + begin * H, rows, x.up, s_.up.data() + begin * I});
    down.push_back({s_.gate.data() + begin * I, rows, x.down, s_.expert_out.data() + begin * H});
  }
  kernels::matmul_grouped(kCpu, gate_up);
  if (mixed) {  // an expert whose gate and up differ in dtype: up apart, then silu(gate) * up
    kernels::matmul_grouped(kCpu, up_only);
    for (const kernels::GroupedMatmul& g : up_only) {
      float* gate = s_.gate.data() + (g.c - s_.up.data());  // the same rows of the gate output
      kernels::silu_mul(kCpu, gate, g.c, g.m * I);
    }
  }
  kernels::matmul_grouped(kCpu, down);
  // o_t = the weighted sum of its experts' outputs, in its own choice order.
  float* o = s_.o.data();
  for (int64_t t = 0; t < T; ++t) {
    float* out = o + t * H;
    std::fill(out, out + H, 0.0f);
    for (int64_t j = 0; j < K; ++j) {
      const float wj = s_.route_weights[t * K + j];
      const float* y = s_.expert_out.data() + static_cast<int64_t>(s_.expert_pos[t * K + j]) * H;
      for (int64_t i = 0; i < H; ++i) out[i] += wj * y[i];
    }
  }
  moe_stats_.experts_read += static_cast<uint64_t>(read);
  moe_stats_.expert_rows += static_cast<uint64_t>(T * K);
  moe_stats_.layer_passes += 1;
  all_reduce(o, T * H);
}

}  // namespace specd::model

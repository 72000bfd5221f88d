// Paged attention on CUDA: one block per (new token, query head). The host has already
// validated the call and laid out each token's keys (attention.cpp): its sequence, its logical
// key run [first, len) of which the first `linear` positions are cache positions themselves and
// the rest tree ancestors (root first) at path[path_off ...]. Warp w takes the logical keys
// first + w, first + w + kWarps, ...; three passes (max, then exp-sum with the weighted values)
// in that fixed order, the warps combined in index order. A key's work depends on its logical
// index only, so a tree node gives bit for bit what its path laid out as a chain gives (the
// CPU's rule, which greedy tree verification rests on).
#include <math_constants.h>

#include "block_reduce.cuh"
#include "cuda_ops.hpp"
#include "widen.cuh"

namespace specd::kernels::cuda {
namespace {

constexpr int kWarps = kThreads / 32;
constexpr int kMaxPerLane = 8;  // head_dim <= 256

struct Args {
  PagedAttentionParams p;
  const TokenKeys* keys;
  const int32_t* paths;
};

template <class Widen>
__device__ float score(const Args& a, const float* q, int32_t s, const TokenKeys& tk, int32_t j, int32_t g,
                       Widen widen) {
  const PagedAttentionParams& p = a.p;
  const int32_t pos = j < tk.linear ? j : a.paths[tk.path_off + (j - tk.linear)];
  const int32_t block = p.block_tables[static_cast<int64_t>(s) * p.block_table_stride + pos / p.block_size];
  const int64_t off =
      ((static_cast<int64_t>(block) * p.block_size + pos % p.block_size) * p.num_kv_heads + g) * p.head_dim;
  float d = 0.0f;
  for (int e = threadIdx.x & 31; e < p.head_dim; e += 32) d = fmaf(q[e], widen(p.k_cache, off + e), d);
  float x = warp_sum(d) * p.scale;
  if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
  return x;
}

template <class Widen>
__global__ void attention_kernel(Args a, Widen widen) {
  __shared__ float red[kWarps];
  __shared__ float partial[kWarps][kMaxPerLane * 32];
  const PagedAttentionParams& p = a.p;
  const int32_t t = blockIdx.x / p.num_heads, h = blockIdx.x % p.num_heads;
  const int32_t g = h / (p.num_heads / p.num_kv_heads);
  TokenKeys tk = a.keys[t];
  if (p.window > 0) tk.first = max(tk.first, tk.len - p.window);  // a no-op where the host applied it
  const int32_t s = tk.seq;
  const float* q = p.q + (static_cast<int64_t>(t) * p.num_heads + h) * p.head_dim;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float m = -CUDART_INF_F;
  for (int32_t j = tk.first + warp; j < tk.len; j += kWarps) m = fmaxf(m, score(a, q, s, tk, j, g, widen));
  m = block_max(m, red);
  float sum = 0.0f, acc[kMaxPerLane] = {};
  for (int32_t j = tk.first + warp; j < tk.len; j += kWarps) {
    const float e = expf(score(a, q, s, tk, j, g, widen) - m);
    sum += e;
    const int32_t pos = j < tk.linear ? j : a.paths[tk.path_off + (j - tk.linear)];
    const int32_t block = p.block_tables[static_cast<int64_t>(s) * p.block_table_stride + pos / p.block_size];
    const int64_t off =
        ((static_cast<int64_t>(block) * p.block_size + pos % p.block_size) * p.num_kv_heads + g) * p.head_dim;
#pragma unroll
    for (int i = 0; i < kMaxPerLane; ++i) {
      const int e_idx = lane + 32 * i;
      if (e_idx < p.head_dim) acc[i] = fmaf(e, widen(p.v_cache, off + e_idx), acc[i]);
    }
  }
  // Every lane of a warp holds the warp's sum: one lane each into the block's.
  const float total = block_sum(lane == 0 ? sum : 0.0f, red);
#pragma unroll
  for (int i = 0; i < kMaxPerLane; ++i) partial[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  float* o = p.out + (static_cast<int64_t>(t) * p.num_heads + h) * p.head_dim;
  for (int e = threadIdx.x; e < p.head_dim; e += kThreads) {
    float v = 0.0f;
    for (int w = 0; w < kWarps; ++w) v += partial[w][e];
    o[e] = v / total;
  }
}

}  // namespace

void paged_attention_prepared(const PagedAttentionParams& p, const TokenKeys* keys, int32_t num_tokens,
                              const int32_t* paths) {
  if (num_tokens == 0) return;
  const Args a{p, keys, paths};
  const unsigned grid = static_cast<unsigned>(num_tokens) * static_cast<unsigned>(p.num_heads);
  switch (p.kv_dtype) {
    case DType::kF32:
      attention_kernel<<<grid, kThreads, 0, stream()>>>(a, WidenF32{});
      break;
    case DType::kF16:
      attention_kernel<<<grid, kThreads, 0, stream()>>>(a, WidenF16{});
      break;
    default:
      attention_kernel<<<grid, kThreads, 0, stream()>>>(a, WidenBF16{});
      break;
  }
  check_launch("paged_attention");
}

void paged_attention(const PagedAttentionParams& p, const TokenKeys* keys, int32_t num_tokens, const int32_t* paths,
                     int64_t num_path) {
  if (num_tokens == 0) return;
  const size_t key_bytes = static_cast<size_t>(num_tokens) * sizeof(TokenKeys);
  auto* dev = static_cast<uint8_t*>(
      scratch(Scratch::kAttentionKeys, key_bytes + static_cast<size_t>(num_path) * sizeof(int32_t) + 16));
  copy_to_device(dev, keys, key_bytes);
  const size_t path_at = (key_bytes + 15) / 16 * 16;
  if (num_path > 0) copy_to_device(dev + path_at, paths, static_cast<size_t>(num_path) * sizeof(int32_t));
  paged_attention_prepared(p, reinterpret_cast<const TokenKeys*>(dev), num_tokens,
                           reinterpret_cast<const int32_t*>(dev + path_at));
}

}  // namespace specd::kernels::cuda

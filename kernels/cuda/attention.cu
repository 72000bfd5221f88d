// Paged attention on CUDA: one block per (new token, query head). The host has already
// validated the call and laid out each token's keys (attention.cpp): its sequence, its logical
// key run [first, len) of which the first `linear` positions are cache positions themselves and
// the rest tree ancestors (root first) at path[path_off ...].
//
// The run is taken in tiles of kThreads keys with an online softmax: thread t scores key
// first + tile + t (its whole dot product, in element order, so the block's scores are
// independent loads); the tile's maximum and sum combine in a fixed tree; then thread (g, e)
// adds p_i · v_i[e] for the tile's keys i = g, g + G, ... in order (G = kThreads / head_dim
// groups, combined in group order at the end). Every sum's order depends on the key's logical
// index only, so a tree node gives bit for bit what its path laid out as a chain gives (the
// CPU's rule, which greedy tree verification rests on), and a token's result never depends on
// the other tokens of the call.
#include <math_constants.h>

#include <cstdint>

#include "block_reduce.cuh"
#include "cuda_ops.hpp"
#include "widen.cuh"

namespace specd::kernels::cuda {
namespace {

constexpr int kMaxHeadDim = 256;

struct Args {
  PagedAttentionParams p;
  const TokenKeys* keys;
  const int32_t* paths;
};

template <class Widen>
constexpr bool kHalfWidth = false;  // a 16-bit cache
template <>
constexpr bool kHalfWidth<WidenF16> = true;
template <>
constexpr bool kHalfWidth<WidenBF16> = true;

// Σ_e q[e] · row[e] in element order; 16-byte loads where the row allows (the same sum).
template <class Widen>
__device__ __forceinline__ float row_dot(const void* cache, int64_t off, const float* q, int hd, Widen widen) {
  float d = 0.0f;
  if constexpr (kHalfWidth<Widen>) {
    if (hd % 8 == 0) {
      const uint4* r = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(cache) + off);
#pragma unroll 4
      for (int c = 0; c < hd / 8; ++c) {
        const uint4 v = r[c];
        const uint16_t* h = reinterpret_cast<const uint16_t*>(&v);
#pragma unroll
        for (int e = 0; e < 8; ++e) d = fmaf(q[8 * c + e], widen(h, e), d);
      }
      return d;
    }
  } else {
    if (hd % 4 == 0) {
      const float4* r = reinterpret_cast<const float4*>(static_cast<const float*>(cache) + off);
#pragma unroll 4
      for (int c = 0; c < hd / 4; ++c) {
        const float4 v = r[c];
        d = fmaf(q[4 * c], v.x, d);
        d = fmaf(q[4 * c + 1], v.y, d);
        d = fmaf(q[4 * c + 2], v.z, d);
        d = fmaf(q[4 * c + 3], v.w, d);
      }
      return d;
    }
  }
  for (int e = 0; e < hd; ++e) d = fmaf(q[e], widen(cache, off + e), d);
  return d;
}

template <class Widen>
__global__ void attention_kernel(Args a, Widen widen) {
  __shared__ float red[kThreads / 32];
  __shared__ float qs[kMaxHeadDim];
  __shared__ float prob[kThreads];
  __shared__ int64_t offs[kThreads];
  __shared__ float acc_s[kThreads];
  const PagedAttentionParams& p = a.p;
  const int32_t t = blockIdx.x / p.num_heads, h = blockIdx.x % p.num_heads;
  const int32_t g = h / (p.num_heads / p.num_kv_heads);
  TokenKeys tk = a.keys[t];
  if (p.window > 0) tk.first = max(tk.first, tk.len - p.window);  // a no-op where the host applied it
  const int32_t s = tk.seq, hd = p.head_dim;
  const float* q = p.q + (static_cast<int64_t>(t) * p.num_heads + h) * hd;
  for (int e = threadIdx.x; e < hd; e += kThreads) qs[e] = q[e];
  const int groups = kThreads / hd, grp = threadIdx.x / hd, e = threadIdx.x % hd;
  const bool value_thread = grp < groups;
  float m = -CUDART_INF_F, l = 0.0f, acc = 0.0f;
  __syncthreads();
  for (int32_t tile = tk.first; tile < tk.len; tile += kThreads) {
    const int32_t j = tile + static_cast<int32_t>(threadIdx.x);
    float x = -CUDART_INF_F;
    if (j < tk.len) {
      const int32_t pos = j < tk.linear ? j : a.paths[tk.path_off + (j - tk.linear)];
      const int32_t block = p.block_tables[static_cast<int64_t>(s) * p.block_table_stride + pos / p.block_size];
      const int64_t off = ((static_cast<int64_t>(block) * p.block_size + pos % p.block_size) * p.num_kv_heads + g) * hd;
      offs[threadIdx.x] = off;
      x = row_dot(p.k_cache, off, qs, hd, widen) * p.scale;
      if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
    }
    const float m_new = fmaxf(m, block_max(x, red));
    const float pr = j < tk.len ? expf(x - m_new) : 0.0f;
    prob[threadIdx.x] = pr;
    const float rescale = expf(m - m_new);  // 0 on the first tile (m = -inf)
    l = l * rescale + block_sum(pr, red);   // block_sum synchronises: prob and offs are complete
    m = m_new;
    if (value_thread) {
      acc *= rescale;
      const int32_t n = min(kThreads, tk.len - tile);
      for (int32_t i = grp; i < n; i += groups) acc = fmaf(prob[i], widen(p.v_cache, offs[i] + e), acc);
    }
    __syncthreads();  // prob and offs are rewritten by the next tile
  }
  if (value_thread) acc_s[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x < hd) {
    float v = 0.0f;
    for (int k = 0; k < groups; ++k) v += acc_s[k * hd + threadIdx.x];
    p.out[(static_cast<int64_t>(t) * p.num_heads + h) * hd + threadIdx.x] = v / l;
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

// Paged attention over a block-table KV cache, one call for a whole variable-length batch:
// prefill chunks, single-token decode and multi-token scoring alike.
//
// Sequence s contributes tokens [query_start[s], query_start[s+1]) of q/out; it has
// context_lens[s] tokens in the cache *including* its n_s new ones (their K/V must already be
// written). New token i of s sits at position context_lens[s] - n_s + i and attends causally
// to positions [0, that position]. Token position p of s lives in cache block
// block_tables[s * block_table_stride + p / block_size], row p % block_size.
// Grouped-query attention: query head h reads kv head h / (num_heads / num_kv_heads).
//
// Tree attention (speculative drafts as a tree): a sequence may end in a *tree region*, its last
// m_s cache positions [ctx - m_s, ctx), with a parent per position (tree_parents, an index into
// the region below its own, or -1: the node hangs off the linear prefix [0, ctx - m_s)). A new
// token stored at region index r then attends to the prefix, its ancestors and itself, in that
// order, as if they were the positions [0, ctx - m_s + depth(r)] of a linear sequence (depth of
// a root 0): a node's result is bit for bit what the same tokens laid out as one chain give, so
// greedy tree verification equals plain decoding. Positions before the region stay causal.
#pragma once

#include <cstdint>

#include "specd/kernels/device.hpp"
#include "specd/kernels/device_memory.hpp"
#include "specd/kernels/dtype.hpp"

namespace specd::kernels {

struct PagedAttentionParams {
  const float* q = nullptr;       // [num_tokens, num_heads, head_dim]
  const void* k_cache = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim] of kv_dtype
  const void* v_cache = nullptr;  // same layout as k_cache
  DType kv_dtype = DType::kF32;   // f32, f16 or bf16
  float* out = nullptr;           // [num_tokens, num_heads, head_dim]
  int32_t num_seqs = 0;
  const int32_t* query_start = nullptr;   // [num_seqs + 1], query_start[0] == 0
  const int32_t* context_lens = nullptr;  // [num_seqs]
  const int32_t* block_tables = nullptr;  // [num_seqs, block_table_stride]
  int32_t block_table_stride = 0;
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  float scale = 1.0f;  // usually 1 / sqrt(head_dim)
  // Sliding-window attention (Mistral, Phi-3, Gemma's local layers): > 0 lets a token see only
  // the last `window` positions of its run, itself included (key j of a token at position i
  // when i - j < window, in the token's linear order: a tree node counts its ancestors). 0: all.
  int32_t window = 0;
  // Attention logit soft-capping (Gemma 2): > 0 replaces each scaled score x by
  // softcap * tanh(x / softcap) before the softmax. 0: none.
  float softcap = 0.0f;
  // Optional (both null: every sequence causal). Sequence s's tree region has
  // m_s = tree_offsets[s + 1] - tree_offsets[s] positions (0: none, m_s <= context_lens[s]);
  // tree_parents[tree_offsets[s] + r] is the parent of region index r, in [-1, r).
  const int32_t* tree_offsets = nullptr;  // [num_seqs + 1], tree_offsets[0] == 0
  const int32_t* tree_parents = nullptr;  // [tree_offsets[num_seqs]]
};

// Depth of every node of a tree region (parents as in PagedAttentionParams::tree_parents): the
// rotary position of region index r is ctx - m + depth[r]. Throws specd::Error
// (kInvalidArgument) for a parent outside [-1, r).
void tree_depths(const int32_t* parents, int32_t m, int32_t* depth);

// Validates the shapes and block ids (specd::Error on violation), then runs the CPU kernel:
// threads split (token, kv head) pairs; the query heads of one kv head share each K/V load
// (a 16-bit cache row is widened once for all of them).
void paged_attention(Device device, const PagedAttentionParams& p);

// One batch's layout for paged attention, validated and laid out once on the host, for a
// caller that runs the same batch through many layers (the model runtime). On a CUDA device
// paged_attention(p) reads the call's metadata back to validate it and to lay out each token's
// keys, then uploads them: a synchronisation per call. With a plan, that happens once, from
// host copies, and the calls only launch. The calls that use a plan pass the metadata it was
// prepared from (in device memory) and may differ in q, out, the caches and window only.
// On the CPU a plan validates once; its calls run as paged_attention(p) does.
class AttentionPlan {
 public:
  // `host`: the batch's call with its metadata (query_start, context_lens, block_tables, the
  // tree arrays) in host memory. Throws as paged_attention does for a bad call.
  void prepare(Device device, const PagedAttentionParams& host);
  // The layout's address on the device (a recorded graph holds it).
  const void* data() const noexcept { return buf_.data(); }

 private:
  friend void paged_attention(Device device, const PagedAttentionParams& p, const AttentionPlan& plan);
  Device device_ = Device::kCpu;
  int32_t num_seqs_ = -1;  // -1: not prepared
  int32_t num_tokens_ = 0;
  size_t paths_at_ = 0;  // byte offset of the ancestors' positions in buf_
  DeviceBuffer buf_;     // CUDA: each token's keys, then the ancestors' positions
};
void paged_attention(Device device, const PagedAttentionParams& p, const AttentionPlan& plan);

// Writes n new tokens into the cache rows `slots` (row = block * block_size + offset), in the
// cache's dtype: k rotated by RoPE on the way (cos/sin [n, head_dim / 2] from rope_cos_sin, or
// both null for no rotation), v as is. k, v [n, num_kv_heads, head_dim] (F32).
void write_kv(Device device, const float* k, const float* v, int64_t n, int64_t num_kv_heads, int64_t head_dim,
              const float* cos, const float* sin, const int64_t* slots, DType kv_dtype, void* k_cache, void* v_cache);

namespace reference {
// Single-threaded, straightforward, double accumulation: the ground truth for tests.
void paged_attention(const PagedAttentionParams& p);
}  // namespace reference

}  // namespace specd::kernels

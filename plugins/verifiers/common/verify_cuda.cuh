// CUDA half of the verifier plugins' shared code (include from .cu files only).
//
// Layout: one thread block of kThreads per sequence. Block-wide primitives (row checks,
// argmax, fixed-order chunk sums) use all threads; the order-dependent steps — the running sum
// over chunks and the walk inside the chosen chunk — run on thread 0 through the very
// functions the CPU path calls (verify_common.hpp), which is what makes CUDA tokens equal CPU
// tokens for the same uniforms. Each chunk's sum is accumulated by one thread in index order,
// as on the CPU.
//
// Validation: the kernel checks the same things as check_sequence() (num_drafted range, draft
// token range, finite non-negative rows summing to 1 within kRowSumTolerance). A sequence
// that fails is marked in num_accepted (a negative code); after the kernel the host reads
// num_accepted back (one stream synchronisation per call) and, for the first marked sequence,
// copies its inputs to the host and runs check_sequence() so the error text is the CPU one.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "verify_common.hpp"
#include "verify_cpu.hpp"

namespace specd::verifiers::cuda {

inline constexpr int kThreads = 256;
inline constexpr int kWarps = kThreads / 32;
// Chunk sums live in dynamic shared memory: at most this many bytes (the default limit).
inline constexpr int64_t kMaxSharedBytes = 48 * 1024;
inline constexpr int64_t kMaxVocab = kMaxSharedBytes / static_cast<int64_t>(sizeof(float)) * kChunk;
// num_accepted codes written by the kernel for a sequence it could not verify.
inline constexpr int32_t kInvalidInput = -1;
inline constexpr int32_t kEmptyDistribution = -2;

struct BlockShared {
  float warp_f[kWarps];
  int32_t warp_i[kWarps];
  float f;
  int32_t i;
};

// Per-block context handed to the rules.
struct Block {
  float* chunks;  // dynamic shared memory, num_chunks(vocab) floats
  BlockShared* sh;
};

__device__ __forceinline__ float block_sum(float v, BlockShared& sh) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sh.warp_f[warp] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.0f;
    for (int w = 0; w < kWarps; ++w) total += sh.warp_f[w];
    sh.f = total;
  }
  __syncthreads();
  const float total = sh.f;
  __syncthreads();
  return total;
}

__device__ __forceinline__ bool block_any(bool flag) {
  return __syncthreads_or(flag ? 1 : 0) != 0;
}

// Broadcasts thread 0's value to the block.
__device__ __forceinline__ int32_t block_broadcast(int32_t v, BlockShared& sh) {
  if (threadIdx.x == 0) sh.i = v;
  __syncthreads();
  const int32_t out = sh.i;
  __syncthreads();
  return out;
}

__device__ __forceinline__ float block_broadcast(float v, BlockShared& sh) {
  if (threadIdx.x == 0) sh.f = v;
  __syncthreads();
  const float out = sh.f;
  __syncthreads();
  return out;
}

// The larger value wins; equal values go to the lower index (as argmax_cpu).
__device__ __forceinline__ void argmax_combine(float& v, int32_t& i, float v2, int32_t i2) {
  if (v2 > v || (v2 == v && i2 < i)) {
    v = v2;
    i = i2;
  }
}

__device__ __forceinline__ int32_t block_argmax(const float* row, int64_t vocab, BlockShared& sh) {
  float best = -1.0f;  // below every valid probability
  int32_t idx = 0x7fffffff;
  for (int64_t t = threadIdx.x; t < vocab; t += kThreads) argmax_combine(best, idx, row[t], static_cast<int32_t>(t));
  for (int off = 16; off > 0; off >>= 1)
    argmax_combine(best, idx, __shfl_down_sync(0xffffffffu, best, off), __shfl_down_sync(0xffffffffu, idx, off));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sh.warp_f[warp] = best;
    sh.warp_i[warp] = idx;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kWarps; ++w) argmax_combine(best, idx, sh.warp_f[w], sh.warp_i[w]);
    sh.i = idx;
  }
  __syncthreads();
  const int32_t out = sh.i;
  __syncthreads();
  return out;
}

// Fills chunks[0..num_chunks) with the fixed-order chunk sums of w (one thread per chunk).
template <class W>
__device__ __forceinline__ void block_chunk_sums(const W& w, int64_t vocab, float* chunks) {
  const int64_t n = num_chunks(vocab);
  for (int64_t c = threadIdx.x; c < n; c += kThreads) chunks[c] = chunk_sum(w, vocab, c);
  __syncthreads();
}

// Fixed-order total of w (e.g. the entropy with EntropyTerms), identical to the CPU's.
template <class W>
__device__ __forceinline__ float block_fixed_sum(const W& w, int64_t vocab, const Block& blk) {
  block_chunk_sums(w, vocab, blk.chunks);
  float total = 0.0f;
  if (threadIdx.x == 0) total = inclusive_prefix(blk.chunks, num_chunks(vocab));
  return block_broadcast(total, *blk.sh);
}

// Inverse-CDF draw in the fixed order (select_from_prefix on thread 0); -1 if w is all zero.
template <class W>
__device__ __forceinline__ int32_t block_sample(const W& w, int64_t vocab, float u, const Block& blk) {
  block_chunk_sums(w, vocab, blk.chunks);
  int32_t token = -1;
  if (threadIdx.x == 0) {
    const int64_t n = num_chunks(vocab);
    const float total = inclusive_prefix(blk.chunks, n);
    token = static_cast<int32_t>(select_from_prefix(w, vocab, blk.chunks, n, total, u));
  }
  return block_broadcast(token, *blk.sh);
}

// The rule operations on a CUDA block (see CpuOps). Every thread calls them and gets the
// same result.
struct BlockOps {
  Block blk;
  template <class W>
  __device__ __forceinline__ int32_t sample(const W& w, int64_t vocab, float u) {
    return block_sample(w, vocab, u, blk);
  }
  __device__ __forceinline__ int32_t argmax(const float* row, int64_t vocab) {
    return block_argmax(row, vocab, *blk.sh);
  }
  __device__ __forceinline__ float entropy(const float* p, int64_t vocab) {
    return block_fixed_sum(EntropyTerms{p}, vocab, blk);
  }
};

// True when the row is finite, non-negative and sums to 1 within tolerance.
__device__ __forceinline__ bool block_row_ok(const float* row, int64_t vocab, BlockShared& sh) {
  float sum = 0.0f;
  bool bad = false;
  for (int64_t t = threadIdx.x; t < vocab; t += kThreads) {
    const float v = row[t];
    bad |= !(v >= 0.0f && v <= 3.40282347e38f);
    sum += v;
  }
  if (block_any(bad)) return false;
  const float total = block_sum(sum, sh);
  return fabsf(total - 1.0f) <= static_cast<float>(kRowSumTolerance);
}

// The device version of check_sequence(): true when sequence i may be verified.
__device__ __forceinline__ bool block_sequence_ok(const specd_verify_batch& b, int32_t i, const Uses& uses,
                                                  BlockShared& sh) {
  const int32_t n = b.num_drafted[i];
  if (n < 0 || n > b.k_max) return false;
  const SequenceView s = sequence_view(b, i, uses);
  bool bad = false;
  for (int32_t pos = threadIdx.x; pos < n; pos += kThreads) {
    const int32_t x = s.draft_token(pos);
    bad |= x < 0 || x >= b.vocab_size;
  }
  if (block_any(bad)) return false;
  for (int32_t pos = 0; pos <= n; ++pos)
    if (!block_row_ok(s.target_row(pos), s.vocab, sh)) return false;
  if (s.draft != nullptr)
    for (int32_t pos = 0; pos < n; ++pos)
      if (!block_row_ok(s.draft_row(pos), s.vocab, sh)) return false;
  return true;
}

// The accept/emit loop of verify_on_cpu(), one block per sequence, with the same Rule.
template <class Rule>
__global__ void __launch_bounds__(kThreads) verify_kernel(specd_verify_batch b, Uses uses, Rule rule) {
  extern __shared__ float chunks[];
  __shared__ BlockShared sh;
  const Block blk{chunks, &sh};
  const int32_t i = static_cast<int32_t>(blockIdx.x);
  if (!block_sequence_ok(b, i, uses, sh)) {
    if (threadIdx.x == 0) b.num_accepted[i] = kInvalidInput;
    return;
  }
  const SequenceView s = sequence_view(b, i, uses);
  BlockOps ops{blk};
  int32_t accepted = 0;
  int32_t emitted = -1;
  for (; accepted < s.num_drafted; ++accepted) {
    if (!rule.accept(s, accepted, ops)) {
      emitted = rule.recover(s, accepted, ops);
      break;
    }
  }
  if (accepted == s.num_drafted) emitted = rule.bonus(s, accepted, ops);
  if (threadIdx.x != 0) return;
  if (emitted < 0) {
    b.num_accepted[i] = kEmptyDistribution;
    return;
  }
  const int64_t width = static_cast<int64_t>(b.k_max) + 1;
  int32_t* out = b.out_tokens + i * width;
  for (int32_t pos = 0; pos < accepted; ++pos) out[pos] = s.draft_token(pos);
  out[accepted] = emitted;
  for (int64_t pos = accepted + 1; pos < width; ++pos) out[pos] = -1;
  b.num_accepted[i] = accepted;
}

// ---------------------------------------------------------------------------------------------
// Host side

inline Status cuda_failure(const char* what, cudaError_t err) {
  return {SPECD_ERR_INTERNAL, std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")"};
}

// Makes batch.device.index current for the call and restores the previous device after.
class DeviceScope {
 public:
  Status enter(int32_t index) {
    cudaError_t err = cudaGetDevice(&previous_);
    if (err != cudaSuccess) return cuda_failure("cannot query the current CUDA device", err);
    if (previous_ != index) {
      err = cudaSetDevice(index);
      if (err != cudaSuccess) return cuda_failure(("cannot use CUDA device " + std::to_string(index)).c_str(), err);
      switched_ = true;
    }
    return {};
  }
  ~DeviceScope() {
    if (switched_) cudaSetDevice(previous_);
  }

 private:
  int previous_ = 0;
  bool switched_ = false;
};

// A pointer the kernel will dereference must be memory the device can reach.
inline Status check_device_pointer(const void* ptr, const char* name) {
  if (ptr == nullptr) return {};
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) return cuda_failure((std::string("cannot inspect ") + name).c_str(), err);
  if (attr.type == cudaMemoryTypeUnregistered)
    return invalid("verify batch: ", name, " is host memory, but the batch is on a CUDA device");
  return {};
}

// Copies sequence i to the host and re-checks it there to produce the CPU error text.
inline Status describe_invalid_sequence(const specd_verify_batch& b, int32_t i, const Uses& uses) {
  const int64_t k = b.k_max, vocab = b.vocab_size;
  int32_t n = 0;
  cudaError_t err = cudaMemcpy(&n, b.num_drafted + i, sizeof(n), cudaMemcpyDeviceToHost);
  std::vector<int32_t> drafts(static_cast<size_t>(k));
  if (err == cudaSuccess && k > 0)
    err = cudaMemcpy(drafts.data(), b.draft_tokens + i * k, k * sizeof(int32_t), cudaMemcpyDeviceToHost);
  const bool rows = n >= 0 && n <= k;
  std::vector<float> target, draft;
  if (err == cudaSuccess && rows) {
    target.resize(static_cast<size_t>((n + 1) * vocab));
    err = cudaMemcpy(target.data(), b.target_probs + i * (k + 1) * vocab, target.size() * sizeof(float),
                     cudaMemcpyDeviceToHost);
    if (err == cudaSuccess && uses.draft_probs && b.draft_probs != nullptr && n > 0) {
      draft.resize(static_cast<size_t>(n * vocab));
      err =
          cudaMemcpy(draft.data(), b.draft_probs + i * k * vocab, draft.size() * sizeof(float), cudaMemcpyDeviceToHost);
    }
  }
  if (err != cudaSuccess) return cuda_failure("cannot copy an invalid sequence back for its error message", err);
  // A one-sequence host batch with the same k_max; only rows 0..n are present and read. No
  // device pointer is kept, whatever check_sequence() reads.
  const uint64_t no_rng = 0;
  specd_verify_batch one = b;
  one.device = {SPECD_DEVICE_CPU, 0};
  one.stream = nullptr;
  one.num_seqs = 1;
  one.num_drafted = &n;
  one.draft_tokens = drafts.data();
  one.target_probs = target.data();
  one.draft_probs = draft.empty() ? nullptr : draft.data();
  one.seeds = &no_rng;
  one.steps = &no_rng;
  one.out_tokens = nullptr;
  one.num_accepted = nullptr;
  if (Status st = check_sequence(one, 0, uses, i); !st.ok()) return st;
  return invalid("sequence ", i, ": invalid input detected on the CUDA device (probabilities sum to 1 only ",
                 "within rounding of the tolerance ", kRowSumTolerance, ")");
}

// Validates what the host can, launches verify_kernel<Rule> on batch.stream, waits for it and
// reports the first sequence the kernel refused. `flags` is the instance's reusable host buffer.
template <class Rule>
Status launch_verify(const specd_verify_batch& b, const Uses& uses, const Rule& rule, std::vector<int32_t>& flags) {
  if (Status st = check_batch(b, uses); !st.ok()) return st;
  if (b.num_seqs == 0) return {};
  if (b.vocab_size > kMaxVocab)
    return {SPECD_ERR_UNSUPPORTED, "verify batch: vocab_size " + std::to_string(b.vocab_size) +
                                       " exceeds the CUDA verifier's limit of " + std::to_string(kMaxVocab)};
  DeviceScope scope;
  if (Status st = scope.enter(b.device.index); !st.ok()) return st;
  const std::pair<const void*, const char*> pointers[] = {{b.num_drafted, "num_drafted"},
                                                          {b.draft_tokens, "draft_tokens"},
                                                          {b.target_probs, "target_probs"},
                                                          {uses.draft_probs ? b.draft_probs : nullptr, "draft_probs"},
                                                          {uses.rng ? b.seeds : nullptr, "seeds"},
                                                          {uses.rng ? b.steps : nullptr, "steps"},
                                                          {b.out_tokens, "out_tokens"},
                                                          {b.num_accepted, "num_accepted"}};
  for (const auto& [ptr, name] : pointers)
    if (Status st = check_device_pointer(ptr, name); !st.ok()) return st;

  const auto stream = static_cast<cudaStream_t>(b.stream);
  const size_t shared = static_cast<size_t>(num_chunks(b.vocab_size)) * sizeof(float);
  verify_kernel<Rule><<<static_cast<unsigned>(b.num_seqs), kThreads, shared, stream>>>(b, uses, rule);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return cuda_failure("verify kernel launch failed", err);
  flags.resize(static_cast<size_t>(b.num_seqs));
  err = cudaMemcpyAsync(flags.data(), b.num_accepted, flags.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) return cuda_failure("verify kernel failed", err);
  for (int32_t i = 0; i < b.num_seqs; ++i) {
    if (flags[static_cast<size_t>(i)] == kInvalidInput) return describe_invalid_sequence(b, i, uses);
    if (flags[static_cast<size_t>(i)] == kEmptyDistribution)
      return {SPECD_ERR_INTERNAL, "sequence " + std::to_string(i) + ": no token could be drawn (empty distribution)"};
  }
  return {};
}

}  // namespace specd::verifiers::cuda

// The CUDA implementations behind the op front ends (kernels/cpu/*.cpp dispatch here on
// Device::kCuda in CUDA builds). Private to kernels/. Pointers are device pointers; each op
// is queued on the calling thread's stream (cuda::stream()) and checked for launch errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "specd/kernels/attention.hpp"
#include "specd/kernels/matmul.hpp"

using cudaStream_t = struct CUstream_st*;

namespace specd::kernels::cuda {

// ---- runtime (runtime.cpp) ----
int device_count() noexcept;    // 0 where the runtime finds no device or no driver
std::string describe_device();  // "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB, 132 SMs)"
std::string build_text();       // "runtime 13.0, architectures 80 90"
cudaStream_t stream();          // the calling thread's stream (the default stream, or a graph's recording)
// DeviceGraph (device_graph.hpp): a cudaGraphExec_t of what `work` queued; its launch; its end.
void* record_graph(const std::function<void()>& work);
void replay_graph(void* exec);
void destroy_graph(void* exec) noexcept;
void* alloc(size_t bytes);
void free(void* p) noexcept;
void copy_to_device(void* dst, const void* src, size_t bytes);
void copy_to_host(void* dst, const void* src, size_t bytes);
void copy_on_device(void* dst, const void* src, size_t bytes);
void copy_rows_on_device(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows);
void synchronize();
void memory_info(size_t* free_bytes, size_t* total_bytes);
// Throws specd::Error(kInternal) naming `op` where the last launch failed.
void check_launch(std::string_view op);
// Device buffers of the calling thread that only grow, one per use (an op's temporaries).
enum class Scratch { kSwigluUp, kAttentionKeys, kCount };
void* scratch(Scratch use, size_t bytes);
// A device int for kernels to report the first bad input (-1: none): the calling thread's
// slot, reset to -1 on its stream; error_slot_read waits for the stream and returns it.
int32_t* error_slot_reset();
int32_t error_slot_read(const int32_t* slot);

// ---- ops ----
void rmsnorm(const float* x, const float* weight, float* out, int64_t rows, int64_t dim, float eps);
void rmsnorm_residual(const float* x, float* residual, const float* weight, float* out, int64_t rows, int64_t dim,
                      float eps);
// c [m, ldc]: columns [0, w.rows) = a [m, w.cols] · wᵀ (+ bias); f32/f16/bf16 weights.
void matmul(const float* a, int64_t m, const WeightView& w, const float* bias, float* c, int64_t ldc);
// Several products of the same activations in one launch (each output as matmul computes it;
// outputs of one dtype and width, which the front end checks).
void matmul_multi(const float* a, int64_t m, std::span<const MatmulOutput> outs);
// out [m, gate.rows] = silu(a · gateᵀ) * (a · upᵀ).
void matmul_swiglu(const float* a, int64_t m, const WeightView& gate, const WeightView& up, float* out);
void silu_mul(float* g, const float* u, int64_t n);
void gelu_tanh_mul(float* g, const float* u, int64_t n);
// Returns the first row whose entries are all -inf (softmax then throws), or -1.
int64_t softmax(const float* x, float* out, int64_t rows, int64_t cols, float temperature);
int64_t log_softmax(const float* x, float* out, int64_t rows, int64_t cols);
void argmax(const float* x, int64_t rows, int64_t cols, int32_t* out);
// Returns the index in ids of the first id outside [0, table.rows), or -1 (a wait for the
// device). check = false: ids the caller checked; nothing is read back, -1.
int64_t embedding(const WeightView& table, const int32_t* ids, int64_t n, float* out, bool check = true);
// Widening from f32/f16/bf16/q8_0/q4_0, narrowing to f32/f16/bf16 (others: kUnsupported).
void to_f32(DType dt, const void* src, float* dst, int64_t n);
void from_f32(const float* src, DType dt, void* dst, int64_t n);
// Ranked as the CPU ranks (value descending, ties by lower index); see top_k.cu.
void top_k_top_p(float* probs, int64_t rows, int64_t cols, int32_t top_k, float top_p);
void top_k_indices(const float* x, int64_t cols, int32_t k, int32_t* out);
// One new token's keys for paged_attention, laid out by the host (attention.cpp): its
// sequence, and the logical key run [first, len), the first `linear` being cache positions,
// the rest tree ancestors (root first) at paths[path_off ...].
struct TokenKeys {
  int32_t seq, len, linear, first;
  int64_t path_off;
};
// `p` as validated by the front end (its arrays in device memory); keys and paths on the host.
void paged_attention(const PagedAttentionParams& p, const TokenKeys* keys, int32_t num_tokens, const int32_t* paths,
                     int64_t num_path);
// The same with the keys and paths already in device memory (AttentionPlan). The kernel applies
// p.window to each token's run.
void paged_attention_prepared(const PagedAttentionParams& p, const TokenKeys* keys, int32_t num_tokens,
                              const int32_t* paths);
// f32, f16 or bf16 caches (the front end checks the dtype and the tables).
void write_kv(const float* k, const float* v, int64_t n, int64_t num_kv_heads, int64_t head_dim, const float* cos,
              const float* sin, const int64_t* slots, DType kv_dtype, void* k_cache, void* v_cache);
void rope_cos_sin(const int32_t* positions, int64_t n, const float* inv_freq, int64_t half, float* cos, float* sin);
void rope_apply(float* x, int64_t n, int64_t num_heads, int64_t head_dim, const float* cos, const float* sin);

}  // namespace specd::kernels::cuda

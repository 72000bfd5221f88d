// Dense layers in the checkpoint's layout: c = a · wᵀ + bias, with w in any storage dtype.
//
// CPU paths (kernels/cpu/matmul.cpp):
//  - A multi-row GEMV that streams every weight byte once for up to 256 rows at a time
//    (decode steps, speculative scoring of k+1 positions, batches, prefill chunks).
//    Activations are prepared once per call in the weights' compute format: F32 for f32/f16
//    weights, BF16 for bf16 weights, Q8 blocks of 32 (per-block scale) for q8_0/q4_0 weights,
//    whose dot products use integer instructions (VNNI where present). The result of a row
//    does not depend on m or on the other rows (same instructions, same order): scoring k+1
//    positions gives bit-identical logits to k+1 single-token decodes, whatever the batch, so
//    greedy speculative output equals plain output exactly in every dtype. Prefill takes the
//    same path (one group of rows at a time stays in the caches while the weights pass by), so
//    no row, prompt or generated, depends on what else is in the batch. (F32 prefill once went
//    through OpenBLAS sgemm: 13% faster on tinyllama's shapes, but its rows depended on the
//    batch, which a mixed prefill + decode batch exposes to greedy equality.)
// Output features are split over the kernel thread pool in chunks taken dynamically, so a
// core slowed by another process does not hold the other back.
#pragma once

#include <cstdint>
#include <span>

#include "specd/kernels/device.hpp"
#include "specd/kernels/dtype.hpp"

namespace specd::kernels {

// A weight matrix [rows, cols] (rows = output features), row-major, each row
// row_bytes(dtype, cols) bytes. The memory is borrowed.
struct WeightView {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t bytes() const { return row_bytes(dtype, cols) * static_cast<size_t>(rows); }
};

// One output of matmul_multi: c [m, w.rows] = a · wᵀ + bias (bias [w.rows] or null).
struct MatmulOutput {
  WeightView w;
  const float* bias = nullptr;
  float* c = nullptr;
};

// a [m, k], w [n, k] with k == w.cols, bias [n] or null, c [m, n]. Throws
// specd::Error(kInvalidArgument) on a shape mismatch or a quantized w whose k is not a
// multiple of 32.
void matmul(Device device, const float* a, const WeightView& w, const float* bias, float* c, int64_t m);

// Several layers over the same input (Q, K and V): the input is prepared once and all
// outputs are computed in one parallel region. Every w must have cols == k.
void matmul_multi(Device device, const float* a, int64_t m, int64_t k, std::span<const MatmulOutput> outs);

// The SwiGLU MLP's first half in one pass: out [m, n] = silu(a · gateᵀ) * (a · upᵀ), with
// gate and up [n, k] of the same dtype.
void matmul_swiglu(Device device, const float* a, const WeightView& gate, const WeightView& up, float* out, int64_t m);

// One product of a grouped call: c [m, w.rows] = a [m, w.cols] · wᵀ; with `up`, the SwiGLU
// form c = silu(a · wᵀ) * (a · upᵀ) (w the gate, up of the same shape and dtype).
struct GroupedMatmul {
  const float* a = nullptr;
  int64_t m = 0;
  WeightView w;
  float* c = nullptr;
  WeightView up = {};
};

// Independent products with their own inputs (the experts of a mixture-of-experts layer, each
// over the rows routed to it) in one parallel region: each group's activations are prepared
// once and the groups' output features are one task space, instead of one region per product.
// Every row gets bit for bit what matmul / matmul_swiglu give it alone. Groups of more than
// 256 rows go through matmul / matmul_swiglu one by one. Throws like matmul.
void matmul_grouped(Device device, std::span<const GroupedMatmul> groups);

// The SwiGLU product alone, in place: g[i] = silu(g[i]) * u[i] for i < n, computed as
// matmul_swiglu computes it (for gate and up projections of different dtypes).
void silu_mul(Device device, float* g, const float* u, int64_t n);

// The GELU-gated product of Gemma's MLP, in place: g[i] = gelu_tanh(g[i]) * u[i], with
// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) (PyTorch's "tanh" GELU).
void gelu_tanh_mul(Device device, float* g, const float* u, int64_t n);

namespace reference {
// Naive triple loop with double accumulation over F32 activations and the exactly widened
// (dequantized) weights: the ground truth for tests.
void matmul(const float* a, const WeightView& w, const float* bias, float* c, int64_t m);
}  // namespace reference

}  // namespace specd::kernels

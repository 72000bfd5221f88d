// Row conversions between F32 and the storage dtypes (f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k).
//
// Quantization follows GGUF's reference quantizers, so a tensor quantized here is the tensor
// llama.cpp's reference quantizer writes:
//   Q8_0: d = max|x| / 127, q = round(x / d)
//   Q4_0: m = the element of largest magnitude (signed), d = m / -8,
//         q = min(15, trunc(x / d + 8.5)) packed as in dtype.hpp
//   Q4_K, Q5_K, Q6_K: per sub-block scales (and mins) fitted by weighted least squares, then
//         quantized against the block's largest (cpu/k_quants.cpp)
// (d stored as fp16; the division uses the unrounded d). Conversions are deterministic: the
// result does not depend on the CPU's instruction set.
#pragma once

#include <cstdint>

#include "specd/kernels/device.hpp"
#include "specd/kernels/dtype.hpp"

namespace specd::kernels {

// dst [n] = src [n elements of `src_dtype`] widened/dequantized to F32. n must be whole blocks
// (32 elements for q8_0/q4_0, 256 for K-quants; specd::Error(kInvalidArgument) otherwise).
void to_f32(Device device, DType src_dtype, const void* src, float* dst, int64_t n);

// dst = src [n] narrowed/quantized to `dst_dtype` (row_bytes(dst_dtype, n) bytes). Splits
// large conversions over the kernel thread pool.
void from_f32(Device device, const float* src, DType dst_dtype, void* dst, int64_t n);

}  // namespace specd::kernels

// K-quant blocks (Q4_K, Q5_K, Q6_K, Q3_K, Q2_K; layouts in dtype.hpp): quantization from F32 with GGUF's
// reference rounding, and dequantization. Private to kernels/cpu (convert.cpp and the ISA
// levels' to_f32 entries use them).
#pragma once

#include <cstdint>

#include "specd/kernels/dtype.hpp"

namespace specd::kernels::cpu {

// nb blocks of 256 elements from x.
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb);
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb);
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb);
void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb);

// The 8 six-bit scales and mins of a Q4_K / Q5_K block (k_scale_min of each sub-block), for the
// vector levels (a call, not an inline function compiled with their flags).
void unpack_k_scales(const uint8_t* scales, int* sc, int* m);

// dst [n] from n elements (n a multiple of 256) of blocks at src.
void q4_k_row_to_f32(const void* src, float* dst, int64_t n);
void q5_k_row_to_f32(const void* src, float* dst, int64_t n);
void q6_k_row_to_f32(const void* src, float* dst, int64_t n);
void q3_k_row_to_f32(const void* src, float* dst, int64_t n);
void q2_k_row_to_f32(const void* src, float* dst, int64_t n);

}  // namespace specd::kernels::cpu

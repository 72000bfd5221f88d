// GGUF block types that the kernels do not compute on: dequantized to F32 at load and then
// stored in the nearest kernel dtype (docs/model-formats.md "GGUF tensor types"). The K-quants
// (Q2_K to Q6_K) are kernel dtypes (kernels/dtype.hpp) and used in place.
//
// Layouts (little-endian, fp16 scales; "d" a scale, "m"/"dmin" a min):
//   Q4_1 (32): {f16 d, f16 m, u8 qs[16]}                 x = q * d + m, q = nibble
//   Q5_0 (32): {f16 d, u8 qh[4], u8 qs[16]}              x = (q - 16) * d, q = nibble | bit << 4
//   Q5_1 (32): {f16 d, f16 m, u8 qh[4], u8 qs[16]}       x = q * d + m
//     element j < 16 takes the low nibble of qs[j], element j + 16 the high nibble; its 5th bit
//     is bit j (resp. j + 16) of qh read as a little-endian u32.
//   Q8_K (256): {f32 d, i8 qs[256], i16 bsums[16]}      x = q * d (bsums are not needed)
#pragma once

#include <cstddef>
#include <cstdint>

#include "specd/kernels/dtype.hpp"

namespace specd::model::gguf {

// True for the ggml types above (read by conversion, not in place).
bool is_converted_type(uint32_t ggml_type) noexcept;

// The kernel dtype a converted type is stored in after loading: Q8_0 for all of them. A 4- to
// 8-bit value requantized to 8 bits per block of 32 keeps its error within half a Q8_0 step
// (max|block| / 254), well below the source format's own step; Q4_0 would add an error as
// large as the original quantization's (docs/model-formats.md).
kernels::DType converted_dtype(uint32_t ggml_type) noexcept;

// dst [n] = the n elements at src, n a multiple of the type's block (256 for K types, else
// 32). ggml_type must satisfy is_converted_type (kInternal otherwise).
void dequantize(uint32_t ggml_type, const std::byte* src, float* dst, int64_t n);

}  // namespace specd::model::gguf

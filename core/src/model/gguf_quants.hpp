// GGUF block types that the kernels do not compute on: dequantized to F32 at load and then
// stored in the nearest kernel dtype (docs/model-formats.md "GGUF tensor types").
//
// Layouts (little-endian, fp16 scales; "d" a scale, "m"/"dmin" a min):
//   Q4_1 (32): {f16 d, f16 m, u8 qs[16]}                 x = q * d + m, q = nibble
//   Q5_0 (32): {f16 d, u8 qh[4], u8 qs[16]}              x = (q - 16) * d, q = nibble | bit << 4
//   Q5_1 (32): {f16 d, f16 m, u8 qh[4], u8 qs[16]}       x = q * d + m
//     element j < 16 takes the low nibble of qs[j], element j + 16 the high nibble; its 5th bit
//     is bit j (resp. j + 16) of qh read as a little-endian u32.
//   Q4_K (256): {f16 d, f16 dmin, u8 scales[12], u8 qs[128]}       8 sub-blocks of 32
//   Q5_K (256): {f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]}
//     sub-block s has a 6-bit scale sc and min mn packed in scales[12]: for s < 4
//     sc = scales[s] & 63, mn = scales[s + 4] & 63; else sc = (scales[s + 4] & 15) |
//     (scales[s - 4] >> 6) << 4, mn = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4;
//     x = d * sc * q - dmin * mn. Sub-blocks 2i and 2i + 1 share qs[32i .. 32i + 32): low
//     nibbles then high nibbles; Q5_K's 5th bit of element l of sub-block s is bit s of qh[l].
//   Q6_K (256): {u8 ql[128], u8 qh[64], i8 scales[16], f16 d}     16 sub-blocks of 16
//     per half of 128 elements (ql += 64, qh += 32, scales += 8 for the second), l < 32:
//     q(l)      = (ql[l]      & 15) | ((qh[l] >> 0) & 3) << 4,  scale scales[l / 16]
//     q(l + 32) = (ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4,  scale scales[l / 16 + 2]
//     q(l + 64) = (ql[l]      >> 4) | ((qh[l] >> 4) & 3) << 4,  scale scales[l / 16 + 4]
//     q(l + 96) = (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4,  scale scales[l / 16 + 6]
//     x = d * scale * (q - 32)
//   Q8_K (256): {f32 d, i8 qs[256], i16 bsums[16]}      x = q * d (bsums are not needed)
#pragma once

#include <cstddef>
#include <cstdint>

#include "specd/kernels/dtype.hpp"

namespace specd::model::gguf {

// True for the ggml types above (read by conversion, not in place).
bool is_converted_type(uint32_t ggml_type) noexcept;

// The kernel dtype a converted type is stored in after loading: Q8_0 for all of them. A 4 to
// 6-bit value requantized to 8 bits per block of 32 keeps its error within half a Q8_0 step
// (max|block| / 254), well below the source format's own step; Q4_0 would add an error as
// large as the original quantization's (docs/model-formats.md).
kernels::DType converted_dtype(uint32_t ggml_type) noexcept;

// dst [n] = the n elements at src, n a multiple of the type's block (256 for K types, else
// 32). ggml_type must satisfy is_converted_type (kInternal otherwise).
void dequantize(uint32_t ggml_type, const std::byte* src, float* dst, int64_t n);

}  // namespace specd::model::gguf

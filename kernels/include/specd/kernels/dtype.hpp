// Element types of weights and KV caches, and the quantized block layouts.
//
// The quantized types are GGUF's block formats byte for byte, so GGUF tensors map without
// conversion. A row of `cols` elements (cols a multiple of the type's block) is whole blocks:
//   Q8_0 (32): { fp16 d; int8 q[32]; }   (34 bytes)   value j = q[j] * d
//   Q4_0 (32): { fp16 d; uint8 q[16]; }  (18 bytes)   value j      = ((q[j] & 15) - 8) * d
//                                                       value j + 16 = ((q[j] >> 4) - 8) * d
//   Q4_K (256): { fp16 d, dmin; uint8 scales[12]; uint8 qs[128]; }            (144 bytes)
//   Q5_K (256): { fp16 d, dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]; }  (176 bytes)
//     8 sub-blocks of 32, each with a 6-bit scale sc and min m packed in scales[12]
//     (k_scale_min); value = d * sc * q - dmin * m. Sub-blocks 2i and 2i + 1 share
//     qs[32i .. 32i + 32): low nibbles, then high nibbles; Q5_K's 5th bit of element l of
//     sub-block s is bit s of qh[l].
//   Q6_K (256): { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; fp16 d; }  (210 bytes)
//     16 sub-blocks of 16, value = d * scales[s] * (q - 32), q 6 bits; per half of 128
//     elements (ql += 64, qh += 32, scales += 8), l < 32:
//       q(l)      = (ql[l]      & 15) | ((qh[l] >> 0) & 3) << 4
//       q(l + 32) = (ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4
//       q(l + 64) = (ql[l]      >> 4) | ((qh[l] >> 4) & 3) << 4
//       q(l + 96) = (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4
//   Q3_K (256): { uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; fp16 d; }  (110 bytes)
//     16 sub-blocks of 16, value = d * (sc - 32) * (q - 4), sc 6 bits (q3_k_scale), q 3 bits:
//     element e (half n = e / 128, j = (e % 128) / 32, l = e % 32) has bits 0-1
//     (qs[32n + l] >> 2j) & 3 and bit 2 from bit e / 32 of hmask[l]
//   Q2_K (256): { uint8 scales[16]; uint8 qs[64]; fp16 d, dmin; }  (84 bytes)
//     16 sub-blocks of 16, value = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4), q 2 bits
//     laid out as Q3_K's bits 0-1
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace specd::kernels {

enum class DType : uint8_t { kF32, kF16, kBF16, kQ8_0, kQ4_0, kQ4_K, kQ5_K, kQ6_K, kQ3_K, kQ2_K };
inline constexpr int kNumDTypes = 10;

inline constexpr int64_t kQuantBlock = 32;   // elements per Q8_0 / Q4_0 block
inline constexpr int64_t kSuperBlock = 256;  // elements per K-quant block

struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t q[kQuantBlock];
};
struct BlockQ4_0 {
  uint16_t d;  // fp16 scale
  uint8_t q[kQuantBlock / 2];
};
struct BlockQ4_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qs[kSuperBlock / 2];
};
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kSuperBlock / 8];
  uint8_t qs[kSuperBlock / 2];
};
struct BlockQ6_K {
  uint8_t ql[kSuperBlock / 2];
  uint8_t qh[kSuperBlock / 4];
  int8_t scales[kSuperBlock / 16];
  uint16_t d;
};
struct BlockQ3_K {
  uint8_t hmask[kSuperBlock / 8];
  uint8_t qs[kSuperBlock / 4];
  uint8_t scales[12];
  uint16_t d;
};
struct BlockQ2_K {
  uint8_t scales[kSuperBlock / 16];
  uint8_t qs[kSuperBlock / 4];
  uint16_t d, dmin;
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_K) == 144 &&
                  sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ3_K) == 110 &&
                  sizeof(BlockQ2_K) == 84,
              "GGUF block layouts");

// Sub-block s (0..7) of a Q4_K / Q5_K block: its 6-bit scale and min from scales[12].
constexpr void k_scale_min(int s, const uint8_t* scales, int* sc, int* m) {
  if (s < 4) {
    *sc = scales[s] & 63;
    *m = scales[s + 4] & 63;
  } else {
    *sc = (scales[s + 4] & 15) | ((scales[s - 4] >> 6) << 4);
    *m = (scales[s + 4] >> 4) | ((scales[s] >> 6) << 4);
  }
}

// Sub-block s (0..15) of a Q3_K block: its 6-bit scale (0..63; the value's factor is it - 32):
// low 4 bits from scales[s] (s < 8) or scales[s - 8] >> 4, high 2 from scales[8 + s % 4].
constexpr int q3_k_scale(int s, const uint8_t* scales) {
  const int low = s < 8 ? scales[s] & 15 : scales[s - 8] >> 4;
  return low | ((scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4;
}

// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "q3_k", "q2_k".
std::string_view dtype_name(DType dtype) noexcept;
// The inverse of dtype_name (also accepts "float32", "float16", "bfloat16"); throws
// specd::Error(kInvalidArgument) naming the text otherwise.
DType parse_dtype(std::string_view text);

constexpr bool is_k_quant(DType d) {
  return d == DType::kQ4_K || d == DType::kQ5_K || d == DType::kQ6_K || d == DType::kQ3_K || d == DType::kQ2_K;
}
constexpr bool is_quantized(DType d) {
  return d == DType::kQ8_0 || d == DType::kQ4_0 || is_k_quant(d);
}
// Elements per block: 1 for f32/f16/bf16, 32 for Q8_0/Q4_0, 256 for K-quants.
constexpr int64_t block_elems(DType d) {
  return is_k_quant(d) ? kSuperBlock : is_quantized(d) ? kQuantBlock : 1;
}

// Bytes of one row of `cols` elements. Quantized types need whole blocks (checked by
// row_bytes_checked, which throws specd::Error(kInvalidArgument) naming `what`).
constexpr size_t row_bytes(DType d, int64_t cols) {
  const auto n = static_cast<size_t>(cols);
  switch (d) {
    case DType::kF32:
      return n * 4;
    case DType::kF16:
    case DType::kBF16:
      return n * 2;
    case DType::kQ8_0:
      return n / kQuantBlock * sizeof(BlockQ8_0);
    case DType::kQ4_0:
      return n / kQuantBlock * sizeof(BlockQ4_0);
    case DType::kQ4_K:
      return n / kSuperBlock * sizeof(BlockQ4_K);
    case DType::kQ5_K:
      return n / kSuperBlock * sizeof(BlockQ5_K);
    case DType::kQ6_K:
      return n / kSuperBlock * sizeof(BlockQ6_K);
    case DType::kQ3_K:
      return n / kSuperBlock * sizeof(BlockQ3_K);
    case DType::kQ2_K:
      return n / kSuperBlock * sizeof(BlockQ2_K);
  }
  return 0;
}
size_t row_bytes_checked(DType d, int64_t cols, std::string_view what);

// Bit-level conversions between F32 and the 16-bit formats. Widening is exact; narrowing
// rounds to nearest even (F16: subnormals kept, overflow to infinity; NaN stays NaN).
float f16_to_f32(uint16_t bits) noexcept;
float bf16_to_f32(uint16_t bits) noexcept;
uint16_t f32_to_f16(float value) noexcept;
uint16_t f32_to_bf16(float value) noexcept;

}  // namespace specd::kernels

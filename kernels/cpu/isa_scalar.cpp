// The portable level: plain C++ for every entry of the kernel table. It runs on any CPU and
// is the reference the vector levels are tested against (after the F32 reference ops).
#include <cmath>
#include <cstring>
#include <type_traits>

#include "isa_kernels.hpp"
#include "k_quants.hpp"

namespace specd::kernels::cpu {
namespace {

constexpr int64_t kChunk = 256;  // weights widened per step (f16/bf16)

void store_results(const GemvArgs& a, int64_t j, const float* acc) {
  for (int64_t r = 0; r < a.m; ++r) a.c[r * a.ldc + j] = acc[r];
}

float dot8(const float* x, const float* y, int64_t n) {
  float lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) lane[l] += x[i + l] * y[i + l];
  float s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; i < n; ++i) s += x[i] * y[i];
  return s;
}

void gemv_f32(const GemvArgs& a, int64_t j0, int64_t j1) {
  float acc[kGemvCallRows];
  for (int64_t j = j0; j < j1; ++j) {
    const auto* w = reinterpret_cast<const float*>(a.w + static_cast<size_t>(j) * a.w_stride);
    for (int64_t r = 0; r < a.m; ++r)
      acc[r] = dot8(reinterpret_cast<const float*>(a.act + static_cast<size_t>(r) * a.act_stride), w, a.k);
    store_results(a, j, acc);
  }
}

// f16 / bf16 weights: widen a chunk of the row once, use it for every activation row.
template <bool kBf16>
void gemv_half(const GemvArgs& a, int64_t j0, int64_t j1) {
  float acc[kGemvCallRows];
  float wf[kChunk];
  for (int64_t j = j0; j < j1; ++j) {
    const auto* w = reinterpret_cast<const uint16_t*>(a.w + static_cast<size_t>(j) * a.w_stride);
    for (int64_t r = 0; r < a.m; ++r) acc[r] = 0.0f;
    for (int64_t i0 = 0; i0 < a.k; i0 += kChunk) {
      const int64_t n = a.k - i0 < kChunk ? a.k - i0 : kChunk;
      for (int64_t i = 0; i < n; ++i) wf[i] = kBf16 ? bf16_to_f32(w[i0 + i]) : f16_to_f32(w[i0 + i]);
      for (int64_t r = 0; r < a.m; ++r) {
        const auto* x = reinterpret_cast<const float*>(a.act + static_cast<size_t>(r) * a.act_stride);
        acc[r] += dot8(x + i0, wf, n);
      }
    }
    store_results(a, j, acc);
  }
}

// Q8 activations (scalar layout): d[nbp] then signed q in natural order; no aux.
void prep_q8(const float* x, uint8_t* out, int64_t k) {
  const int64_t nb = k / 32, nbp = q8_blocks_padded(k);
  auto* d = reinterpret_cast<float*>(out);
  auto* q = reinterpret_cast<int8_t*>(out + nbp * 4);
  for (int64_t b = 0; b < nbp; ++b) {
    float amax = 0.0f;
    if (b < nb)
      for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[b * 32 + i]));
    const float db = amax / 127.0f;
    const float id = db != 0.0f ? 1.0f / db : 0.0f;
    d[b] = db;
    for (int i = 0; i < 32; ++i) q[b * 32 + i] = b < nb ? static_cast<int8_t>(std::nearbyint(x[b * 32 + i] * id)) : 0;
  }
}

template <DType kW>
void gemv_quant(const GemvArgs& a, int64_t j0, int64_t j1) {
  const int64_t nb = a.k / 32, nbp = q8_blocks_padded(a.k);
  float acc[kGemvCallRows];
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* w = a.w + static_cast<size_t>(j) * a.w_stride;
    for (int64_t r = 0; r < a.m; ++r) {
      const uint8_t* row = a.act + static_cast<size_t>(r) * a.act_stride;
      const auto* dx = reinterpret_cast<const float*>(row);
      const auto* qx = reinterpret_cast<const int8_t*>(row + nbp * 4);
      float s = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        int32_t dot = 0;
        uint16_t dbits;
        if constexpr (kW == DType::kQ8_0) {
          const auto* blk = reinterpret_cast<const BlockQ8_0*>(w) + b;
          for (int i = 0; i < 32; ++i) dot += blk->q[i] * qx[b * 32 + i];
          dbits = blk->d;
        } else {
          const auto* blk = reinterpret_cast<const BlockQ4_0*>(w) + b;
          for (int i = 0; i < 16; ++i) {
            dot += ((blk->q[i] & 15) - 8) * qx[b * 32 + i];
            dot += ((blk->q[i] >> 4) - 8) * qx[b * 32 + 16 + i];
          }
          dbits = blk->d;
        }
        s += (f16_to_f32(dbits) * dx[b]) * static_cast<float>(dot);
      }
      acc[r] = s;
    }
    store_results(a, j, acc);
  }
}

// One super-block of a K-quant weight row against Q8_K activations (the row's s-th): the dot
// product, integer sums per block scaled once by the activation's d. Q4_K / Q5_K: value =
// d·sc·q - dmin·m; Q6_K: value = d·sc·(q - 32), the -32 applied through the activation's sums;
// Q3_K likewise with (sc - 32) and q - 4; Q2_K: d·sc·q - dmin·m per sub-block of 16.
template <DType kW>
float k_block_dot(const uint8_t* w, const ActQ8K& x, int64_t s) {
  const int8_t* q8 = x.q + s * 256;
  const int16_t* bs = x.bsums + s * 16;
  if constexpr (kW == DType::kQ2_K) {
    const auto& b = reinterpret_cast<const BlockQ2_K*>(w)[s];
    int32_t isum = 0, msum = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t dot = 0;
      for (int e = 16 * g; e < 16 * g + 16; ++e)
        dot += ((b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3) * q8[e];
      isum += (b.scales[g] & 15) * dot;
      msum += (b.scales[g] >> 4) * bs[g];
    }
    return x.d[s] * (f16_to_f32(b.d) * static_cast<float>(isum) - f16_to_f32(b.dmin) * static_cast<float>(msum));
  } else if constexpr (kW == DType::kQ3_K) {
    const auto& b = reinterpret_cast<const BlockQ3_K*>(w)[s];
    int32_t isum = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t dot = 0;
      for (int e = 16 * g; e < 16 * g + 16; ++e) {
        const int q =
            ((b.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3) | ((b.hmask[e % 32] >> (e / 32)) & 1) << 2;
        dot += q * q8[e];
      }
      isum += (q3_k_scale(g, b.scales) - 32) * (dot - 4 * bs[g]);
    }
    return f16_to_f32(b.d) * x.d[s] * static_cast<float>(isum);
  } else if constexpr (kW == DType::kQ6_K) {
    const auto& b = reinterpret_cast<const BlockQ6_K*>(w)[s];
    int32_t isum = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b.ql + 64 * h;
      const uint8_t* qh = b.qh + 32 * h;
      int32_t sub[8] = {};  // Σ q·x per sub-block of 16 in this half
      for (int l = 0; l < 32; ++l) {
        const int q[4] = {(ql[l] & 15) | ((qh[l] & 3) << 4), (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4),
                          (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4), (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)};
        for (int k = 0; k < 4; ++k) sub[l / 16 + 2 * k] += q[k] * q8[128 * h + l + 32 * k];
      }
      for (int j = 0; j < 8; ++j) isum += b.scales[8 * h + j] * (sub[j] - 32 * bs[8 * h + j]);
    }
    return f16_to_f32(b.d) * x.d[s] * static_cast<float>(isum);
  } else {
    using Block = std::conditional_t<kW == DType::kQ4_K, BlockQ4_K, BlockQ5_K>;
    const auto& b = reinterpret_cast<const Block*>(w)[s];
    int32_t isum = 0, msum = 0;
    for (int j = 0; j < 8; ++j) {
      int sc = 0, m = 0;
      k_scale_min(j, b.scales, &sc, &m);
      const uint8_t* qs = b.qs + 32 * (j / 2);
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) {
        int q = j % 2 == 0 ? qs[l] & 15 : qs[l] >> 4;
        if constexpr (kW == DType::kQ5_K) q |= ((b.qh[l] >> j) & 1) << 4;
        dot += q * q8[32 * j + l];
      }
      isum += sc * dot;
      msum += m * (bs[2 * j] + bs[2 * j + 1]);
    }
    return x.d[s] * (f16_to_f32(b.d) * static_cast<float>(isum) - f16_to_f32(b.dmin) * static_cast<float>(msum));
  }
}

template <DType kW>
void gemv_k(const GemvArgs& a, int64_t j0, int64_t j1) {
  const int64_t ns = a.k / 256;
  float acc[kGemvCallRows];
  for (int64_t j = j0; j < j1; ++j) {
    const uint8_t* w = a.w + static_cast<size_t>(j) * a.w_stride;
    for (int64_t r = 0; r < a.m; ++r) {
      const ActQ8K x = act_q8k(a.act + static_cast<size_t>(r) * a.act_stride, a.k);
      float sum = 0.0f;
      for (int64_t s = 0; s < ns; ++s) sum += k_block_dot<kW>(w, x, s);
      acc[r] = sum;
    }
    store_results(a, j, acc);
  }
}

void f32_to_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * 4);
}
void f16_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
}
void bf16_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
}
void q8_0_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float d = f16_to_f32(blk[b].d);
    for (int i = 0; i < 32; ++i) dst[b * 32 + i] = static_cast<float>(blk[b].q[i]) * d;
  }
}
void q4_0_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const BlockQ4_0*>(src);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float d = f16_to_f32(blk[b].d);
    for (int i = 0; i < 16; ++i) {
      dst[b * 32 + i] = static_cast<float>((blk[b].q[i] & 15) - 8) * d;
      dst[b * 32 + 16 + i] = static_cast<float>((blk[b].q[i] >> 4) - 8) * d;
    }
  }
}

void narrow_f16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

template <int kKv>  // 0 f32, 1 f16, 2 bf16
float kv_at(const void* rows, int64_t i) {
  if constexpr (kKv == 0) return static_cast<const float*>(rows)[i];
  const uint16_t h = static_cast<const uint16_t*>(rows)[i];
  if constexpr (kKv == 1) return f16_to_f32(h);
  return bf16_to_f32(h);
}

template <int kKv>
void attn_scores(const float* q, int64_t group, int64_t hd, const void* rows, int64_t stride, int64_t n, float scale,
                 float* scores, int64_t ld) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t h = 0; h < group; ++h) {
      float s = 0.0f;
      for (int64_t e = 0; e < hd; ++e) s += q[h * hd + e] * kv_at<kKv>(rows, j * stride + e);
      scores[h * ld + j] = s * scale;
    }
}

template <int kKv>
void attn_values(const float* p, int64_t ld, int64_t group, int64_t hd, const void* rows, int64_t stride, int64_t n,
                 float* out) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t h = 0; h < group; ++h) {
      const float pj = p[h * ld + j];
      for (int64_t e = 0; e < hd; ++e) out[h * hd + e] += pj * kv_at<kKv>(rows, j * stride + e);
    }
}

double sum_squares(const float* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

float exp_sum(float* x, int64_t n, float shift) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    s += x[i];
  }
  return s;
}

void silu_mul(float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = g[i], e = std::exp(-std::fabs(x));
    g[i] = (x >= 0.0f ? x : x * e) / (1.0f + e) * u[i];
  }
}

float read_sum(const float* p, int64_t n) {
  float lane[16] = {};
  for (int64_t i = 0; i < n; i += 16)
    for (int l = 0; l < 16; ++l) lane[l] += p[i + l];
  float s = 0.0f;
  for (float v : lane) s += v;
  return s;
}

}  // namespace

namespace scalar {
void prep_q8(const float* x, uint8_t* out, int64_t k) {
  cpu::prep_q8(x, out, k);
}
void f32_to_f32(const void* src, float* dst, int64_t n) {
  cpu::f32_to_f32(src, dst, n);
}
void f16_row_to_f32(const void* src, float* dst, int64_t n) {
  cpu::f16_row_to_f32(src, dst, n);
}
void bf16_row_to_f32(const void* src, float* dst, int64_t n) {
  cpu::bf16_row_to_f32(src, dst, n);
}
void q8_0_row_to_f32(const void* src, float* dst, int64_t n) {
  cpu::q8_0_row_to_f32(src, dst, n);
}
void q4_0_row_to_f32(const void* src, float* dst, int64_t n) {
  cpu::q4_0_row_to_f32(src, dst, n);
}
void narrow_f16(const float* src, uint16_t* dst, int64_t n) {
  cpu::narrow_f16(src, dst, n);
}
float exp_sum(float* x, int64_t n, float shift) {
  return cpu::exp_sum(x, n, shift);
}
void silu_mul(float* g, const float* u, int64_t n) {
  cpu::silu_mul(g, u, n);
}
// bf16 weights take activations rounded to bf16; this form keeps them widened as F32.
void prep_bf16_as_f32(const float* x, uint8_t* out, int64_t k) {
  auto* o = reinterpret_cast<float*>(out);
  for (int64_t i = 0; i < k; ++i) o[i] = bf16_to_f32(f32_to_bf16(x[i]));
}
void narrow_bf16(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}
void gemv_q4_k(const GemvArgs& a, int64_t j0, int64_t j1) {
  gemv_k<DType::kQ4_K>(a, j0, j1);
}
void gemv_q5_k(const GemvArgs& a, int64_t j0, int64_t j1) {
  gemv_k<DType::kQ5_K>(a, j0, j1);
}
void gemv_q6_k(const GemvArgs& a, int64_t j0, int64_t j1) {
  gemv_k<DType::kQ6_K>(a, j0, j1);
}
void gemv_q3_k(const GemvArgs& a, int64_t j0, int64_t j1) {
  gemv_k<DType::kQ3_K>(a, j0, j1);
}
void gemv_q2_k(const GemvArgs& a, int64_t j0, int64_t j1) {
  gemv_k<DType::kQ2_K>(a, j0, j1);
}
void prep_q8k(const float* x, uint8_t* out, int64_t k) {
  const int64_t ns = k / 256;
  auto* d = reinterpret_cast<float*>(out);
  auto* q = reinterpret_cast<int8_t*>(out + ns * 4);
  auto* bsums = reinterpret_cast<int16_t*>(out + ns * 260);
  for (int64_t s = 0; s < ns; ++s, x += 256) {
    float amax = 0.0f;
    for (int i = 0; i < 256; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    const float ds = amax / 127.0f;
    const float id = ds != 0.0f ? 1.0f / ds : 0.0f;
    d[s] = ds;
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 16 * g; i < 16 * g + 16; ++i) {
        const auto v = static_cast<int8_t>(std::nearbyint(x[i] * id));
        q[s * 256 + i] = v;
        sum += v;
      }
      bsums[s * 16 + g] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace scalar

const IsaKernels kScalarKernels = {
    CpuIsa::kScalar,
    {gemv_f32, gemv_half<false>, gemv_half<true>, gemv_quant<DType::kQ8_0>, gemv_quant<DType::kQ4_0>, scalar::gemv_q4_k,
     scalar::gemv_q5_k, scalar::gemv_q6_k, scalar::gemv_q3_k, scalar::gemv_q2_k},
    {nullptr, nullptr, scalar::prep_bf16_as_f32, prep_q8, prep_q8, scalar::prep_q8k, scalar::prep_q8k, scalar::prep_q8k,
     scalar::prep_q8k, scalar::prep_q8k},
    {f32_to_f32, f16_row_to_f32, bf16_row_to_f32, q8_0_row_to_f32, q4_0_row_to_f32, q4_k_row_to_f32, q5_k_row_to_f32,
     q6_k_row_to_f32, q3_k_row_to_f32, q2_k_row_to_f32},
    {nullptr, narrow_f16, scalar::narrow_bf16, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr},
    {attn_scores<0>, attn_scores<1>, attn_scores<2>},
    {attn_values<0>, attn_values<1>, attn_values<2>},
    sum_squares,
    exp_sum,
    silu_mul,
    read_sum,
};

}  // namespace specd::kernels::cpu

// K-quant quantization and dequantization (k_quants.hpp). The quantizers follow GGUF's
// reference algorithm, so that a checkpoint quantized at load is the file llama.cpp's
// quantizer would write:
//   Q4_K / Q5_K: per sub-block of 32, a scale and a min fitted by weighted least squares over a
//     grid of candidate scales (weights: the sub-block's RMS plus |x|); the 8 scales and 8 mins
//     are then quantized to 6 bits against the block's largest (d, dmin), and the values
//     requantized with the rounded scales.
//   Q6_K: per sub-block of 16, a symmetric scale from a grid of candidates around 32 / max,
//     weighted by x²; the 16 scales quantized to int8 against the largest (d = max / -128), and
//     the values requantized with them.
//   Q2_K: per sub-block of 16, a scale and a min fitted as Q4_K's (weights |x|, candidates by the
//     weighted absolute error); scales and mins quantized to 4 bits against the largest of
//     each (d, dmin), and the values requantized with them.
//   Q3_K: per sub-block of 16, levels in [-4, 3] from -4 / max, refined value by value while the
//     weighted (x²) fit improves (at most 5 passes); the 16 scales quantized to 6 bits against
//     the largest (d = max / -32), and the values requantized with them.
// Rounding is to nearest, ties to even, as llama.cpp's float-add trick rounds.
#include "k_quants.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace specd::kernels::cpu {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

int round_int(float v) {
  return static_cast<int>(std::nearbyint(v));
}
int clamp(int v, int lo, int hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

// Levels in [0, nmax] for n values x (weights w) with x ≈ scale·L - neg_min: the best of the
// first guess (range / nmax) and nstep + 1 candidate scales (nmax + rmin + rdelta·i) / range,
// each refitted by weighted least squares, the best by the weighted squared error (mad: the
// weighted absolute error). Returns the scale; *neg_min >= 0.
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* levels, float* neg_min, uint8_t* aux,
                    float rmin, float rdelta, int nstep, bool mad = false) {
  auto penalty = [mad](float diff) { return mad ? std::fabs(diff) : diff * diff; };
  float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_err = 0;
  for (int i = 0; i < n; ++i) {
    levels[i] = static_cast<uint8_t>(clamp(round_int(iscale * (x[i] - min)), 0, nmax));
    const float diff = scale * levels[i] + min - x[i];
    best_err += w[i] * penalty(diff);
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp(round_int(iscale * (x[i] - min)), 0, nmax);
      aux[i] = static_cast<uint8_t>(l);
      const float wl = w[i] * static_cast<float>(l);
      sum_l += wl;
      sum_l2 += wl * static_cast<float>(l);
      sum_xl += wl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float err = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * aux[i] + this_min - x[i];
      err += w[i] * penalty(diff);
    }
    if (err < best_err) {
      std::memcpy(levels, aux, static_cast<size_t>(n));
      best_err = err;
      scale = this_scale;
      min = this_min;
    }
  }
  *neg_min = -min;
  return scale;
}

// The value of largest magnitude among x[0, n) (the first of equals; 0 when all are 0).
float signed_max(int n, const float* x) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  return max;
}

// Signed levels in [-nmax, nmax - 1] (stored + nmax) for n values, weights x²: the best of 19
// candidate scales around -nmax / max (max: the value of largest magnitude). Returns the scale.
float fit_symmetric(int n, int nmax, const float* x, uint8_t* levels) {
  const float max = signed_max(n, x);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.0f;
  }
  auto fit = [&](float iscale, float* sumlx, float* suml2) {
    *sumlx = *suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const auto l = static_cast<float>(clamp(round_int(iscale * x[i]), -nmax, nmax - 1));
      const float w = x[i] * x[i];
      *sumlx += w * x[i] * l;
      *suml2 += w * l * l;
    }
  };
  auto store = [&](float iscale) {
    for (int i = 0; i < n; ++i)
      levels[i] = static_cast<uint8_t>(nmax + clamp(round_int(iscale * x[i]), -nmax, nmax - 1));
  };
  float iscale = -static_cast<float>(nmax) / max;
  float sumlx = 0, suml2 = 0;
  fit(iscale, &sumlx, &suml2);
  store(iscale);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    fit(iscale, &sumlx, &suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      store(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Signed levels in [-nmax, nmax - 1] (stored + nmax) for n values, weights x²: rounded against
// -nmax / max, then each level in turn moved to the one its residual fit asks for while the
// fit's sumlx² / suml2 grows, for at most 5 passes. Returns the scale sumlx / suml2.
float fit_refined(int n, int nmax, const float* x, uint8_t* levels) {
  const float max = signed_max(n, x);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.0f;
  }
  const float iscale = -static_cast<float>(nmax) / max;
  int l[16];
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    l[i] = clamp(round_int(iscale * x[i]), -nmax, nmax - 1);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l[i]);
    suml2 += w * static_cast<float>(l[i]) * static_cast<float>(l[i]);
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * static_cast<float>(l[i]);
      if (!(slx > 0)) continue;
      float sl2 = suml2 - w * static_cast<float>(l[i]) * static_cast<float>(l[i]);
      const int nl = clamp(round_int(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (nl == l[i]) continue;
      slx += w * x[i] * static_cast<float>(nl);
      sl2 += w * static_cast<float>(nl) * static_cast<float>(nl);
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        l[i] = nl;
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) levels[i] = static_cast<uint8_t>(l[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// The 16 groups of 16 of a block fitted by fit(values, levels) -> scale: the scale of largest
// magnitude (the first of equals), its magnitude in *max_abs.
template <class Fit>
float fit_groups(const float* x, uint8_t* levels, float* scales, float* max_abs, Fit fit) {
  float max_scale = 0;
  *max_abs = 0;
  for (int s = 0; s < 16; ++s) {
    scales[s] = fit(x + 16 * s, levels + 16 * s);
    if (std::fabs(scales[s]) > *max_abs) {
      *max_abs = std::fabs(scales[s]);
      max_scale = scales[s];
    }
  }
  return max_scale;
}

// Q4_K / Q5_K: the levels L[256] (0..nmax) and the packed scales, d and dmin of one block.
template <class Block>
void quantize_k45_block(const float* x, Block& y, int nmax, float rmin, int nstep, uint8_t* levels) {
  float scales[8], mins[8], weights[32];
  uint8_t aux[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = fit_scale_min(32, nmax, x + 32 * j, weights, levels + 32 * j, &mins[j], aux, rmin, 0.1f, nstep);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  std::memset(y.scales, 0, sizeof(y.scales));
  for (int j = 0; j < 8; ++j) {
    const int ls = clamp(static_cast<uint8_t>(round_int(inv_scale * scales[j])), 0, 63);
    const int lm = clamp(static_cast<uint8_t>(round_int(inv_min * mins[j])), 0, 63);
    if (j < 4) {
      y.scales[j] = static_cast<uint8_t>(ls);
      y.scales[j + 4] = static_cast<uint8_t>(lm);
    } else {
      y.scales[j + 4] = static_cast<uint8_t>((ls & 15) | ((lm & 15) << 4));
      y.scales[j - 4] = static_cast<uint8_t>(y.scales[j - 4] | ((ls >> 4) << 6));
      y.scales[j] = static_cast<uint8_t>(y.scales[j] | ((lm >> 4) << 6));
    }
  }
  y.d = f32_to_f16(max_scale / 63.0f);
  y.dmin = f32_to_f16(max_min / 63.0f);
  for (int j = 0; j < 8; ++j) {
    int sc = 0, m = 0;
    k_scale_min(j, y.scales, &sc, &m);
    const float d = f16_to_f32(y.d) * static_cast<float>(sc);
    if (d == 0.0f) continue;  // the sub-block keeps its fitted levels (they all decode to -dmin·m)
    const float dm = f16_to_f32(y.dmin) * static_cast<float>(m);
    for (int i = 0; i < 32; ++i)
      levels[32 * j + i] = static_cast<uint8_t>(clamp(round_int((x[32 * j + i] + dm) / d), 0, nmax));
  }
}

}  // namespace

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
  uint8_t levels[256];
  for (int64_t b = 0; b < nb; ++b, x += 256) {
    quantize_k45_block(x, y[b], 15, -1.0f, 20, levels);
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l)
        y[b].qs[32 * j + l] = static_cast<uint8_t>(levels[64 * j + l] | (levels[64 * j + l + 32] << 4));
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
  uint8_t levels[256];
  for (int64_t b = 0; b < nb; ++b, x += 256) {
    quantize_k45_block(x, y[b], 31, -0.5f, 15, levels);
    std::memset(y[b].qh, 0, sizeof(y[b].qh));
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        int l1 = levels[64 * j + l], l2 = levels[64 * j + l + 32];
        if (l1 > 15) {
          l1 -= 16;
          y[b].qh[l] = static_cast<uint8_t>(y[b].qh[l] | (1 << (2 * j)));
        }
        if (l2 > 15) {
          l2 -= 16;
          y[b].qh[l] = static_cast<uint8_t>(y[b].qh[l] | (2 << (2 * j)));
        }
        y[b].qs[32 * j + l] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
    }
  }
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
  uint8_t levels[256];
  for (int64_t b = 0; b < nb; ++b, x += 256) {
    float scales[16], max_abs_scale = 0;
    const float max_scale = fit_groups(x, levels, scales, &max_abs_scale,
                                       [](const float* v, uint8_t* l) { return fit_symmetric(16, 32, v, l); });
    BlockQ6_K& out = y[b];
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&out, 0, sizeof(out));
      continue;
    }
    const float iscale = -128.0f / max_scale;
    out.d = f32_to_f16(1 / iscale);
    for (int s = 0; s < 16; ++s) out.scales[s] = static_cast<int8_t>(std::min(127, round_int(iscale * scales[s])));
    for (int s = 0; s < 16; ++s) {
      const float d = f16_to_f32(out.d) * static_cast<float>(out.scales[s]);
      if (d == 0.0f) continue;
      for (int i = 0; i < 16; ++i)
        levels[16 * s + i] = static_cast<uint8_t>(clamp(round_int(x[16 * s + i] / d), -32, 31) + 32);
    }
    for (int h = 0; h < 2; ++h) {
      const uint8_t* L = levels + 128 * h;
      uint8_t* ql = out.ql + 64 * h;
      uint8_t* qh = out.qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((L[l] & 15) | ((L[l + 64] & 15) << 4));
        ql[l + 32] = static_cast<uint8_t>((L[l + 32] & 15) | ((L[l + 96] & 15) << 4));
        qh[l] = static_cast<uint8_t>((L[l] >> 4) | ((L[l + 32] >> 4) << 2) | ((L[l + 64] >> 4) << 4) |
                                     ((L[l + 96] >> 4) << 6));
      }
    }
  }
}

namespace {

// Levels L[256] (0..3 of Q2_K, 0..7 of Q3_K) into qs (bits 0-1, Q3_K's layout).
void pack_low2(const uint8_t* levels, uint8_t* qs) {
  for (int n = 0; n < 2; ++n)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* L = levels + 128 * n + l;
      qs[32 * n + l] = static_cast<uint8_t>((L[0] & 3) | (L[32] & 3) << 2 | (L[64] & 3) << 4 | (L[96] & 3) << 6);
    }
}

}  // namespace

void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb) {
  uint8_t levels[256];
  for (int64_t b = 0; b < nb; ++b, x += 256) {
    float scales[16], max_abs_scale = 0;
    const float max_scale = fit_groups(x, levels, scales, &max_abs_scale,
                                       [](const float* v, uint8_t* l) { return fit_refined(16, 4, v, l); });
    BlockQ3_K& out = y[b];
    std::memset(&out, 0, sizeof(out));
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int s = 0; s < 16; ++s) {
        const int l = clamp(static_cast<int8_t>(round_int(iscale * scales[s])), -32, 31) + 32;
        out.scales[s % 8] |= static_cast<uint8_t>((l & 15) << (4 * (s / 8)));
        out.scales[8 + s % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (s / 4)));
      }
      out.d = f32_to_f16(1 / iscale);
    }
    for (int s = 0; s < 16; ++s) {
      const float d = f16_to_f32(out.d) * static_cast<float>(q3_k_scale(s, out.scales) - 32);
      if (d == 0.0f) continue;
      for (int i = 0; i < 16; ++i)
        levels[16 * s + i] = static_cast<uint8_t>(clamp(round_int(x[16 * s + i] / d), -4, 3) + 4);
    }
    for (int e = 0; e < 256; ++e)
      if (levels[e] > 3) {
        out.hmask[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
        levels[e] -= 4;
      }
    pack_low2(levels, out.qs);
  }
}

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb) {
  uint8_t levels[256], aux[16];
  for (int64_t b = 0; b < nb; ++b, x += 256) {
    float scales[16], mins[16], w[16];
    float max_scale = 0, max_min = 0;
    for (int s = 0; s < 16; ++s) {
      for (int i = 0; i < 16; ++i) w[i] = std::fabs(x[16 * s + i]);
      scales[s] = fit_scale_min(16, 3, x + 16 * s, w, levels + 16 * s, &mins[s], aux, -0.5f, 0.1f, 15, true);
      max_scale = std::max(max_scale, scales[s]);
      max_min = std::max(max_min, mins[s]);
    }
    BlockQ2_K& out = y[b];
    std::memset(&out, 0, sizeof(out));
    if (max_scale > 0) {
      const float iscale = 15.0f / max_scale;
      for (int s = 0; s < 16; ++s) out.scales[s] = static_cast<uint8_t>(round_int(iscale * scales[s]));
      out.d = f32_to_f16(max_scale / 15.0f);
    }
    if (max_min > 0) {
      const float iscale = 15.0f / max_min;
      for (int s = 0; s < 16; ++s) out.scales[s] |= static_cast<uint8_t>(round_int(iscale * mins[s]) << 4);
      out.dmin = f32_to_f16(max_min / 15.0f);
    }
    for (int s = 0; s < 16; ++s) {
      const float d = f16_to_f32(out.d) * static_cast<float>(out.scales[s] & 15);
      if (d == 0.0f) continue;
      const float dm = f16_to_f32(out.dmin) * static_cast<float>(out.scales[s] >> 4);
      for (int i = 0; i < 16; ++i)
        levels[16 * s + i] = static_cast<uint8_t>(clamp(round_int((x[16 * s + i] + dm) / d), 0, 3));
    }
    pack_low2(levels, out.qs);
  }
}

void unpack_k_scales(const uint8_t* scales, int* sc, int* m) {
  for (int j = 0; j < 8; ++j) k_scale_min(j, scales, &sc[j], &m[j]);
}

namespace {

// Q4_K / Q5_K rows: value = d·sc·q - dmin·m per sub-block of 32 (Q5_K: q's 5th bit from qh).
template <class Block>
void k45_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const Block*>(src);
  for (int64_t b = 0; b < n / 256; ++b, dst += 256) {
    const float d = f16_to_f32(blk[b].d), dmin = f16_to_f32(blk[b].dmin);
    for (int j = 0; j < 8; ++j) {
      int sc = 0, m = 0;
      k_scale_min(j, blk[b].scales, &sc, &m);
      const float scale = d * static_cast<float>(sc), min = dmin * static_cast<float>(m);
      const uint8_t* q = blk[b].qs + 32 * (j / 2);
      for (int l = 0; l < 32; ++l) {
        int v = j % 2 == 0 ? q[l] & 15 : q[l] >> 4;
        if constexpr (std::is_same_v<Block, BlockQ5_K>) v |= ((blk[b].qh[l] >> j) & 1) << 4;
        dst[32 * j + l] = scale * static_cast<float>(v) - min;
      }
    }
  }
}

}  // namespace

void q4_k_row_to_f32(const void* src, float* dst, int64_t n) {
  k45_row_to_f32<BlockQ4_K>(src, dst, n);
}

void q5_k_row_to_f32(const void* src, float* dst, int64_t n) {
  k45_row_to_f32<BlockQ5_K>(src, dst, n);
}

void q6_k_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const BlockQ6_K*>(src);
  for (int64_t b = 0; b < n / 256; ++b, dst += 256) {
    const float d = f16_to_f32(blk[b].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = blk[b].ql + 64 * h;
      const uint8_t* qh = blk[b].qh + 32 * h;
      const int8_t* sc = blk[b].scales + 8 * h;
      float* out = dst + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q[4] = {(ql[l] & 15) | ((qh[l] & 3) << 4), (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4),
                          (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4), (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)};
        for (int k = 0; k < 4; ++k)
          out[l + 32 * k] = d * static_cast<float>(sc[l / 16 + 2 * k]) * static_cast<float>(q[k] - 32);
      }
    }
  }
}

void q3_k_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const BlockQ3_K*>(src);
  for (int64_t b = 0; b < n / 256; ++b, dst += 256) {
    const float d = f16_to_f32(blk[b].d);
    for (int e = 0; e < 256; ++e) {
      const int q = ((blk[b].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3) |
                    ((blk[b].hmask[e % 32] >> (e / 32)) & 1) << 2;
      dst[e] = d * static_cast<float>(q3_k_scale(e / 16, blk[b].scales) - 32) * static_cast<float>(q - 4);
    }
  }
}

void q2_k_row_to_f32(const void* src, float* dst, int64_t n) {
  const auto* blk = static_cast<const BlockQ2_K*>(src);
  for (int64_t b = 0; b < n / 256; ++b, dst += 256) {
    const float d = f16_to_f32(blk[b].d), dmin = f16_to_f32(blk[b].dmin);
    for (int e = 0; e < 256; ++e) {
      const int sc = blk[b].scales[e / 16];
      const int q = (blk[b].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      dst[e] = d * static_cast<float>(sc & 15) * static_cast<float>(q) - dmin * static_cast<float>(sc >> 4);
    }
  }
}

}  // namespace specd::kernels::cpu

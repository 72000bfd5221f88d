#include "specd/kernels/rope.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "cuda_dispatch.hpp"
#include "specd/error.hpp"
#include "specd/kernels/parallel.hpp"

namespace specd::kernels {

std::vector<float> rope_inv_freq(int64_t head_dim, double theta, const RopeScalingParams& s) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "rope: head_dim must be positive and even, got " + std::to_string(head_dim));
  }
  if (s.kind != RopeScalingParams::Kind::kNone && !(s.factor > 0)) {
    throw Error(ErrorCode::kInvalidArgument, "rope: scaling factor must be > 0, got " + std::to_string(s.factor));
  }
  const int64_t half = head_dim / 2;
  std::vector<float> out(static_cast<size_t>(half));
  for (int64_t j = 0; j < half; ++j) {
    // transformers computes the exponent and power in float32; do the same so that long
    // contexts see the same angles as the reference implementation.
    const float expo = static_cast<float>(2 * j) / static_cast<float>(head_dim);
    float inv = 1.0f / std::pow(static_cast<float>(theta), expo);
    switch (s.kind) {
      case RopeScalingParams::Kind::kNone:
        break;
      case RopeScalingParams::Kind::kLinear:
        inv = static_cast<float>(inv / s.factor);
        break;
      case RopeScalingParams::Kind::kLlama3: {
        const double old_len = s.original_max_position_embeddings;
        const double low_wavelen = old_len / s.low_freq_factor;
        const double high_wavelen = old_len / s.high_freq_factor;
        const double wavelen = 2.0 * std::numbers::pi / inv;
        if (wavelen > low_wavelen) {
          inv = static_cast<float>(inv / s.factor);
        } else if (wavelen >= high_wavelen) {
          const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
          inv = static_cast<float>((1.0 - smooth) * inv / s.factor + smooth * inv);
        }
        break;
      }
    }
    out[static_cast<size_t>(j)] = inv;
  }
  return out;
}

void rope_cos_sin(Device device, const int32_t* positions, int64_t n, const float* inv_freq, int64_t half, float* cos,
                  float* sin) {
  if constexpr (kWithCuda)
    if (device == Device::kCuda) return cuda::rope_cos_sin(positions, n, inv_freq, half, cos, sin);
  detail::require_cpu(device, "rope_cos_sin");
  for (int64_t t = 0; t < n; ++t) {
    const double pos = positions[t];
    for (int64_t j = 0; j < half; ++j) {
      const double angle = pos * static_cast<double>(inv_freq[j]);
      cos[t * half + j] = static_cast<float>(std::cos(angle));
      sin[t * half + j] = static_cast<float>(std::sin(angle));
    }
  }
}

void rope_apply(Device device, float* x, int64_t n, int64_t num_heads, int64_t head_dim, const float* cos,
                const float* sin) {
  if constexpr (kWithCuda)
    if (device == Device::kCuda) return cuda::rope_apply(x, n, num_heads, head_dim, cos, sin);
  detail::require_cpu(device, "rope_apply");
  const int64_t half = head_dim / 2;
  parallel_for(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, num_heads * head_dim)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const float* c = cos + t * half;
      const float* s = sin + t * half;
      for (int64_t h = 0; h < num_heads; ++h) {
        float* v = x + (t * num_heads + h) * head_dim;
        for (int64_t j = 0; j < half; ++j) {
          const float x0 = v[j], x1 = v[j + half];
          v[j] = x0 * c[j] - x1 * s[j];
          v[j + half] = x1 * c[j] + x0 * s[j];
        }
      }
    }
  });
}

}  // namespace specd::kernels

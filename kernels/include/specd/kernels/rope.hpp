// Rotary position embedding, rotate-half convention (Hugging Face Llama): for each head,
// with half = head_dim / 2 and angle_j = position * inv_freq[j],
//   out[j]        = x[j] * cos_j - x[j + half] * sin_j
//   out[j + half] = x[j + half] * cos_j + x[j] * sin_j
#pragma once

#include <cstdint>
#include <vector>

#include "specd/kernels/device.hpp"

namespace specd::kernels {

struct RopeScalingParams {
  enum class Kind { kNone, kLinear, kLlama3 };
  Kind kind = Kind::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;                    // llama3
  double high_freq_factor = 4.0;                   // llama3
  double original_max_position_embeddings = 8192;  // llama3
};

// inv_freq[j] = theta^(-2j / head_dim), j in [0, head_dim/2), then scaled: linear divides by
// factor; llama3 divides long wavelengths by factor and interpolates the medium band
// (transformers' _compute_llama3_parameters). Throws on odd head_dim or factor <= 0.
std::vector<float> rope_inv_freq(int64_t head_dim, double theta, const RopeScalingParams& scaling);

// cos/sin tables for n positions: cos, sin [n, half]. Angles are computed in double.
void rope_cos_sin(Device device, const int32_t* positions, int64_t n, const float* inv_freq, int64_t half, float* cos,
                  float* sin);

// Rotates x [n, num_heads, head_dim] in place with the tables from rope_cos_sin.
void rope_apply(Device device, float* x, int64_t n, int64_t num_heads, int64_t head_dim, const float* cos,
                const float* sin);

}  // namespace specd::kernels

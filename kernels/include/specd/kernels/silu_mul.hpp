// SwiGLU activation: out = silu(gate) * up, silu(x) = x / (1 + exp(-x)).
#pragma once

#include <cstdint>

#include "specd/kernels/device.hpp"

namespace specd::kernels {

// gate, up, out [n] (out may alias gate or up).
void silu_mul(Device device, const float* gate, const float* up, float* out, int64_t n);

}  // namespace specd::kernels

// RMSNorm as in Llama: out = x / sqrt(mean(x^2) + eps) * weight, per row.
#pragma once

#include <cstdint>

#include "specd/kernels/device.hpp"

namespace specd::kernels {

// x, out [rows, dim] (may alias), weight [dim].
void rmsnorm(Device device, const float* x, const float* weight, float* out, int64_t rows, int64_t dim, float eps);

// Fused residual add + norm, the transformer's "x = x + f(x); h = norm(x)":
//   residual += x;  out = rmsnorm(residual) * weight.
// x [rows, dim], residual [rows, dim] (in/out), out [rows, dim] (must not alias residual).
void rmsnorm_residual(Device device, const float* x, float* residual, const float* weight, float* out, int64_t rows,
                      int64_t dim, float eps);

namespace reference {
void rmsnorm(const float* x, const float* weight, float* out, int64_t rows, int64_t dim, float eps);
}  // namespace reference

}  // namespace specd::kernels

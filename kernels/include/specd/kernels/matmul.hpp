// Dense layer in the checkpoint's layout: c = a · wᵀ + bias.
#pragma once

#include <cstdint>

#include "specd/kernels/device.hpp"

namespace specd::kernels {

// a [m, k], w [n, k] (row-major, as Hugging Face stores Linear weights), bias [n] or null,
// c [m, n]. CPU: OpenBLAS sgemm (sgemv when m == 1) per slice of output features, slices
// spread over the kernel thread pool.
void matmul(Device device, const float* a, const float* w, const float* bias, float* c, int64_t m,
            int64_t n, int64_t k);

namespace reference {
// Naive triple loop with double accumulation; the ground truth for tests.
void matmul(const float* a, const float* w, const float* bias, float* c, int64_t m, int64_t n,
            int64_t k);
}  // namespace reference

}  // namespace specd::kernels

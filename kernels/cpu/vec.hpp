// Vector primitives shared by the CPU kernels (private to kernels/cpu). Each is compiled for
// AVX2+FMA and for baseline x86-64 and picked at load time (GCC target_clones), so the build
// needs no -march flag and runs on any x86-64.
#pragma once

#include <cstdint>

namespace specd::kernels::cpu {

float dot(const float* a, const float* b, int64_t n);
// y += alpha * x
void axpy(float alpha, const float* x, float* y, int64_t n);
// y *= alpha
void scale(float alpha, float* y, int64_t n);
double sum_squares(const float* x, int64_t n);

}  // namespace specd::kernels::cpu

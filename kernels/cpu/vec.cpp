#include "vec.hpp"

#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SPECD_MULTIVERSION __attribute__((target_clones("arch=haswell", "default")))
#else
#define SPECD_MULTIVERSION
#endif

// The 32-byte vector helpers below are internal and always inlined, so the psABI note about
// passing AVX vectors without AVX enabled does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace specd::kernels::cpu {
namespace {

typedef float V8 __attribute__((vector_size(32)));

[[gnu::always_inline]] inline V8 load8(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
[[gnu::always_inline]] inline void store8(float* p, const V8& v) { std::memcpy(p, &v, sizeof(v)); }

}  // namespace

SPECD_MULTIVERSION float dot(const float* a, const float* b, int64_t n) {
  V8 acc0 = {}, acc1 = {}, acc2 = {}, acc3 = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 += load8(a + i) * load8(b + i);
    acc1 += load8(a + i + 8) * load8(b + i + 8);
    acc2 += load8(a + i + 16) * load8(b + i + 16);
    acc3 += load8(a + i + 24) * load8(b + i + 24);
  }
  for (; i + 8 <= n; i += 8) acc0 += load8(a + i) * load8(b + i);
  const V8 acc = (acc0 + acc1) + (acc2 + acc3);
  float s = 0.0f;
  for (int j = 0; j < 8; ++j) s += acc[j];
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

SPECD_MULTIVERSION void axpy(float alpha, const float* x, float* y, int64_t n) {
  const V8 va = {alpha, alpha, alpha, alpha, alpha, alpha, alpha, alpha};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(y + i, load8(y + i) + va * load8(x + i));
  for (; i < n; ++i) y[i] += alpha * x[i];
}

SPECD_MULTIVERSION void scale(float alpha, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= alpha;
}

SPECD_MULTIVERSION double sum_squares(const float* x, int64_t n) {
  V8 acc0 = {}, acc1 = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const V8 a = load8(x + i), b = load8(x + i + 8);
    acc0 += a * a;
    acc1 += b * b;
  }
  const V8 acc = acc0 + acc1;
  double s = 0.0;
  for (int j = 0; j < 8; ++j) s += acc[j];
  for (; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}

}  // namespace specd::kernels::cpu

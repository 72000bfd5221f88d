#include "specd/kernels/matmul.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_dispatch.hpp"
#include "isa_kernels.hpp"
#include "specd/error.hpp"
#include "specd/kernels/parallel.hpp"

namespace specd::kernels {

uint8_t* cpu::gemv_panel(size_t bytes) {
  thread_local std::vector<uint8_t> panel;
  if (panel.size() < bytes + 64) panel.resize(bytes + 64);
  const auto addr = reinterpret_cast<uintptr_t>(panel.data());
  return panel.data() + (64 - addr % 64) % 64;
}

namespace {

constexpr int64_t kGemvTask = 16;  // output features per GEMV task
// Activation rows per pass over the weights on the GEMV path (prefill re-reads the weights
// m / 256 times; the walks keep one group of rows in the caches at a time).
constexpr int64_t kRowChunk = cpu::kGemvCallRows;

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "matmul: " + what);
}

void validate(const WeightView& w, int64_t k, int64_t m) {
  if (w.data == nullptr || w.rows <= 0 || w.cols <= 0) invalid("empty weight");
  if (w.cols != k)
    invalid("weight has " + std::to_string(w.cols) + " input features, activations " + std::to_string(k));
  if (m < 0) invalid("negative row count");
  row_bytes_checked(w.dtype, w.cols, "matmul");
}

// Activations prepared for one weight dtype, in a per-thread buffer reused across calls.
struct Prepared {
  const uint8_t* data;
  size_t stride;
};

Prepared prepare(const cpu::IsaKernels& isa, DType dt, const float* a, int64_t m, int64_t k) {
  if (isa.prep[static_cast<int>(dt)] == nullptr)
    return {reinterpret_cast<const uint8_t*>(a), static_cast<size_t>(k) * sizeof(float)};
  thread_local std::vector<uint8_t> buf;
  const auto stride = static_cast<size_t>(cpu::act_row_bytes(dt, k) + 63) / 64 * 64;
  if (buf.size() < stride * static_cast<size_t>(m)) buf.resize(stride * static_cast<size_t>(m));
  uint8_t* out = buf.data();
  const cpu::PrepFn prep = isa.prep[static_cast<int>(dt)];
  parallel_for(m, std::max<int64_t>(1, 16384 / k), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) prep(a + r * k, out + static_cast<size_t>(r) * stride, k);
  });
  return {out, stride};
}

// c[r * ldc + j] (+ bias[j]) for features [j0, j1) of w, rows [0, m), on the GEMV path.
void gemv_range(const cpu::IsaKernels& isa, const Prepared& x, int64_t m, const WeightView& w, const float* bias,
                float* c, int64_t ldc, int64_t j0, int64_t j1) {
  const size_t stride = row_bytes(w.dtype, w.cols);
  cpu::GemvArgs args;
  args.act = x.data;
  args.act_stride = x.stride;
  args.m = m;
  args.w = static_cast<const uint8_t*>(w.data) + static_cast<size_t>(j0) * stride;
  args.w_stride = stride;
  args.k = w.cols;
  args.c = c + j0;
  args.ldc = ldc;
  isa.gemv[static_cast<int>(w.dtype)](args, 0, j1 - j0);
  if (bias != nullptr)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = j0; j < j1; ++j) c[r * ldc + j] += bias[j];
}

// Features of several outputs as one task space: task t covers features
// [(t - first[o]) * unit, ...) of output o, where first[o] is the first task of output o.
template <class Fn>
void for_each_task(std::span<const MatmulOutput> outs, int64_t unit, Fn&& fn) {
  int64_t first[8];
  int64_t total = 0;
  for (size_t o = 0; o < outs.size(); ++o) {
    first[o] = total;
    total += (outs[o].w.rows + unit - 1) / unit;
  }
  parallel_for(total, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      size_t o = 0;
      while (o + 1 < outs.size() && t >= first[o + 1]) ++o;
      const int64_t j0 = (t - first[o]) * unit;
      fn(outs[o], j0, std::min(outs[o].w.rows, j0 + unit));
    }
  });
}

}  // namespace

void matmul_multi(Device device, const float* a, int64_t m, int64_t k, std::span<const MatmulOutput> outs) {
  if (outs.size() > 8) invalid("more than 8 outputs in one call");
  for (const MatmulOutput& o : outs) validate(o.w, k, m);
  if constexpr (kWithCuda) {
    if (device == Device::kCuda) {
      bool one_dtype = true;
      for (const MatmulOutput& o : outs) one_dtype = one_dtype && o.w.dtype == outs[0].w.dtype;
      if (one_dtype) return cuda::matmul_multi(a, m, outs);
      for (const MatmulOutput& o : outs) cuda::matmul(a, m, o.w, o.bias, o.c, o.w.rows);
      return;
    }
  }
  detail::require_cpu(device, "matmul");
  if (m == 0 || outs.empty()) return;
  const DType dt = outs[0].w.dtype;
  for (const MatmulOutput& o : outs)
    if (o.w.dtype != dt) invalid("outputs of one call must share a dtype");
  const cpu::IsaKernels& isa = cpu::active_kernels();
  for (int64_t r0 = 0; r0 < m; r0 += kRowChunk) {
    const int64_t mc = std::min(kRowChunk, m - r0);
    const Prepared x = prepare(isa, dt, a + r0 * k, mc, k);
    for_each_task(outs, kGemvTask, [&](const MatmulOutput& o, int64_t j0, int64_t j1) {
      gemv_range(isa, x, mc, o.w, o.bias, o.c + r0 * o.w.rows, o.w.rows, j0, j1);
    });
  }
}

void matmul(Device device, const float* a, const WeightView& w, const float* bias, float* c, int64_t m) {
  const MatmulOutput out{w, bias, c};
  matmul_multi(device, a, m, w.cols, {&out, 1});
}

void matmul_swiglu(Device device, const float* a, const WeightView& gate, const WeightView& up, float* out, int64_t m) {
  validate(gate, gate.cols, m);
  validate(up, gate.cols, m);
  if (gate.rows != up.rows || gate.dtype != up.dtype) invalid("gate and up projections differ in shape or dtype");
  if constexpr (kWithCuda)
    if (device == Device::kCuda) return cuda::matmul_swiglu(a, m, gate, up, out);
  detail::require_cpu(device, "matmul_swiglu");
  if (m == 0) return;
  const cpu::IsaKernels& isa = cpu::active_kernels();
  const int64_t n = gate.rows, k = gate.cols;
  const int64_t unit = kGemvTask;
  for (int64_t r0 = 0; r0 < m; r0 += kRowChunk) {
    const int64_t mc = std::min(kRowChunk, m - r0);
    const Prepared x = prepare(isa, gate.dtype, a + r0 * k, mc, k);
    float* o_chunk = out + r0 * n;
    parallel_for((n + unit - 1) / unit, 1, [&](int64_t b, int64_t e) {
      thread_local std::vector<float> up_tile;  // [mc, unit]: the up projection of this task
      if (up_tile.size() < static_cast<size_t>(mc * unit)) up_tile.resize(static_cast<size_t>(mc * unit));
      for (int64_t t = b; t < e; ++t) {
        const int64_t j0 = t * unit, j1 = std::min(n, j0 + unit), w = j1 - j0;
        // up into the tile (features shifted to start at 0), gate straight into the output.
        const WeightView up_part{up.dtype, static_cast<const uint8_t*>(up.data) + row_bytes(up.dtype, k) * j0, w, k};
        gemv_range(isa, x, mc, gate, nullptr, o_chunk, n, j0, j1);
        gemv_range(isa, x, mc, up_part, nullptr, up_tile.data(), w, 0, w);
        for (int64_t r = 0; r < mc; ++r) isa.silu_mul(o_chunk + r * n + j0, up_tile.data() + r * w, w);
      }
    });
  }
}

namespace {

// Output features [j0, j1) of one group (the SwiGLU form: gate into c, up into a tile, then
// silu(gate) * up), as matmul / matmul_swiglu compute them.
void grouped_range(const cpu::IsaKernels& isa, const Prepared& x, const GroupedMatmul& g, int64_t j0, int64_t j1) {
  const int64_t n = g.w.rows;
  gemv_range(isa, x, g.m, g.w, nullptr, g.c, n, j0, j1);
  if (g.up.data == nullptr) return;
  thread_local std::vector<float> up_tile;
  const int64_t w = j1 - j0, k = g.w.cols;
  if (up_tile.size() < static_cast<size_t>(g.m * w)) up_tile.resize(static_cast<size_t>(g.m * w));
  const WeightView up_part{g.up.dtype, static_cast<const uint8_t*>(g.up.data) + row_bytes(g.up.dtype, k) * j0, w, k};
  gemv_range(isa, x, g.m, up_part, nullptr, up_tile.data(), w, 0, w);
  for (int64_t r = 0; r < g.m; ++r) isa.silu_mul(g.c + r * n + j0, up_tile.data() + r * w, w);
}

}  // namespace

void matmul_grouped(Device device, std::span<const GroupedMatmul> groups) {
  for (const GroupedMatmul& g : groups) {
    validate(g.w, g.w.cols, g.m);
    if (g.up.data != nullptr && (g.up.rows != g.w.rows || g.up.cols != g.w.cols || g.up.dtype != g.w.dtype))
      invalid("gate and up projections differ in shape or dtype");
  }
  if constexpr (kWithCuda) {
    if (device == Device::kCuda) {  // each group as its single call (the same rows, bit for bit)
      for (const GroupedMatmul& g : groups) {
        if (g.m == 0) continue;
        if (g.up.data != nullptr) {
          cuda::matmul_swiglu(g.a, g.m, g.w, g.up, g.c);
        } else {
          cuda::matmul(g.a, g.m, g.w, nullptr, g.c, g.w.rows);
        }
      }
      return;
    }
  }
  detail::require_cpu(device, "matmul_grouped");
  std::vector<const GroupedMatmul*> small;
  for (const GroupedMatmul& g : groups) {
    if (g.m > kRowChunk) {  // prefill-sized groups: the row-chunked single calls
      if (g.up.data != nullptr) {
        matmul_swiglu(device, g.a, g.w, g.up, g.c, g.m);
      } else {
        matmul(device, g.a, g.w, nullptr, g.c, g.m);
      }
    } else if (g.m > 0) {
      small.push_back(&g);
    }
  }
  if (small.empty()) return;
  const cpu::IsaKernels& isa = cpu::active_kernels();
  // Each group's activations in a buffer of its own, prepared once.
  thread_local std::vector<std::vector<uint8_t>> buffers;
  if (buffers.size() < small.size()) buffers.resize(small.size());
  std::vector<Prepared> x(small.size());
  std::vector<int64_t> first(small.size() + 1, 0);
  for (size_t i = 0; i < small.size(); ++i) {
    const GroupedMatmul& g = *small[i];
    const DType dt = g.w.dtype;
    const cpu::PrepFn prep = isa.prep[static_cast<int>(dt)];
    if (prep == nullptr) {
      x[i] = {reinterpret_cast<const uint8_t*>(g.a), static_cast<size_t>(g.w.cols) * sizeof(float)};
    } else {
      const auto stride = static_cast<size_t>(cpu::act_row_bytes(dt, g.w.cols) + 63) / 64 * 64;
      std::vector<uint8_t>& buf = buffers[i];
      if (buf.size() < stride * static_cast<size_t>(g.m)) buf.resize(stride * static_cast<size_t>(g.m));
      for (int64_t r = 0; r < g.m; ++r)
        prep(g.a + r * g.w.cols, buf.data() + static_cast<size_t>(r) * stride, g.w.cols);
      x[i] = {buf.data(), stride};
    }
    first[i + 1] = first[i] + (g.w.rows + kGemvTask - 1) / kGemvTask;
  }
  parallel_for(first.back(), 1, [&](int64_t b, int64_t e) {
    size_t i = 0;
    for (int64_t t = b; t < e; ++t) {
      while (t >= first[i + 1]) ++i;
      const int64_t j0 = (t - first[i]) * kGemvTask;
      grouped_range(isa, x[i], *small[i], j0, std::min(small[i]->w.rows, j0 + kGemvTask));
    }
  });
}

void silu_mul(Device device, float* g, const float* u, int64_t n) {
  if constexpr (kWithCuda)
    if (device == Device::kCuda) return cuda::silu_mul(g, u, n);
  detail::require_cpu(device, "silu_mul");
  if (n <= 0) return;
  const cpu::IsaKernels& isa = cpu::active_kernels();
  parallel_for(n, 16384, [&](int64_t b, int64_t e) { isa.silu_mul(g + b, u + b, e - b); });
}

void gelu_tanh_mul(Device device, float* g, const float* u, int64_t n) {
  if constexpr (kWithCuda)
    if (device == Device::kCuda) return cuda::gelu_tanh_mul(g, u, n);
  detail::require_cpu(device, "gelu_tanh_mul");
  if (n <= 0) return;
  parallel_for(n, 16384, [&](int64_t b, int64_t e) {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    for (int64_t i = b; i < e; ++i) {
      const float x = g[i];
      g[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x))) * u[i];
    }
  });
}

namespace reference {
void matmul(const float* a, const WeightView& w, const float* bias, float* c, int64_t m) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  const size_t stride = row_bytes(w.dtype, w.cols);
  for (int64_t j = 0; j < w.rows; ++j) {
    cpu::kScalarKernels.to_f32[static_cast<int>(w.dtype)](
        static_cast<const uint8_t*>(w.data) + static_cast<size_t>(j) * stride, row.data(), w.cols);
    for (int64_t i = 0; i < m; ++i) {
      double acc = bias != nullptr ? bias[j] : 0.0;
      for (int64_t l = 0; l < w.cols; ++l) acc += static_cast<double>(a[i * w.cols + l]) * row[static_cast<size_t>(l)];
      c[i * w.rows + j] = static_cast<float>(acc);
    }
  }
}
}  // namespace reference

}  // namespace specd::kernels

// The CPU kernels at memory-bound sizes, per ISA level and weight dtype:
//   GEMV/<isa>/<dtype>/rows:m   a weight set of 512 MiB in F32 terms (768 x 3072 matrices, far
//                               larger than any cache), m activation rows; "bytes_per_second"
//                               is weight bytes streamed (compare with ReadBandwidth)
//   GEMV_HOT/<isa>/<dtype>/rows:m  one 1024 x 2048 matrix (tinyllama's hidden size; at most
//                               2.2 MiB in the quantized types, so it stays in the caches):
//                               the compute cost alone, the bound a multi-row GEMV meets when
//                               its weights arrive faster than it can use them; rows:64 is
//                               a prefill chunk (compare ns/row/Kweights with the FMA peak)
//   ReadBandwidth               the yardstick specd bench uses, at the same thread count
//   Attention/<isa>/<kv>/ctx:n/rows:1  one decode token of llama-160m's attention shape (12
//                               heads, head_dim 64) over a context of n cached tokens
//   AttentionGqa/<isa>/<kv>/ctx:n/rows:r  tinyllama's grouped shape (32 query heads over 4 KV
//                               heads, head_dim 64): r new tokens of one sequence (1: decode,
//                               5: scoring k = 4 drafts) over a context of n
// Threads: the kernel pool's default (all hardware threads); SPECD_CPU_ISA limits the levels.
//
//   bench_kernels [--benchmark_filter=GEMV/avx512/q4_0]
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "specd/kernels/aligned_buffer.hpp"
#include "specd/kernels/attention.hpp"
#include "specd/kernels/bandwidth.hpp"
#include "specd/kernels/convert.hpp"
#include "specd/kernels/cpu_isa.hpp"
#include "specd/kernels/matmul.hpp"

namespace {

using namespace specd::kernels;

constexpr int64_t kRows = 3072, kCols = 768;  // one llama-160m MLP matrix
constexpr int kMatrices = 56;                 // 56 x 9 MiB (F32) = 504 MiB

struct WeightSet {
  std::vector<AlignedBuffer> buffers;
  std::vector<WeightView> views;
  size_t bytes = 0;
};

const WeightSet& weights(DType dt) {
  static WeightSet sets[kNumDTypes];
  WeightSet& s = sets[static_cast<int>(dt)];
  if (s.views.empty()) {
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    std::vector<float> f(static_cast<size_t>(kRows * kCols));
    for (float& x : f) x = dist(rng);
    for (int i = 0; i < kMatrices; ++i) {
      s.buffers.push_back(allocate_aligned(row_bytes(dt, kCols) * kRows));
      from_f32(Device::kCpu, f.data(), dt, s.buffers.back().get(), kRows * kCols);
      s.views.push_back({dt, s.buffers.back().get(), kRows, kCols});
      s.bytes += s.views.back().bytes();
    }
  }
  return s;
}

void BM_Gemv(benchmark::State& state, CpuIsa isa, DType dt) {
  set_cpu_isa(isa);
  const auto m = static_cast<int64_t>(state.range(0));
  const WeightSet& w = weights(dt);
  std::vector<float> a(static_cast<size_t>(m * kCols), 0.25f), c(static_cast<size_t>(m * kRows));
  for (auto _ : state) {
    for (const WeightView& v : w.views) matmul(Device::kCpu, a.data(), v, nullptr, c.data(), m);
    benchmark::DoNotOptimize(c.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(w.bytes));
  state.counters["rows"] = static_cast<double>(m);
}

void BM_GemvHot(benchmark::State& state, CpuIsa isa, DType dt) {
  set_cpu_isa(isa);
  constexpr int64_t kHotRows = 1024, kHotCols = 2048;
  const auto m = static_cast<int64_t>(state.range(0));
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> f(static_cast<size_t>(kHotRows * kHotCols));
  for (float& x : f) x = dist(rng);
  AlignedBuffer buf = allocate_aligned(row_bytes(dt, kHotCols) * kHotRows);
  from_f32(Device::kCpu, f.data(), dt, buf.get(), kHotRows * kHotCols);
  const WeightView v{dt, buf.get(), kHotRows, kHotCols};
  std::vector<float> a(static_cast<size_t>(m * kHotCols), 0.25f), c(static_cast<size_t>(m * kHotRows));
  for (auto _ : state) {
    matmul(Device::kCpu, a.data(), v, nullptr, c.data(), m);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["rows"] = static_cast<double>(m);
  state.counters["ns/row/Kweights"] = benchmark::Counter(
      static_cast<double>(m) * static_cast<double>(kHotRows * kHotCols) / 1024.0,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
}

void BM_ReadBandwidth(benchmark::State& state) {
  double gbs = 0;
  for (auto _ : state) gbs = measure_read_bandwidth(size_t{512} << 20, 3).median_gbs;
  state.counters["GB/s"] = gbs;
}

void BM_Attention(benchmark::State& state, CpuIsa isa, DType kv, int32_t heads, int32_t kv_heads) {
  set_cpu_isa(isa);
  const int32_t ctx = static_cast<int32_t>(state.range(0)), rows = static_cast<int32_t>(state.range(1));
  const int32_t hd = 64, block = 16;
  const int32_t blocks = (ctx + block - 1) / block;
  const size_t elem = kv == DType::kF32 ? 4 : 2;
  std::vector<uint8_t> k(static_cast<size_t>(blocks) * block * kv_heads * hd * elem, 0x3c);
  std::vector<uint8_t> v(k.size(), 0x3c);
  std::vector<float> q(static_cast<size_t>(rows * heads * hd), 0.1f), out(q.size());
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int32_t b = 0; b < blocks; ++b) table[static_cast<size_t>(b)] = b;
  const int32_t query_start[2] = {0, rows};
  PagedAttentionParams p;
  p.q = q.data();
  p.k_cache = k.data();
  p.v_cache = v.data();
  p.kv_dtype = kv;
  p.out = out.data();
  p.num_seqs = 1;
  p.query_start = query_start;
  p.context_lens = &ctx;
  p.block_tables = table.data();
  p.block_table_stride = blocks;
  p.num_blocks = blocks;
  p.block_size = block;
  p.num_heads = heads;
  p.num_kv_heads = kv_heads;
  p.head_dim = hd;
  p.scale = 0.125f;
  for (auto _ : state) paged_attention(Device::kCpu, p);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(2 * k.size()));
}

[[maybe_unused]] const bool registered = [] {
  for (CpuIsa isa : supported_cpu_isas()) {
    const std::string level(cpu_isa_name(isa));
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K,
                     DType::kQ6_K, DType::kQ3_K, DType::kQ2_K}) {
      benchmark::RegisterBenchmark(("GEMV/" + level + "/" + std::string(dtype_name(dt))).c_str(), BM_Gemv, isa, dt)
          ->ArgName("rows")
          ->Arg(1)
          ->Arg(5)
          ->Arg(8)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
      benchmark::RegisterBenchmark(("GEMV_HOT/" + level + "/" + std::string(dtype_name(dt))).c_str(), BM_GemvHot, isa,
                                   dt)
          ->ArgName("rows")
          ->Arg(1)
          ->Arg(5)
          ->Arg(8)
          ->Arg(64)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
    for (DType kv : {DType::kF32, DType::kF16}) {
      const std::string suffix = level + "/" + std::string(dtype_name(kv));
      benchmark::RegisterBenchmark(("Attention/" + suffix).c_str(), BM_Attention, isa, kv, 12, 12)
          ->ArgNames({"ctx", "rows"})
          ->Args({256, 1})
          ->Args({2048, 1})
          ->Args({2048, 5})
          ->UseRealTime();
      benchmark::RegisterBenchmark(("AttentionGqa/" + suffix).c_str(), BM_Attention, isa, kv, 32, 4)
          ->ArgNames({"ctx", "rows"})
          ->Args({2048, 1})
          ->Args({2048, 5})
          ->UseRealTime();
    }
  }
  benchmark::RegisterBenchmark("ReadBandwidth", BM_ReadBandwidth)->Iterations(3)->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace

BENCHMARK_MAIN();

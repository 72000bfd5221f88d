#include "specd/kernels/bandwidth.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "isa_kernels.hpp"
#include "specd/kernels/aligned_buffer.hpp"
#include "specd/kernels/device_memory.hpp"
#include "specd/kernels/parallel.hpp"

namespace specd::kernels {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kChunkFloats = int64_t{1} << 18;  // 1 MiB per range handed to a thread

// Times `passes` runs of `pass` one by one (GB/s each) after a warm-up, then back to back;
// `moved`: the bytes one pass moves, `bytes`: the buffer's size.
template <class Pass>
ReadBandwidth time_passes(Pass&& pass, int passes, double moved, size_t bytes) {
  pass();  // warm-up: page tables, worker wake-up
  std::vector<double> gbs;
  for (int i = 0; i < passes; ++i) {
    const auto t0 = Clock::now();
    pass();
    gbs.push_back(moved / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
  }
  const auto t0 = Clock::now();
  for (int i = 0; i < passes; ++i) pass();
  const double long_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::sort(gbs.begin(), gbs.end());
  ReadBandwidth r;
  r.median_gbs = gbs[gbs.size() / 2];
  r.min_gbs = gbs.front();
  r.max_gbs = gbs.back();
  r.long_read_gbs = moved * passes / long_s / 1e9;
  r.passes = passes;
  r.bytes = bytes;
  return r;
}

}  // namespace

ReadBandwidth measure_read_bandwidth(size_t bytes, int passes) {
  passes = std::max(1, passes);
  const int64_t n =
      static_cast<int64_t>(std::max<size_t>(bytes, 64 << 20) / sizeof(float)) / kChunkFloats * kChunkFloats;
  AlignedBuffer buf = allocate_aligned(static_cast<size_t>(n) * sizeof(float));
  auto* p = reinterpret_cast<float*>(buf.get());
  const int64_t chunks = n / kChunkFloats;
  parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
    std::memset(p + b * kChunkFloats, 0, static_cast<size_t>((e - b) * kChunkFloats) * sizeof(float));
  });
  const cpu::IsaKernels& isa = cpu::active_kernels();
  volatile float sink = 0;
  auto pass = [&] {
    parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
      float s = 0;
      for (int64_t c = b; c < e; ++c) s += isa.read_sum(p + c * kChunkFloats, kChunkFloats);
      sink = sink + s;
    });
  };
  const size_t total = static_cast<size_t>(n) * sizeof(float);
  return time_passes(pass, passes, static_cast<double>(total), total);
}

ReadBandwidth measure_device_bandwidth(Device device, size_t bytes, int passes) {
  if (device == Device::kCpu) return measure_read_bandwidth(bytes, passes);
  passes = std::max(1, passes);
  const DeviceBuffer src(device, bytes), dst(device, bytes);
  auto copy = [&] {
    copy_on_device(device, dst.data(), src.data(), bytes);
    device_synchronize(device);
  };
  return time_passes(copy, passes, 2.0 * static_cast<double>(bytes), bytes);
}

}  // namespace specd::kernels

// The kernel thread pool: coverage of ranges, exceptions, nesting, and idle workers that
// sleep instead of spinning.
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "specd/kernels/bandwidth.hpp"
#include "specd/kernels/parallel.hpp"

namespace specd::kernels {
namespace {

TEST(ThreadPool, CoversEveryIndexOnceWithRangesOfAtLeastTheGrain) {
  set_num_threads(2);
  for (int64_t n : {1, 7, 100, 10007}) {
    for (int64_t grain : {1, 3, 64}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int64_t> short_ranges{0};
      parallel_for(n, grain, [&](int64_t b, int64_t e) {
        if (e - b < grain && e != n) ++short_ranges;
        for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n=" << n << " i=" << i;
      EXPECT_EQ(short_ranges.load(), 0);
    }
  }
}

TEST(ThreadPool, RethrowsTheBodysExceptionOnTheCaller) {
  set_num_threads(2);
  EXPECT_THROW(parallel_for(1000, 1,
                            [](int64_t b, int64_t) {
                              if (b >= 500) throw std::runtime_error("boom");
                            }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int64_t> sum{0};
  parallel_for(100, 1, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 100);
}

TEST(ThreadPool, NestedCallsRunInline) {
  set_num_threads(2);
  std::atomic<int64_t> inner{0};
  parallel_for(8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) parallel_for(10, 1, [&](int64_t ib, int64_t ie) { inner += ie - ib; });
  });
  EXPECT_EQ(inner.load(), 80);
}

// CPU seconds used by the pool's worker threads (named "specd-kernels"), from /proc.
double worker_cpu_seconds() {
  double total = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name != "specd-kernels") continue;
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    std::string f;
    long ticks = 0;
    for (int i = 3; i <= 15 && fields >> f; ++i)
      if (i == 14 || i == 15) ticks += std::stol(f);  // utime, stime
    total += static_cast<double>(ticks) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return total;
}

// An engine waiting for requests must not keep a core busy: after a job the workers spin
// for well under a millisecond, then sleep.
TEST(ThreadPool, IdleWorkersSleep) {
  set_num_threads(2);
  ASSERT_GT(worker_cpu_seconds() + 1.0, 0.0);
  {
    // The test must be able to see the workers: busy them and check their CPU time grows.
    const double t0 = worker_cpu_seconds();
    for (int i = 0; i < 100; ++i) {
      // Two chunks that wait for each other (bounded): the worker has to run one of them.
      std::atomic<int> started{0};
      parallel_for(2, 1, [&](int64_t, int64_t) {
        ++started;
        const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
        while (std::chrono::steady_clock::now() < end) {
        }
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) {
        }
      });
    }
    EXPECT_GT(worker_cpu_seconds() - t0, 0.02) << "the workers' CPU time is not visible";
  }
  parallel_for(1000, 1, [](int64_t, int64_t) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the spin period
  const double before = worker_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double used = worker_cpu_seconds() - before;
  EXPECT_LT(used, 0.05) << "workers used " << used << " s of CPU in 0.3 s of idle time";
}

TEST(Bandwidth, ReportsAConsistentMeasurement) {
  const ReadBandwidth r = measure_read_bandwidth(size_t{64} << 20, 3);
  EXPECT_GT(r.median_gbs, 0.0);
  EXPECT_LE(r.min_gbs, r.median_gbs);
  EXPECT_LE(r.median_gbs, r.max_gbs);
  EXPECT_GT(r.long_read_gbs, 0.0);
  EXPECT_EQ(r.passes, 3);
  EXPECT_GE(r.bytes, size_t{64} << 20);
}

// On a CUDA device (skipped where none is): device-to-device copies, counted read + write.
TEST(Bandwidth, OfACudaDeviceByCopies) {
  if (!device_available(Device::kCuda)) GTEST_SKIP() << "CUDA: " << device_description(Device::kCuda);
  const ReadBandwidth r = measure_device_bandwidth(Device::kCuda, size_t{256} << 20, 3);
  EXPECT_GT(r.median_gbs, 100.0);  // any data-centre GPU copies faster than a CPU reads
  EXPECT_LE(r.min_gbs, r.median_gbs);
  EXPECT_LE(r.median_gbs, r.max_gbs);
  EXPECT_EQ(r.passes, 3);
  EXPECT_EQ(r.bytes, size_t{256} << 20);
}

}  // namespace
}  // namespace specd::kernels

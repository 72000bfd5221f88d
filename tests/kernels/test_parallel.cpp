// The kernel thread pool: coverage of ranges, exceptions, nesting, and idle workers that
// sleep instead of spinning.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
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
  EXPECT_THROW(parallel_for(1000, 1, [](int64_t b, int64_t) {
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

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// An engine waiting for requests must not keep a core busy: after a job the workers spin
// for well under a millisecond, then sleep.
TEST(ThreadPool, IdleWorkersSleep) {
  set_num_threads(2);
  parallel_for(1000, 1, [](int64_t, int64_t) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the spin period
  const double before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double used = process_cpu_seconds() - before;
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

}  // namespace
}  // namespace specd::kernels

// The memory-bandwidth yardstick: decode reads every weight once per step, so
// weight bytes / read bandwidth is the floor of a decode step's time.
#pragma once

#include <cstddef>

#include "specd/kernels/device.hpp"

namespace specd::kernels {

struct ReadBandwidth {
  double median_gbs = 0;  // median over the timed passes (GB/s = 1e9 bytes/s)
  double min_gbs = 0;
  double max_gbs = 0;
  double long_read_gbs = 0;  // one timed loop over all passes back to back: a cross-check
  int passes = 0;
  size_t bytes = 0;  // buffer size
};

// Reads a buffer of `bytes` (far larger than the last-level cache; huge pages where the
// kernel allows them, as for the weights) with every kernel thread, `passes` times, with the
// active ISA level's widest loads and no writes. Takes well under a second for 1 GiB.
ReadBandwidth measure_read_bandwidth(size_t bytes = size_t{1} << 30, int passes = 9);

// A device's memory bandwidth from device-to-device copies of `bytes` (each pass reads and
// writes them, counted as 2 x bytes moved), timed to the device's completion; for the CPU,
// measure_read_bandwidth. Throws kUnsupported where the device is absent.
ReadBandwidth measure_device_bandwidth(Device device, size_t bytes = size_t{1} << 30, int passes = 9);

}  // namespace specd::kernels

// A recorded sequence of device work, replayed with one launch (CUDA graphs). The model runtime
// records a forward's kernels once per shape and replays them each step (docs/cuda.md "CUDA
// graphs"): one launch instead of a few hundred, the same kernels on the same buffers, so the
// same bits.
#pragma once

#include <functional>

#include "specd/kernels/device.hpp"

namespace specd::kernels {

class DeviceGraph {
 public:
  DeviceGraph() = default;
  ~DeviceGraph();
  DeviceGraph(DeviceGraph&& o) noexcept;
  DeviceGraph& operator=(DeviceGraph&& o) noexcept;
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;

  // Records what `work` queues on `device` from this thread; nothing runs. Every op of `work`
  // must be one a recording can hold: kernels and copies between device buffers, no copy to or
  // from the host, no allocation, no wait (an op that reads a result back, such as the checked
  // embedding, cannot be recorded). Throws specd::Error: kUnsupported for a device without
  // graphs (the CPU), kInternal naming the CUDA error where the recording failed; the device is
  // then as before and `work` may be run directly.
  static DeviceGraph record(Device device, const std::function<void()>& work);

  // Queues the recorded work in order with the device's other work.
  void replay() const;
  bool empty() const noexcept { return exec_ == nullptr; }

 private:
  void* exec_ = nullptr;  // cudaGraphExec_t
};

}  // namespace specd::kernels

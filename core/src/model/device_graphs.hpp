// The recorded forwards of one model on a CUDA device (Placement::graphs, model.cuda_graphs;
// docs/cuda.md "CUDA graphs"). A forward's kernels hold its shape (tokens, sequences, the block
// table's stride, the rows asked for) and the addresses of the buffers they read and write; the
// key lists every such value, so a replay is exactly the forward it stands for. A key seen once
// runs directly; seen again, it is recorded and replayed from then on (decode and scoring steps
// repeat their shapes, prefill chunks rarely do). A key whose recording fails (an op that cannot
// be recorded) runs directly from then on.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "specd/kernels/device_graph.hpp"

namespace specd::model {

class ForwardGraphs {
 public:
  using Key = std::vector<int64_t>;
  struct Stats {
    int64_t direct = 0;    // forwards run without a graph
    int64_t recorded = 0;  // graphs recorded
    int64_t replayed = 0;  // forwards run by replaying a graph
    int64_t failed = 0;    // recordings that failed (those keys run directly)
  };

  // Runs `work` for `key`: replays its graph, or records one and replays it, or runs it.
  void run(kernels::Device device, const Key& key, const std::function<void()>& work);
  const Stats& stats() const noexcept { return stats_; }

 private:
  static constexpr size_t kMaxEntries = 64;  // the least recently used goes first
  struct Entry {
    Key key;
    int32_t seen = 0;
    bool failed = false;
    uint64_t last_use = 0;
    kernels::DeviceGraph graph;
  };
  Entry& find(const Key& key);
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
  Stats stats_;
};

}  // namespace specd::model

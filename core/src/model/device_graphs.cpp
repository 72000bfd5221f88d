#include "model/device_graphs.hpp"

#include <algorithm>

#include "specd/error.hpp"

namespace specd::model {

ForwardGraphs::Entry& ForwardGraphs::find(const Key& key) {
  ++clock_;
  for (Entry& e : entries_) {
    if (e.key == key) {
      e.last_use = clock_;
      return e;
    }
  }
  if (entries_.size() >= kMaxEntries) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; });
    entries_.erase(oldest);
  }
  Entry& e = entries_.emplace_back();
  e.key = key;
  e.last_use = clock_;
  return e;
}

void ForwardGraphs::run(kernels::Device device, const Key& key, const std::function<void()>& work) {
  Entry& e = find(key);
  if (e.graph.empty() && !e.failed && ++e.seen >= 2) {
    try {
      e.graph = kernels::DeviceGraph::record(device, work);
      ++stats_.recorded;
    } catch (const Error&) {
      e.failed = true;
      ++stats_.failed;
    }
  }
  if (e.graph.empty()) {
    ++stats_.direct;
    work();
    return;
  }
  e.graph.replay();
  ++stats_.replayed;
}

}  // namespace specd::model

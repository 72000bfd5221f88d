// Observations a proposer records through the host's record service (ABI 1.4,
// specd_host_services.record): per series name, a count and a sum, which /metrics publishes
// (specd_spec_proposer_observations_total / _observation_sum). Bounded: at most kMaxSeries names
// of 1 to kMaxNameLength characters of [a-z0-9_], values finite and >= 0 (the sums are
// Prometheus counters); anything else is dropped with one warning per reason. Thread-safe: a
// plugin may record from any of its calls.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace specd::log {
class Logger;
}

namespace specd::plugin {

struct ObservedSeries {
  std::string name;
  uint64_t count = 0;
  double sum = 0;
};

class Observations {
 public:
  static constexpr size_t kMaxSeries = 16;
  static constexpr size_t kMaxNameLength = 32;

  void record(const char* name, double value, log::Logger& log);
  std::vector<ObservedSeries> snapshot() const;

 private:
  mutable std::mutex mu_;
  std::vector<ObservedSeries> series_;
  bool warned_name_ = false, warned_full_ = false, warned_value_ = false;
};

// Whether `name` may name a series: 1 to kMaxNameLength characters of [a-z0-9_].
bool valid_series_name(std::string_view name);

}  // namespace specd::plugin

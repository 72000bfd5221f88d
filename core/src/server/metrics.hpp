// A small Prometheus metrics registry (text exposition format 0.0.4): counters, gauges and
// histograms grouped in labelled families. Everything is thread-safe; updates are lock-free for
// counters and gauges and take a short per-histogram lock.
//
//   MetricsRegistry reg;
//   auto& drafts = reg.counter("specd_spec_draft_tokens_total", "Draft tokens proposed.",
//                              {"proposer", "verifier"});
//   drafts.with({"ngram", "rejection"}).inc(4);
//   std::string text = reg.render();
//
// A family's and a series' address stays valid for the registry's life, so hot paths resolve
// `with(...)` once and keep the reference. Registering a name twice returns the existing family
// when kind and label names agree and throws specd::Error otherwise.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace specd::server {

class Counter {
 public:
  void inc(double v = 1.0) { value_.fetch_add(v, std::memory_order_relaxed); }
  // Mirrors a monotonic total kept elsewhere (read in a collect hook); never goes down.
  void set_total(double v) {
    double cur = value_.load(std::memory_order_relaxed);
    while (v > cur && !value_.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
    }
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // sorted, finite; +Inf is implicit
  void observe(double v);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0.0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), last = +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

enum class MetricKind { kCounter, kGauge, kHistogram };

// All series of one metric name, keyed by label values (in the order of label_names).
template <class Metric>
class Family {
 public:
  Family(std::vector<std::string> label_names, std::function<std::unique_ptr<Metric>()> make)
      : label_names_(std::move(label_names)), make_(std::move(make)) {}

  // Throws specd::Error when the number of values differs from the number of label names.
  Metric& with(const std::vector<std::string>& label_values);
  const std::vector<std::string>& label_names() const { return label_names_; }

  template <class F>
  void for_each(F&& f) const {
    std::lock_guard lock(mu_);
    for (const auto& [values, metric] : series_) f(values, *metric);
  }

 private:
  std::vector<std::string> label_names_;
  std::function<std::unique_ptr<Metric>()> make_;
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Metric>> series_;
};

class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  Family<Counter>& counter(const std::string& name, const std::string& help,
                           const std::vector<std::string>& label_names = {});
  Family<Gauge>& gauge(const std::string& name, const std::string& help,
                       const std::vector<std::string>& label_names = {});
  Family<Histogram>& histogram(const std::string& name, const std::string& help,
                               const std::vector<double>& upper_bounds,
                               const std::vector<std::string>& label_names = {});

  // Runs before every render(), e.g. to copy queue depths into gauges.
  void add_collect_hook(std::function<void()> hook);

  // The whole registry in the Prometheus text format, families in registration order.
  std::string render() const;

 private:
  struct Entry;
  Entry& find_or_add(const std::string& name, const std::string& help, MetricKind kind,
                     const std::vector<std::string>& label_names);

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<std::function<void()>> hooks_;
};

// Bucket bounds used by the server's latency histograms, in seconds.
std::vector<double> latency_buckets_seconds();
std::vector<double> token_latency_buckets_seconds();

}  // namespace specd::server

#include "server/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <variant>

#include "specd/error.hpp"

namespace specd::server {

// ---- Histogram ------------------------------------------------------------------------------

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  SPECD_CHECK(std::is_sorted(bounds_.begin(), bounds_.end()) &&
                  std::all_of(bounds_.begin(), bounds_.end(), [](double b) { return std::isfinite(b); }),
              ErrorCode::kInvalidArgument, "histogram bounds must be sorted and finite");
  counts_.assign(bounds_.size() + 1, 0);
}

void Histogram::observe(double v) {
  const size_t bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  std::lock_guard lock(mu_);
  ++counts_[bucket];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  std::lock_guard lock(mu_);
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

// ---- Family ---------------------------------------------------------------------------------

template <class Metric>
Metric& Family<Metric>::with(const std::vector<std::string>& label_values) {
  SPECD_CHECK(label_values.size() == label_names_.size(), ErrorCode::kInvalidArgument,
              "metric labels: expected " + std::to_string(label_names_.size()) + " values, got " +
                  std::to_string(label_values.size()));
  std::lock_guard lock(mu_);
  auto it = series_.find(label_values);
  if (it == series_.end()) it = series_.emplace(label_values, make_()).first;
  return *it->second;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

// ---- Registry -------------------------------------------------------------------------------

struct MetricsRegistry::Entry {
  std::string name;
  std::string help;
  MetricKind kind;
  std::vector<double> bounds;
  std::variant<std::unique_ptr<Family<Counter>>, std::unique_ptr<Family<Gauge>>, std::unique_ptr<Family<Histogram>>>
      family;
};

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

MetricsRegistry::Entry& MetricsRegistry::find_or_add(const std::string& name, const std::string& help, MetricKind kind,
                                                     const std::vector<std::string>& label_names) {
  static const std::regex kName("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static const std::regex kLabel("[a-zA-Z_][a-zA-Z0-9_]*");
  SPECD_CHECK(std::regex_match(name, kName), ErrorCode::kInvalidArgument, "invalid metric name '" + name + "'");
  for (const std::string& l : label_names) {
    SPECD_CHECK(std::regex_match(l, kLabel) && l != "le", ErrorCode::kInvalidArgument,
                "invalid label name '" + l + "' for metric " + name);
  }
  for (auto& e : entries_) {
    if (e->name != name) continue;
    bool same = e->kind == kind;
    std::visit([&](auto& f) { same = same && f->label_names() == label_names; }, e->family);
    SPECD_CHECK(same, ErrorCode::kInvalidArgument,
                "metric " + name + " is already registered with another type or labels");
    return *e;
  }
  auto e = std::make_unique<Entry>();
  e->name = name;
  e->help = help;
  e->kind = kind;
  entries_.push_back(std::move(e));
  return *entries_.back();
}

Family<Counter>& MetricsRegistry::counter(const std::string& name, const std::string& help,
                                          const std::vector<std::string>& label_names) {
  std::lock_guard lock(mu_);
  Entry& e = find_or_add(name, help, MetricKind::kCounter, label_names);
  if (!std::get_if<std::unique_ptr<Family<Counter>>>(&e.family) ||
      !std::get<std::unique_ptr<Family<Counter>>>(e.family)) {
    e.family = std::make_unique<Family<Counter>>(label_names, [] { return std::make_unique<Counter>(); });
  }
  return *std::get<std::unique_ptr<Family<Counter>>>(e.family);
}

Family<Gauge>& MetricsRegistry::gauge(const std::string& name, const std::string& help,
                                      const std::vector<std::string>& label_names) {
  std::lock_guard lock(mu_);
  Entry& e = find_or_add(name, help, MetricKind::kGauge, label_names);
  if (!std::get_if<std::unique_ptr<Family<Gauge>>>(&e.family) || !std::get<std::unique_ptr<Family<Gauge>>>(e.family)) {
    e.family = std::make_unique<Family<Gauge>>(label_names, [] { return std::make_unique<Gauge>(); });
  }
  return *std::get<std::unique_ptr<Family<Gauge>>>(e.family);
}

Family<Histogram>& MetricsRegistry::histogram(const std::string& name, const std::string& help,
                                              const std::vector<double>& upper_bounds,
                                              const std::vector<std::string>& label_names) {
  std::lock_guard lock(mu_);
  Entry& e = find_or_add(name, help, MetricKind::kHistogram, label_names);
  if (!std::get_if<std::unique_ptr<Family<Histogram>>>(&e.family) ||
      !std::get<std::unique_ptr<Family<Histogram>>>(e.family)) {
    e.bounds = upper_bounds;
    Histogram probe(upper_bounds);  // validates the bounds now, not at first use
    e.family = std::make_unique<Family<Histogram>>(
        label_names, [upper_bounds] { return std::make_unique<Histogram>(upper_bounds); });
  }
  return *std::get<std::unique_ptr<Family<Histogram>>>(e.family);
}

void MetricsRegistry::add_collect_hook(std::function<void()> hook) {
  std::lock_guard lock(mu_);
  hooks_.push_back(std::move(hook));
}

namespace {

std::string escape(const std::string& s, bool quote) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

std::string labels(const std::vector<std::string>& names, const std::vector<std::string>& values,
                   const std::string& extra_name = "", const std::string& extra_value = "") {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += out.empty() ? "{" : ",";
    out += names[i] + "=\"" + escape(values[i], true) + "\"";
  }
  if (!extra_name.empty()) {
    out += out.empty() ? "{" : ",";
    out += extra_name + "=\"" + escape(extra_value, true) + "\"";
  }
  if (!out.empty()) out += "}";
  return out;
}

}  // namespace

std::string MetricsRegistry::render() const {
  std::vector<std::function<void()>> hooks;
  {
    std::lock_guard lock(mu_);
    hooks = hooks_;
  }
  for (auto& h : hooks) h();

  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& e : entries_) {
    const char* type = e->kind == MetricKind::kCounter ? "counter"
                       : e->kind == MetricKind::kGauge ? "gauge"
                                                       : "histogram";
    out += "# HELP " + e->name + " " + escape(e->help, false) + "\n";
    out += "# TYPE " + e->name + " " + type + "\n";
    std::visit(
        [&](const auto& family) {
          using F = std::decay_t<decltype(*family)>;
          if (!family) return;
          family->for_each([&](const std::vector<std::string>& values, const auto& metric) {
            if constexpr (std::is_same_v<F, Family<Histogram>>) {
              const Histogram::Snapshot s = metric.snapshot();
              for (size_t i = 0; i < s.cumulative.size(); ++i) {
                const std::string le = i < s.upper_bounds.size() ? number(s.upper_bounds[i]) : "+Inf";
                out += e->name + "_bucket" + labels(family->label_names(), values, "le", le) + " " +
                       std::to_string(s.cumulative[i]) + "\n";
              }
              out += e->name + "_sum" + labels(family->label_names(), values) + " " + number(s.sum) + "\n";
              out += e->name + "_count" + labels(family->label_names(), values) + " " + std::to_string(s.count) + "\n";
            } else {
              out += e->name + labels(family->label_names(), values) + " " + number(metric.value()) + "\n";
            }
          });
        },
        e->family);
  }
  return out;
}

std::vector<double> latency_buckets_seconds() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

std::vector<double> token_latency_buckets_seconds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
}

}  // namespace specd::server

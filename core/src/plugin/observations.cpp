#include "plugin/observations.hpp"

#include <cmath>
#include <cstring>

#include "specd/log.hpp"

namespace specd::plugin {

bool valid_series_name(std::string_view name) {
  if (name.empty() || name.size() > Observations::kMaxNameLength) return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

void Observations::record(const char* name, double value, log::Logger& log) {
  // Bounded read of the plugin's string: a name longer than the limit is refused unread.
  const std::string_view text =
      name == nullptr ? std::string_view() : std::string_view(name, strnlen(name, kMaxNameLength + 1));
  std::lock_guard<std::mutex> lock(mu_);
  if (!valid_series_name(text)) {
    if (!warned_name_) log.warn("record: series name must be 1 to {} characters of [a-z0-9_]; dropped", kMaxNameLength);
    warned_name_ = true;
    return;
  }
  if (!std::isfinite(value) || value < 0) {
    if (!warned_value_) log.warn("record: series '{}' got {}, not a finite value >= 0; dropped", text, value);
    warned_value_ = true;
    return;
  }
  for (ObservedSeries& s : series_)
    if (s.name == text) {
      ++s.count;
      s.sum += value;
      return;
    }
  if (series_.size() >= kMaxSeries) {
    if (!warned_full_) log.warn("record: more than {} series; '{}' dropped", kMaxSeries, text);
    warned_full_ = true;
    return;
  }
  series_.push_back({std::string(text), 1, value});
}

std::vector<ObservedSeries> Observations::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return series_;
}

}  // namespace specd::plugin

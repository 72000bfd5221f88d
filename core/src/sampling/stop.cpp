#include "sampling/stop.hpp"

#include <algorithm>
#include <utility>

namespace specd::sampling {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops, bool include_stop)
    : stops_(std::move(stops)), include_stop_(include_stop) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

StopStringMatcher::Result StopStringMatcher::push(std::string_view delta) {
  Result r;
  if (stopped_) return r;
  pending_.append(delta);
  if (stops_.empty()) {
    r.text = std::move(pending_);
    pending_.clear();
    return r;
  }
  // Earliest complete stop string wins.
  size_t hit = std::string::npos, hit_len = 0;
  for (const std::string& s : stops_) {
    const size_t at = pending_.find(s);
    if (at < hit) hit = at, hit_len = s.size();
  }
  if (hit != std::string::npos) {
    r.text = pending_.substr(0, hit + (include_stop_ ? hit_len : 0));
    r.stopped = true;
    stopped_ = true;
    pending_.clear();
    return r;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  r.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return r;
}

std::string StopStringMatcher::flush() {
  if (stopped_) return "";
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace specd::sampling

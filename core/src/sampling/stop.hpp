// Stop strings over streamed text. Text is held back while its tail could still become a stop
// string, so streamed deltas never contain any part of one; when a stop string completes, the
// text before it is released and the rest dropped (vLLM semantics: stop string excluded).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace specd::sampling {

class StopStringMatcher {
 public:
  // include_stop: the stop string that ends the text is part of it (include_stop_str_in_output).
  explicit StopStringMatcher(std::vector<std::string> stops = {}, bool include_stop = false);

  struct Result {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string completed; `text` ends right before it (or after it)
  };
  // Feeds newly decoded text. After a stop, further pushes return nothing.
  Result push(std::string_view delta);
  // End of stream: the held-back tail (it turned out not to be a stop string).
  std::string flush();

 private:
  std::vector<std::string> stops_;
  bool include_stop_ = false;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace specd::sampling

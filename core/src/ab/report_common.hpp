// Formatting shared by the text and HTML forms of the A/B report.
#pragma once

#include <string>
#include <vector>

#include "ab/report.hpp"

namespace specd::ab {

// "0.612 [0.589, 0.634]" with `spec` (a fmt spec such as "{:.3f}") applied to value·scale and the
// interval; "-" when undefined.
std::string format_estimate(const Estimate& e, const char* spec, double scale = 1.0);
// "significant at 95%" | "not significant at 95%".
std::string verdict(const Difference& d);
// "" when every asked resample ran, else what the report did instead (report_render.cpp).
std::string resampling_note(const Report& r);

// The quality comparison of a lossy arm with a lossless one, from the shadow data of the pair.
struct QualityLine {
  std::string lossy, lossless;
  const ShadowStats* shadow;  // the pair's shadow stats (either direction)
  // Mean target log p of the tokens each emits: the serving arm's own, the shadow's on its steps.
  Estimate lossy_logprob, lossless_logprob;
};
std::vector<QualityLine> quality_lines(const Report& r);

}  // namespace specd::ab

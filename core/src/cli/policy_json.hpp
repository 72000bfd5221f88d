// The dynamic speculation policy's metrics (spec::PolicyMetrics) as JSON, for `specd bench
// --json` and `specd generate --json`.
#pragma once

#include <nlohmann/json.hpp>

#include "specd/spec_metrics.hpp"

namespace specd::cli {

// {"steps", "chosen_k": [rows per k], "probes", "trimmed", "drafts", "predicted_accepted", "accepted",
//  "predicted_step_s", "observed_step_s", "step_abs_error_s", "calibration_s"}
nlohmann::json policy_json(const spec::PolicyMetrics& m);

}  // namespace specd::cli

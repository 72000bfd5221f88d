#include "cli/policy_json.hpp"

namespace specd::cli {

nlohmann::json policy_json(const spec::PolicyMetrics& m) {
  return {{"steps", m.steps},
          {"chosen_k", m.chosen_k},
          {"probes", m.probes},
          {"trimmed", m.trimmed},
          {"drafts", m.drafts},
          {"predicted_accepted", m.predicted_accepted},
          {"accepted", m.accepted},
          {"predicted_step_s", m.predicted_seconds},
          {"observed_step_s", m.observed_seconds},
          {"step_abs_error_s", m.abs_error_seconds},
          {"predicted_propose_s", m.predicted_propose_seconds},
          {"observed_propose_s", m.observed_propose_seconds},
          {"calibration_s", m.calibration_seconds}};
}

}  // namespace specd::cli

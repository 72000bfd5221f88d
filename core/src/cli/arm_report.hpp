// Per-arm speculative metrics (A/B arms and shadow arms, docs/ab-testing.md) as printed by
// `specd bench`, `specd generate` and `specd ab run`.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "specd/engine.hpp"
#include "specd/spec_metrics.hpp"

namespace specd::cli {

// One object per arm: its serving metrics, and as a shadow its counterfactual metrics per
// serving arm, with the shadow's verify time per step and as a fraction of a speculative
// step's wall time (engine: the engine-wide metrics over the same period).
nlohmann::json arms_json(const EngineInfo& info, const std::vector<spec::ArmMetrics>& arms,
                         const spec::SpecMetrics& engine);
// The same as indented text lines (prefix before each line).
std::string arms_text(const EngineInfo& info, const std::vector<spec::ArmMetrics>& arms,
                      const spec::SpecMetrics& engine, const std::string& prefix);

}  // namespace specd::cli

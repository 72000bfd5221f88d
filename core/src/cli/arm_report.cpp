#include "cli/arm_report.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace specd::cli {
namespace {

using nlohmann::json;

json per_position(const spec::SpecMetrics& m) {
  json out = json::array();
  for (size_t i = 0; i < m.drafted_at.size(); ++i) out.push_back(m.acceptance_at(i));
  return out;
}

double ratio(double a, double b) {
  return b > 0 ? a / b : 0.0;
}

// Wall time of one speculative step, engine-wide (propose + score + verify).
double step_seconds(const spec::SpecMetrics& e) {
  return ratio(e.propose_seconds + e.score_seconds + e.verify_seconds, static_cast<double>(e.num_steps));
}

}  // namespace

json arms_json(const EngineInfo& info, const std::vector<spec::ArmMetrics>& arms, const spec::SpecMetrics& engine) {
  json out = json::array();
  const double step_s = step_seconds(engine);
  for (size_t i = 0; i < arms.size() && i < info.arms.size(); ++i) {
    const ArmInfo& a = info.arms[i];
    const spec::ArmMetrics& m = arms[i];
    json shadows = json::array();
    for (size_t s = 0; s < m.shadow.size() && s < info.arms.size(); ++s) {
      const spec::ShadowMetrics& sm = m.shadow[s];
      const spec::SpecMetrics& c = sm.counterfactual;
      if (c.num_steps == 0 && sm.failures == 0) continue;
      const double verify_per_step = ratio(c.verify_seconds, static_cast<double>(c.num_steps));
      shadows.push_back({{"serving_arm", info.arms[s].name},
                         {"steps", c.num_steps},
                         {"drafts", c.num_drafts},
                         {"draft_tokens", c.draft_tokens},
                         {"accepted_tokens", c.accepted_tokens},
                         {"acceptance_rate", c.acceptance_rate()},
                         {"mean_acceptance_length", c.mean_acceptance_length()},
                         {"acceptance_per_position", per_position(c)},
                         {"token_disagreement",
                          ratio(static_cast<double>(sm.differing_tokens), static_cast<double>(sm.compared_tokens))},
                         {"mean_logprob", ratio(sm.logprob_sum, static_cast<double>(sm.logprob_tokens))},
                         {"verify_ms_per_step", verify_per_step * 1e3},
                         {"cost_fraction_of_step", ratio(verify_per_step, step_s)},
                         {"failures", sm.failures}});
    }
    out.push_back(
        {{"arm", a.name},
         {"verifier", a.verifier},
         {"lossless", a.lossless},
         {"k", a.num_speculative_tokens},
         {"weight", a.weight},
         {"shadow", a.shadow},
         {"requests", m.num_requests},
         {"steps", m.serving.num_steps},
         {"drafts", m.serving.num_drafts},
         {"draft_tokens", m.serving.draft_tokens},
         {"accepted_tokens", m.serving.accepted_tokens},
         {"acceptance_rate", m.serving.acceptance_rate()},
         {"mean_acceptance_length", m.serving.mean_acceptance_length()},
         {"acceptance_per_position", per_position(m.serving)},
         {"mean_logprob", ratio(m.logprob_sum, static_cast<double>(m.logprob_tokens))},
         {"verify_ms_per_step", ratio(m.serving.verify_seconds, static_cast<double>(m.serving.num_steps)) * 1e3},
         {"shadows", std::move(shadows)}});
  }
  return out;
}

std::string arms_text(const EngineInfo& info, const std::vector<spec::ArmMetrics>& arms,
                      const spec::SpecMetrics& engine, const std::string& prefix) {
  std::string out;
  const double step_s = step_seconds(engine);
  auto positions = [](const spec::SpecMetrics& m) {
    std::string s;
    for (size_t i = 0; i < m.drafted_at.size(); ++i)
      s += fmt::format("{}{:.2f}", i == 0 ? "" : " ", m.acceptance_at(i));
    return s;
  };
  for (size_t i = 0; i < arms.size() && i < info.arms.size(); ++i) {
    const ArmInfo& a = info.arms[i];
    const spec::ArmMetrics& m = arms[i];
    out += fmt::format(
        "{}arm {} ({}{}, k={}): {} requests, acceptance {:.3f} ({}/{}), mean length {:.2f}, per position "
        "[{}], mean log p {:.3f}, verify {:.3f} ms/step\n",
        prefix, a.name, a.verifier, a.lossless ? "" : ", lossy", a.num_speculative_tokens, m.num_requests,
        m.serving.acceptance_rate(), m.serving.accepted_tokens, m.serving.draft_tokens,
        m.serving.mean_acceptance_length(), positions(m.serving),
        ratio(m.logprob_sum, static_cast<double>(m.logprob_tokens)),
        ratio(m.serving.verify_seconds, static_cast<double>(m.serving.num_steps)) * 1e3);
    for (size_t s = 0; s < m.shadow.size() && s < info.arms.size(); ++s) {
      const spec::ShadowMetrics& sm = m.shadow[s];
      const spec::SpecMetrics& c = sm.counterfactual;
      if (c.num_steps == 0 && sm.failures == 0) continue;
      const double per_step = ratio(c.verify_seconds, static_cast<double>(c.num_steps));
      out += fmt::format(
          "{}  as a shadow on {}'s steps: acceptance {:.3f}, mean length {:.2f}, per position [{}], "
          "token disagreement {:.3f}, verify {:.3f} ms/step = {:.2f}% of a speculative step ({:.2f} ms)"
          "{}\n",
          prefix, info.arms[s].name, c.acceptance_rate(), c.mean_acceptance_length(), positions(c),
          ratio(static_cast<double>(sm.differing_tokens), static_cast<double>(sm.compared_tokens)), per_step * 1e3,
          100.0 * ratio(per_step, step_s), step_s * 1e3,
          sm.failures > 0 ? fmt::format(", {} failed calls", sm.failures) : std::string());
    }
  }
  return out;
}

}  // namespace specd::cli

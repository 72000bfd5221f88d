#include "server/spec_exporter.hpp"

namespace specd::server {
namespace {

double d(uint64_t v) {
  return static_cast<double>(v);
}

}  // namespace

SpecExporter::SpecExporter(MetricsRegistry& r)
    : drafts_(r.counter("specd_spec_drafts_total", "Speculative steps of a sequence with at least one draft.",
                        {"proposer", "verifier"})),
      draft_tokens_(r.counter("specd_spec_draft_tokens_total", "Draft tokens proposed.", {"proposer", "verifier"})),
      accepted_tokens_(
          r.counter("specd_spec_accepted_tokens_total", "Draft tokens accepted.", {"proposer", "verifier"})),
      emitted_tokens_(r.counter("specd_spec_emitted_tokens_total", "Tokens emitted by speculative steps.",
                                {"proposer", "verifier"})),
      drafted_at_(r.counter("specd_spec_drafted_at_position_total", "Drafts that proposed a token at this position.",
                            {"proposer", "verifier", "position"})),
      accepted_at_(r.counter("specd_spec_accepted_at_position_total",
                             "Drafts whose token at this position was accepted.",
                             {"proposer", "verifier", "position"})),
      seconds_(r.counter("specd_spec_seconds_total", "Time in each phase of speculative steps.",
                         {"proposer", "verifier", "phase"})),
      acceptance_rate_(r.gauge("specd_spec_acceptance_rate", "Accepted / draft tokens.", {"proposer", "verifier"})),
      mean_length_(r.gauge("specd_spec_mean_acceptance_length",
                           "1 + accepted tokens / drafts (tokens per target forward).", {"proposer", "verifier"})),
      efficiency_(r.gauge("specd_spec_system_efficiency", "Emitted tokens / sum of (k + 1) over drafts.",
                          {"proposer", "verifier"})),
      observations_(r.counter("specd_spec_proposer_observations_total",
                              "Observations the proposer recorded in the series `name` (docs/plugin-abi.md).",
                              {"proposer", "verifier", "name"})),
      observation_sum_(r.counter("specd_spec_proposer_observation_sum",
                                 "The sum of the proposer's observations in the series `name`.",
                                 {"proposer", "verifier", "name"})),
      arm_requests_(r.counter("specd_spec_arm_requests_total", "Requests assigned to the A/B arm.", {"arm"})),
      arm_drafts_(r.counter("specd_spec_arm_drafts_total", "Drafts the A/B arm's verifier served.", {"arm"})),
      arm_draft_tokens_(r.counter("specd_spec_arm_draft_tokens_total", "Draft tokens the arm verified.", {"arm"})),
      arm_accepted_tokens_(
          r.counter("specd_spec_arm_accepted_tokens_total", "Draft tokens the arm accepted.", {"arm"})),
      arm_emitted_tokens_(
          r.counter("specd_spec_arm_emitted_tokens_total", "Tokens emitted by the arm's steps.", {"arm"})),
      arm_drafted_at_(r.counter("specd_spec_arm_drafted_at_position_total",
                                "The arm's drafts with a token at this position.", {"arm", "position"})),
      arm_accepted_at_(r.counter("specd_spec_arm_accepted_at_position_total",
                                 "The arm's drafts whose token at this position was accepted.", {"arm", "position"})),
      arm_verify_seconds_(
          r.counter("specd_spec_arm_verify_seconds_total", "Time in the arm's own verifier calls.", {"arm"})),
      shadow_drafts_(r.counter("specd_spec_shadow_drafts_total",
                               "Drafts of serving_arm's steps that shadow arm `arm` verified.",
                               {"arm", "serving_arm"})),
      shadow_draft_tokens_(r.counter("specd_spec_shadow_draft_tokens_total", "Draft tokens the shadow arm verified.",
                                     {"arm", "serving_arm"})),
      shadow_accepted_tokens_(r.counter("specd_spec_shadow_accepted_tokens_total",
                                        "Draft tokens the shadow arm would have accepted.", {"arm", "serving_arm"})),
      shadow_drafted_at_(r.counter("specd_spec_shadow_drafted_at_position_total",
                                   "Shadow-verified drafts with a token at this position.",
                                   {"arm", "serving_arm", "position"})),
      shadow_accepted_at_(r.counter("specd_spec_shadow_accepted_at_position_total",
                                    "Shadow-verified drafts whose token at this position it would have accepted.",
                                    {"arm", "serving_arm", "position"})),
      shadow_compared_tokens_(r.counter("specd_spec_shadow_compared_tokens_total",
                                        "Positions both the shadow and the serving arm emit.", {"arm", "serving_arm"})),
      shadow_differing_tokens_(r.counter("specd_spec_shadow_differing_tokens_total",
                                         "Compared positions where the shadow arm's token differs.",
                                         {"arm", "serving_arm"})),
      shadow_verify_seconds_(r.counter("specd_spec_shadow_verify_seconds_total",
                                       "Time in the shadow arm's verifier calls.", {"arm", "serving_arm"})),
      shadow_failures_(
          r.counter("specd_spec_shadow_failures_total", "Shadow verifier calls that failed.", {"arm", "serving_arm"})),
      policy_chosen_k_(r.counter("specd_spec_dynamic_chosen_k_total",
                                 "Rows the dynamic speculation policy gave k drafts (0 = plain decoding).",
                                 {"proposer", "verifier", "k"})),
      policy_steps_(r.counter("specd_spec_dynamic_steps_total", "Steps the dynamic speculation policy planned.",
                              {"proposer", "verifier"})),
      policy_trimmed_(r.counter("specd_spec_dynamic_trimmed_drafts_total",
                                "Drafts the dynamic speculation policy cut after the proposer's confidence.",
                                {"proposer", "verifier"})),
      policy_accepted_(
          r.counter("specd_spec_dynamic_accepted_tokens_total",
                    "Accepted drafts of rows the policy planned: predicted by its acceptance model, and observed.",
                    {"proposer", "verifier", "source"})),
      policy_seconds_(r.counter(
          "specd_spec_dynamic_step_seconds_total",
          "Time of steps the policy planned (propose through verify): predicted by its cost model, observed, and the "
          "sum of |predicted - observed|; predicted_propose and observed_propose: the propose call's part.",
          {"proposer", "verifier", "source"})) {}

void SpecExporter::set_engine(const EngineInfo& info) {
  proposer_ = info.proposer;
  verifier_ = info.verifier;
  arms_.clear();
  for (const ArmInfo& a : info.arms) arms_.push_back(a.name);
}

void SpecExporter::collect(const spec::SpecMetrics& m, const std::vector<spec::ArmMetrics>& arms) {
  if (proposer_.empty()) return;
  const std::vector<std::string> a = {proposer_, verifier_};
  drafts_.with(a).set_total(d(m.num_drafts));
  draft_tokens_.with(a).set_total(d(m.draft_tokens));
  accepted_tokens_.with(a).set_total(d(m.accepted_tokens));
  emitted_tokens_.with(a).set_total(d(m.emitted_tokens));
  for (size_t i = 0; i < m.drafted_at.size(); ++i) {
    const std::vector<std::string> at = {proposer_, verifier_, std::to_string(i)};
    drafted_at_.with(at).set_total(d(m.drafted_at[i]));
    accepted_at_.with(at).set_total(d(m.accepted_at[i]));
  }
  seconds_.with({proposer_, verifier_, "propose"}).set_total(m.propose_seconds);
  seconds_.with({proposer_, verifier_, "score"}).set_total(m.score_seconds);
  seconds_.with({proposer_, verifier_, "verify"}).set_total(m.verify_seconds);
  acceptance_rate_.with(a).set(m.acceptance_rate());
  mean_length_.with(a).set(m.mean_acceptance_length());
  efficiency_.with(a).set(m.system_efficiency());
  collect_policy(m.policy);
  for (const spec::ProposerSeries& s : m.proposer_series) {
    observations_.with({proposer_, verifier_, s.name}).set_total(d(s.count));
    observation_sum_.with({proposer_, verifier_, s.name}).set_total(s.sum);
  }
  for (size_t i = 0; i < arms.size() && i < arms_.size(); ++i) {
    collect_arm(i, arms[i]);
    for (size_t served = 0; served < arms[i].shadow.size() && served < arms_.size(); ++served)
      if (arms[i].shadow[served].counterfactual.num_steps > 0 || arms[i].shadow[served].failures > 0)
        collect_shadow(i, served, arms[i].shadow[served]);
  }
}

void SpecExporter::collect_arm(size_t a, const spec::ArmMetrics& m) {
  const std::vector<std::string> arm = {arms_[a]};
  arm_requests_.with(arm).set_total(d(m.num_requests));
  arm_drafts_.with(arm).set_total(d(m.serving.num_drafts));
  arm_draft_tokens_.with(arm).set_total(d(m.serving.draft_tokens));
  arm_accepted_tokens_.with(arm).set_total(d(m.serving.accepted_tokens));
  arm_emitted_tokens_.with(arm).set_total(d(m.serving.emitted_tokens));
  arm_verify_seconds_.with(arm).set_total(m.serving.verify_seconds);
  for (size_t i = 0; i < m.serving.drafted_at.size(); ++i) {
    const std::vector<std::string> at = {arms_[a], std::to_string(i)};
    arm_drafted_at_.with(at).set_total(d(m.serving.drafted_at[i]));
    arm_accepted_at_.with(at).set_total(d(m.serving.accepted_at[i]));
  }
}

void SpecExporter::collect_shadow(size_t s, size_t served, const spec::ShadowMetrics& m) {
  const std::vector<std::string> pair = {arms_[s], arms_[served]};
  const spec::SpecMetrics& c = m.counterfactual;
  shadow_drafts_.with(pair).set_total(d(c.num_drafts));
  shadow_draft_tokens_.with(pair).set_total(d(c.draft_tokens));
  shadow_accepted_tokens_.with(pair).set_total(d(c.accepted_tokens));
  shadow_compared_tokens_.with(pair).set_total(d(m.compared_tokens));
  shadow_differing_tokens_.with(pair).set_total(d(m.differing_tokens));
  shadow_verify_seconds_.with(pair).set_total(c.verify_seconds);
  shadow_failures_.with(pair).set_total(d(m.failures));
  for (size_t i = 0; i < c.drafted_at.size(); ++i) {
    const std::vector<std::string> at = {arms_[s], arms_[served], std::to_string(i)};
    shadow_drafted_at_.with(at).set_total(d(c.drafted_at[i]));
    shadow_accepted_at_.with(at).set_total(d(c.accepted_at[i]));
  }
}

void SpecExporter::collect_policy(const spec::PolicyMetrics& m) {
  for (size_t k = 0; k < m.chosen_k.size(); ++k)
    policy_chosen_k_.with({proposer_, verifier_, std::to_string(k)}).set_total(d(m.chosen_k[k]));
  policy_steps_.with({proposer_, verifier_}).set_total(d(m.steps));
  policy_trimmed_.with({proposer_, verifier_}).set_total(d(m.trimmed));
  const std::pair<const char*, double> accepted[] = {{"predicted", m.predicted_accepted}, {"observed", d(m.accepted)}};
  for (const auto& [source, v] : accepted) policy_accepted_.with({proposer_, verifier_, source}).set_total(v);
  const std::pair<const char*, double> seconds[] = {{"predicted", m.predicted_seconds},
                                                    {"observed", m.observed_seconds},
                                                    {"abs_error", m.abs_error_seconds},
                                                    {"predicted_propose", m.predicted_propose_seconds},
                                                    {"observed_propose", m.observed_propose_seconds}};
  for (const auto& [source, v] : seconds) policy_seconds_.with({proposer_, verifier_, source}).set_total(v);
}

}  // namespace specd::server

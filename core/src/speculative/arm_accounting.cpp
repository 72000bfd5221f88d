#include "speculative/arm_accounting.hpp"

#include "specd/log.hpp"
#include "speculative/arm_verifiers.hpp"

namespace specd::speculative {
namespace {

ArmAssigner make_assigner(const ArmVerifiers& arms, uint64_t seed) {
  std::vector<std::string> names;
  std::vector<double> weights;
  for (size_t i = 0; i < arms.size(); ++i) {
    names.push_back(arms.arm(i).name);
    weights.push_back(arms.arm(i).weight);
  }
  return ArmAssigner(std::move(names), weights, seed);
}

}  // namespace

ArmAccounting::ArmAccounting(const ArmVerifiers* arms, const config::EngineConfig& cfg)
    : arms_(arms), dynamic_default_(cfg.speculative.dynamic) {
  if (arms_ == nullptr) return;
  assigner_.emplace(make_assigner(*arms_, static_cast<uint64_t>(cfg.model.seed)));
  metrics_.resize(arms_->size());
  for (spec::ArmMetrics& a : metrics_) a.shadow.resize(arms_->size());
  const config::SpeculativeConfig& s = cfg.speculative;
  if (!s.ab_log.empty()) log_ = std::make_unique<AbRecorder>(*arms_, s.ab_log, s.ab_log_max_mib << 20, s.ab_log_keep);
}

ArmAccounting::~ArmAccounting() = default;

// An explicit arm must exist; a request that speculates gets an arm (explicit, by user, or drawn)
// and the arm's k unless it sets its own.
std::string ArmAccounting::assign(RequestId id, const Request& request, sched::Sequence& seq) {
  const std::string& name = request.speculative.arm;
  auto unknown = [&] {
    if (!config::valid_arm_name(name)) return std::string("speculative.arm is not a valid arm name");
    if (!assigner_) return "speculative.arm '" + name + "': the engine has no A/B arms (no speculative section)";
    return "unknown A/B arm '" + name + "' (arms: " + assigner_->list() + ")";
  };
  const std::optional<int32_t>& k = request.speculative.num_speculative_tokens;
  if (!assigner_ || !request.speculative.enabled || (k && *k == 0)) {
    // It does not speculate, so it gets no arm; a name it gives must still be one.
    return name.empty() || (assigner_ && assigner_->find(name)) ? "" : unknown();
  }
  const std::optional<ArmAssignment> a = assigner_->assign(name, request.speculative.user, id);
  if (!a) return unknown();
  const Arm& arm = arms_->arm(static_cast<size_t>(a->arm));
  log::get("spec").debug("request {} → arm '{}' ({})", id, arm.name, arm_choice_name(a->choice));
  seq.arm = a->arm;
  ++metrics_[static_cast<size_t>(a->arm)].num_requests;
  seq.spec_k = k.value_or(arm.k);
  // A seeded sampled request is reproducible only at a fixed k: dynamic k follows measured
  // timings, and another k consumes the request's random numbers differently. So it drafts its k
  // every step unless it asks for dynamic k itself (greedy output never depends on k).
  const bool seeded = request.sampling.seed.has_value() && request.sampling.temperature > 0;
  seq.dynamic_k = request.speculative.dynamic.value_or(dynamic_default_ && !seeded);
  if (log_) log_->add(id, *a, request.sampling, seq.spec_k, Clock::now());
  return "";
}

void ArmAccounting::step(const ArmStepRecord& record, double row_s) {
  row_s_ = row_s;
  for (const VerifierCall& c : record.calls) {
    spec::ArmMetrics& a = metrics_[static_cast<size_t>(c.arm)];
    if (c.arm == c.served) {
      if (!c.failed) a.serving.add_times(0, 0, c.seconds);
      continue;
    }
    spec::ShadowMetrics& s = a.shadow[static_cast<size_t>(c.served)];
    if (c.failed) {
      ++s.failures;
    } else {
      s.counterfactual.add_times(0, 0, c.seconds);
    }
  }
}

void ArmAccounting::row(const ArmStepRecord& record, int32_t ab_row, const RequestOutput& out, const RowOutcome& o) {
  const float logprob = record.emitted_logprob[static_cast<size_t>(ab_row)];
  const std::span<const ShadowOutcome> shadows = record.shadows_of(ab_row);
  spec::ArmMetrics& a = metrics_[static_cast<size_t>(out.arm)];
  a.serving.record(o.k, o.drafted, o.accepted, o.emitted);
  a.logprob_sum += logprob;
  a.logprob_tokens += static_cast<uint64_t>(o.accepted) + 1;
  for (size_t s = 0; s < shadows.size(); ++s) {
    const ShadowOutcome& so = shadows[s];
    if (so.accepted < 0) continue;  // not a shadow, or its call failed
    spec::ShadowMetrics& sm = metrics_[s].shadow[static_cast<size_t>(out.arm)];
    sm.counterfactual.record(so.k, so.drafted, so.accepted, so.accepted + 1);
    sm.compared_tokens += static_cast<uint64_t>(so.compared);
    sm.differing_tokens += so.differs ? 1 : 0;
    sm.logprob_sum += so.logprob;
    sm.logprob_tokens += static_cast<uint64_t>(so.accepted) + 1;
  }
  // The A/B log follows choice 0 of a request (one line per request).
  if (log_ && out.index == 0) log_->verified(out.id, o.drafted, o.accepted, logprob, shadows, row_s_);
}

void ArmAccounting::outputs(std::span<const RequestOutput> outs, Clock::time_point now) {
  if (log_) log_->outputs(outs, now);
}

}  // namespace specd::speculative

#include "speculative/arm_verifiers.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "sampling/sampling.hpp"
#include "sched/scheduler.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"

namespace specd::speculative {
namespace {

using Clock = std::chrono::steady_clock;

log::Logger& spec_log() {
  return log::get("spec");
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// log p of an emitted token; the floor keeps a (theoretically impossible) p = 0 finite.
constexpr float kMinProb = 1e-30f;

}  // namespace

ArmVerifiers::ArmVerifiers(const config::SpeculativeConfig& cfg, const plugin::Registry& registry, int64_t vocab_size)
    : vocab_(vocab_size) {
  auto add = [&](const std::string& name, const config::ComponentConfig& verifier, int32_t k, double weight) {
    Arm arm;
    arm.name = name;
    try {
      arm.verifier = registry.create_verifier(verifier.name, verifier.params);
    } catch (const Error& e) {
      if (cfg.arms.empty()) throw;
      throw Error(e.code(), "speculative.arms: arm '" + name + "': " + e.what());
    }
    arm.k = k > 0 ? k : cfg.num_speculative_tokens;
    arm.weight = weight;
    arm.shadow = std::find(cfg.shadow.begin(), cfg.shadow.end(), name) != cfg.shadow.end();
    any_shadow_ = any_shadow_ || arm.shadow;
    needs_draft_probs_ = needs_draft_probs_ || arm.verifier->capabilities().needs_draft_probs != 0;
    arms_.push_back(std::move(arm));
  };
  if (cfg.arms.empty()) {
    add("default", cfg.verifier, 0, 1.0);
  } else {
    for (const config::ArmConfig& a : cfg.arms) add(a.name, a.verifier, a.num_speculative_tokens, a.weight);
  }
  shadow_warned_.assign(arms_.size(), false);
}

ArmVerifiers::~ArmVerifiers() = default;

void ArmVerifiers::take_record(ArmStepRecord& into) {
  std::swap(into, record_);
  record_.clear();
}

// ---- the shared inputs ------------------------------------------------------------------------

bool ArmVerifiers::verify(std::span<sched::StepRow* const> rows) {
  record_.clear();
  record_.num_arms = arms_.size();
  rows_.assign(rows.begin(), rows.end());
  if (rows_.empty()) return false;
  // Each arm's rows become one contiguous slice of the buffers.
  if (arms_.size() > 1)
    std::stable_sort(rows_.begin(), rows_.end(),
                     [](const sched::StepRow* a, const sched::StepRow* b) { return a->seq->arm < b->seq->arm; });
  try {
    fill(rows_);
  } catch (const Error& e) {
    spec_log().error("verifier inputs failed for {} sequences: {}", rows_.size(), e.what());
    for (sched::StepRow* row : rows_) row->fail(std::string("speculative decoding failed: ") + e.what());
    return false;
  }
  ranges_.clear();
  for (size_t lo = 0; lo < rows_.size();) {
    const auto arm = static_cast<size_t>(rows_[lo]->seq->arm);
    size_t hi = lo + 1;
    while (hi < rows_.size() && static_cast<size_t>(rows_[hi]->seq->arm) == arm) ++hi;
    ranges_.push_back({arm, lo, hi});
    lo = hi;
  }
  record_.emitted_logprob.assign(rows_.size(), 0.0f);
  for (size_t i = 0; i < rows_.size(); ++i) rows_[i]->ab_row = static_cast<int32_t>(i);
  bool verified = false;
  for (const Range& r : ranges_) {
    serve(r);
    verified = verified || !rows_[r.lo]->failed();
  }
  if (!any_shadow_) return verified;
  record_.shadows.assign(rows_.size() * arms_.size(), ShadowOutcome{});
  for (size_t s = 0; s < arms_.size(); ++s) {
    if (!arms_[s].shadow) continue;
    for (const Range& r : ranges_)
      if (r.arm != s && !rows_[r.lo]->failed()) shadow(s, r);
  }
  return verified;
}

void ArmVerifiers::fill(std::span<sched::StepRow* const> rows) {
  const size_t b = rows.size();
  k_ = 0;
  for (const sched::StepRow* row : rows) {
    SPECD_CHECK(row->seq->arm >= 0 && static_cast<size_t>(row->seq->arm) < arms_.size(), ErrorCode::kInternal,
                "sequence " + std::to_string(row->seq->id) + " has no A/B arm");
    k_ = std::max(k_, static_cast<int32_t>(row->drafts.size()));
  }
  const size_t V = static_cast<size_t>(vocab_);
  const size_t k = static_cast<size_t>(k_);
  const size_t width = k + 1;
  with_probs_ = needs_draft_probs_ && rows.front()->draft_probs != nullptr;
  target_probs_.resize(b * width * V);
  if (with_probs_) draft_probs_.resize(b * k * V);
  drafts_.assign(b * k, -1);
  trees_ = false;
  for (const sched::StepRow* row : rows) trees_ = trees_ || row->tree();
  parents_.assign(trees_ ? b * k : 0, -1);
  out_nodes_.assign(trees_ ? b * k : 0, -1);
  num_drafted_.resize(b);
  seeds_.resize(b);
  steps_.resize(b);
  out_tokens_.assign(b * width, -1);
  num_accepted_.assign(b, 0);
  for (size_t i = 0; i < b; ++i) {
    const sched::StepRow& row = *rows[i];
    const sched::Sequence& s = *row.seq;
    const size_t m = row.drafts.size();
    num_drafted_[i] = static_cast<int32_t>(m);
    seeds_[i] = s.seed;
    steps_[i] = s.step();
    std::copy(row.drafts.begin(), row.drafts.end(), drafts_.begin() + static_cast<ptrdiff_t>(i * k));
    for (size_t j = 0; trees_ && j < m; ++j)  // a chain row of a tree step: parents j - 1
      parents_[i * k + j] = row.tree() ? row.draft_parents[j] : static_cast<int32_t>(j) - 1;
    if (with_probs_) std::copy_n(row.draft_probs, m * V, draft_probs_.data() + i * k * V);
    for (size_t j = 0; j <= m; ++j)  // penalties see the drafts before each position (a tree: the path)
      sampling::transform_logits_to_probs({row.logits + j * V, V}, s.params, s.history(drafts_before(row, j)),
                                          {target_probs_.data() + (i * width + j) * V, V});
  }
}

std::span<const int32_t> ArmVerifiers::drafts_before(const sched::StepRow& row, size_t j) {
  if (!row.tree()) return row.drafts.first(j);
  path_.clear();
  for (auto x = static_cast<int32_t>(j) - 1; x >= 0; x = row.draft_parents[static_cast<size_t>(x)])
    path_.push_back(row.drafts[static_cast<size_t>(x)]);
  std::reverse(path_.begin(), path_.end());
  return path_;
}

specd_verify_batch ArmVerifiers::slice(const Range& r, const int32_t* num_drafted, int32_t* out_tokens,
                                       int32_t* num_accepted, int32_t* out_nodes, bool with_probs) const {
  const size_t V = static_cast<size_t>(vocab_);
  const size_t k = static_cast<size_t>(k_);
  specd_verify_batch vb{};
  vb.struct_size = sizeof(vb);
  vb.device = {SPECD_DEVICE_CPU, 0};
  vb.num_seqs = static_cast<int32_t>(r.hi - r.lo);
  vb.k_max = k_;
  vb.vocab_size = static_cast<int32_t>(vocab_);
  vb.num_drafted = num_drafted + r.lo;
  vb.draft_tokens = drafts_.data() + r.lo * k;
  vb.target_probs = target_probs_.data() + r.lo * (k + 1) * V;
  vb.draft_probs = with_probs && with_probs_ ? draft_probs_.data() + r.lo * k * V : nullptr;
  vb.seeds = seeds_.data() + r.lo;
  vb.steps = steps_.data() + r.lo;
  vb.out_tokens = out_tokens + r.lo * (k + 1);
  vb.num_accepted = num_accepted + r.lo;
  if (trees_) {
    vb.draft_parents = parents_.data() + r.lo * k;
    vb.out_nodes = out_nodes + r.lo * k;
  }
  return vb;
}

void ArmVerifiers::check(const Arm& arm, const Range& r, const int32_t* num_drafted, const int32_t* out_tokens,
                         const int32_t* num_accepted, const int32_t* out_nodes) const {
  const size_t width = static_cast<size_t>(k_) + 1;
  for (size_t i = r.lo; i < r.hi; ++i) {
    const int32_t a = num_accepted[i];
    const int32_t token = a >= 0 && a <= num_drafted[i] ? out_tokens[i * width + static_cast<size_t>(a)] : -1;
    if (token < 0 || token >= vocab_ || (trees_ && !is_path(i, num_drafted[i], out_nodes, out_tokens, a)))
      throw Error(ErrorCode::kPluginCall, "verifier '" + arm.verifier->name() +
                                              "' returned an invalid result for sequence " +
                                              std::to_string(rows_[i]->seq->id) + " (accepted " + std::to_string(a) +
                                              " of " + std::to_string(num_drafted[i]) + ")");
  }
}

// Nodes [0, a) of row i are a root-to-node path of its tree and the accepted tokens are theirs.
bool ArmVerifiers::is_path(size_t i, int32_t drafted, const int32_t* out_nodes, const int32_t* out_tokens,
                           int32_t a) const {
  const size_t k = static_cast<size_t>(k_);
  int32_t parent = -1;
  for (size_t d = 0; d < static_cast<size_t>(a); ++d) {
    const int32_t node = out_nodes[i * k + d];
    if (node < 0 || node >= drafted || parents_[i * k + static_cast<size_t>(node)] != parent ||
        out_tokens[i * (k + 1) + d] != drafts_[i * k + static_cast<size_t>(node)])
      return false;
    parent = node;
  }
  return true;
}

float ArmVerifiers::logprob(size_t i, const int32_t* tokens, int32_t n, const int32_t* nodes) const {
  const size_t V = static_cast<size_t>(vocab_);
  const size_t width = static_cast<size_t>(k_) + 1;
  float sum = 0;
  for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
    const auto t = static_cast<size_t>(tokens[i * width + j]);
    // The distribution token j was emitted from: after the path's node j - 1 (a tree) or draft j - 1.
    const size_t row = trees_ && j > 0 ? static_cast<size_t>(nodes[i * static_cast<size_t>(k_) + j - 1]) + 1 : j;
    sum += std::log(std::max(target_probs_[(i * width + row) * V + t], kMinProb));
  }
  return sum;
}

// ---- serving and shadow verification ----------------------------------------------------------

void ArmVerifiers::serve(const Range& r) {
  Arm& arm = arms_[r.arm];
  const auto t0 = Clock::now();
  try {
    const bool probs = arm.verifier->capabilities().needs_draft_probs != 0;
    arm.verifier->verify(
        slice(r, num_drafted_.data(), out_tokens_.data(), num_accepted_.data(), out_nodes_.data(), probs));
    check(arm, r, num_drafted_.data(), out_tokens_.data(), num_accepted_.data(), out_nodes_.data());
  } catch (const Error& e) {
    spec_log().error("verifier of arm '{}' failed for {} sequences: {}", arm.name, r.hi - r.lo, e.what());
    for (size_t i = r.lo; i < r.hi; ++i) rows_[i]->fail(std::string("speculative decoding failed: ") + e.what());
    record_.calls.push_back({static_cast<int32_t>(r.arm), static_cast<int32_t>(r.arm), seconds_since(t0), true});
    return;
  }
  record_.calls.push_back({static_cast<int32_t>(r.arm), static_cast<int32_t>(r.arm), seconds_since(t0), false});
  const size_t width = static_cast<size_t>(k_) + 1;
  for (size_t i = r.lo; i < r.hi; ++i) {
    sched::StepRow& row = *rows_[i];
    const int32_t a = num_accepted_[i];
    row.num_accepted = a;
    row.emitted = {out_tokens_.data() + i * width, static_cast<size_t>(a) + 1};
    row.accepted_nodes = {};
    if (row.tree()) row.accepted_nodes = {out_nodes_.data() + i * static_cast<size_t>(k_), static_cast<size_t>(a)};
    record_.emitted_logprob[i] = logprob(i, out_tokens_.data(), a + 1, out_nodes_.data());
  }
}

void ArmVerifiers::shadow(size_t s, const Range& r) {
  Arm& arm = arms_[s];
  VerifierCall& call =
      record_.calls.emplace_back(VerifierCall{static_cast<int32_t>(s), static_cast<int32_t>(r.arm), 0, false});
  const size_t width = static_cast<size_t>(k_) + 1;
  shadow_drafted_.resize(rows_.size());
  shadow_tokens_.resize(rows_.size() * width);
  shadow_accepted_.resize(rows_.size());
  shadow_nodes_.resize(trees_ ? rows_.size() * static_cast<size_t>(k_) : 0);
  for (size_t i = r.lo; i < r.hi; ++i)
    shadow_drafted_[i] = std::min(num_drafted_[i], arm.k);  // a tree: its first k nodes
  std::fill(shadow_tokens_.begin() + static_cast<ptrdiff_t>(r.lo * width),
            shadow_tokens_.begin() + static_cast<ptrdiff_t>(r.hi * width), -1);
  const auto t0 = Clock::now();
  try {
    const bool probs = arm.verifier->capabilities().needs_draft_probs != 0;
    arm.verifier->verify(
        slice(r, shadow_drafted_.data(), shadow_tokens_.data(), shadow_accepted_.data(), shadow_nodes_.data(), probs));
    check(arm, r, shadow_drafted_.data(), shadow_tokens_.data(), shadow_accepted_.data(), shadow_nodes_.data());
  } catch (const Error& e) {
    // Shadows only record: the served requests go on.
    if (!shadow_warned_[s])
      spec_log().warn("shadow verifier of arm '{}' failed (counted in its shadow metrics; logged once): {}", arm.name,
                      e.what());
    shadow_warned_[s] = true;
    call.seconds = seconds_since(t0);
    call.failed = true;
    return;
  }
  const double seconds = seconds_since(t0);
  call.seconds = seconds;
  const auto share = static_cast<float>(seconds / static_cast<double>(r.hi - r.lo));
  for (size_t i = r.lo; i < r.hi; ++i) {
    const int32_t a = shadow_accepted_[i];
    const int32_t served = num_accepted_[i];
    const size_t j = static_cast<size_t>(std::min(a, served));
    ShadowOutcome& o = record_.shadows[i * arms_.size() + s];
    o.drafted = shadow_drafted_[i];
    o.accepted = a;
    o.compared = static_cast<int32_t>(j) + 1;
    o.differs = shadow_tokens_[i * width + j] != out_tokens_[i * width + j];
    o.logprob = logprob(i, shadow_tokens_.data(), a + 1, shadow_nodes_.data());
    o.seconds = share;
    o.k = std::min(rows_[i]->lookahead, arm.k);
  }
}

}  // namespace specd::speculative

#include "speculative/speculator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "speculative/abi_views.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"

namespace specd::speculative {
namespace {

log::Logger& spec_log() { return log::get("spec"); }

// Σ_v min(p[v], q[v]) with independent partial sums, so that the loop vectorizes.
double overlap(const float* p, const float* q, size_t n) {
  constexpr size_t kLanes = 16;
  float part[kLanes] = {};
  size_t v = 0;
  for (; v + kLanes <= n; v += kLanes)
    for (size_t l = 0; l < kLanes; ++l) part[l] += std::min(p[v + l], q[v + l]);
  double sum = 0;
  for (; v < n; ++v) sum += std::min(p[v], q[v]);
  for (float x : part) sum += x;
  return sum;
}

// The start-up calibration of the target's cost stays under a second (cost_model.hpp).
constexpr double kCalibrationBudgetSeconds = 0.5;

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

Speculator::Speculator(const config::EngineConfig& cfg, std::shared_ptr<const model::LlamaWeights> target,
                       int32_t block_size, int64_t max_model_len, int64_t vocab_size, dist::Leader* leader)
    : default_k_(cfg.speculative.num_speculative_tokens), vocab_(vocab_size), hidden_size_(target->config().hidden_size) {
  registry_.scan(plugin::Registry::search_path(cfg.plugins.paths));
  host_ = std::make_unique<ModelHost>(std::move(target), block_size, max_model_len, cfg.kv_cache.dtype, leader);
  proposer_ = registry_.create_proposer(cfg.speculative.proposer.name, cfg.speculative.proposer.params,
                                        host_->binding());
  arms_ = std::make_unique<ArmVerifiers>(cfg.speculative, registry_, vocab_size);
  assigner_.emplace(make_assigner(*arms_, static_cast<uint64_t>(cfg.model.seed)));
  const auto& caps = proposer_->capabilities();
  // ABI 1.0 hosts called on_accept and on_release whatever keeps_state said.
  keeps_state_ = caps.keeps_state != 0 || proposer_->abi_minor() < 1;
  for (size_t i = 0; i < arms_->size(); ++i) {
    const Arm& arm = arms_->arm(i);
    const specd_verifier_caps& vc = arm.verifier->capabilities();
    if (vc.needs_draft_probs == 0 && caps.produces_draft_probs != 0)
      spec_log().info("verifier '{}' ignores the draft probabilities proposer '{}' produces", arm.verifier->name(),
                      proposer_->name());
    if (vc.lossless == 0)
      spec_log().info("verifier '{}' is lossy: requests that sample (temperature > 0) do not follow the target "
                      "distribution exactly",
                      arm.verifier->name());
    if (arms_->size() > 1 || arm.shadow)
      spec_log().info("A/B arm '{}': verifier {}, k = {}, weight {}{}", arm.name, arm.verifier->name(), arm.k,
                      arm.weight, arm.shadow ? ", shadow" : "");
  }
  policy_ = std::make_unique<SpeculationPolicy>(kMaxSpeculativeTokens, cfg.scheduler.max_num_batched_tokens,
                                                caps.supports_variable_k != 0);
  spec_log().info("speculative decoding: proposer {}, verifier {}, k = {}{}", proposer_->name(),
                  arms_->size() == 1 ? arms_->arm(0).verifier->name() : std::string("per A/B arm"), default_k_,
                  cfg.speculative.dynamic ? " (upper bound; dynamic k per sequence and step)" : "");
}

void Speculator::calibrate(model::LlamaModel& model, kv::KvCache& kv, int32_t max_tokens) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<TargetSample> samples = calibrate_target(model, kv, max_tokens, kCalibrationBudgetSeconds);
  policy_->cost().set_target_prior(samples);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  policy_metrics_.calibration_seconds = s;
  std::string shape;
  for (const TargetSample& x : samples) shape += fmt::format(" T={}/R={}: {:.2f} ms", x.tokens, x.logit_rows, x.seconds * 1e3);
  spec_log().info("dynamic speculation: target cost calibrated in {:.0f} ms:{}", s * 1e3, shape);
}

std::optional<ArmAssignment> Speculator::assign(const std::string& arm, const std::string& user, RequestId id) {
  std::optional<ArmAssignment> a = assigner_->assign(arm, user, id);
  if (a) {
    spec_log().debug("request {} → arm '{}' ({})", id, arms_->arm(static_cast<size_t>(a->arm)).name,
                     arm_choice_name(a->choice));
  }
  return a;
}

Speculator::~Speculator() = default;

void Speculator::fail(std::span<sched::StepRow* const> rows, const char* stage, const Error& e) {
  spec_log().error("{} failed for {} sequences: {}", stage, rows.size(), e.what());
  for (sched::StepRow* row : rows) row->fail(std::string("speculative decoding failed: ") + e.what());
}

void Speculator::fail(sched::StepRow& row, const char* stage, const Error& e) {
  sched::StepRow* one = &row;
  fail({&one, 1}, stage, e);
}

// ---- propose ----------------------------------------------------------------------------------

void Speculator::propose(sched::StepBatch& batch) {
  rows_.clear();
  for (sched::StepRow& row : batch.rows)
    if (row.speculates() && !row.failed()) rows_.push_back(&row);
  if (rows_.empty()) return;
  const specd_proposer_caps& caps = proposer_->capabilities();
  if (caps.supports_variable_k == 0) {
    // One k for the whole call: the smallest any row may take.
    int32_t k = rows_.front()->lookahead;
    for (const sched::StepRow* row : rows_) k = std::min(k, row->lookahead);
    for (sched::StepRow* row : rows_) row->lookahead = k;
  }
  const size_t b = rows_.size();
  k_max_ = 1;
  for (const sched::StepRow* row : rows_) k_max_ = std::max(k_max_, row->lookahead);
  seqs_buf_.resize(b);
  max_draft_.resize(b);
  for (size_t i = 0; i < b; ++i) {
    const sched::Sequence& s = *rows_[i]->seq;
    seqs_buf_[i] = abi_sequence(s, static_cast<int64_t>(s.tokens.size()));
    max_draft_[i] = rows_[i]->lookahead;
  }
  draft_tokens_.assign(b * static_cast<size_t>(k_max_), -1);
  num_drafted_.assign(b, 0);
  const bool with_probs = caps.produces_draft_probs != 0;
  const size_t probs_stride = static_cast<size_t>(k_max_) * static_cast<size_t>(vocab_);
  if (with_probs) draft_probs_.resize(b * probs_stride);

  specd_propose_batch pb{};
  pb.struct_size = sizeof(pb);
  pb.num_seqs = static_cast<int32_t>(b);
  pb.seqs = seqs_buf_.data();
  pb.max_draft = max_draft_.data();
  pb.k_max = k_max_;
  pb.vocab_size = static_cast<int32_t>(vocab_);
  pb.draft_tokens = draft_tokens_.data();
  pb.num_drafted = num_drafted_.data();
  pb.draft_probs = with_probs ? draft_probs_.data() : nullptr;
  try {
    if (wants_hidden()) pass_hidden(rows_, pb);
    proposer_->propose(pb);
    check_drafts(rows_);
  } catch (const Error& e) {
    fail(rows_, "proposer", e);
    return;
  }
  for (size_t i = 0; i < b; ++i) {
    sched::StepRow& row = *rows_[i];
    row.drafts = {draft_tokens_.data() + i * static_cast<size_t>(k_max_), static_cast<size_t>(num_drafted_[i])};
    row.draft_probs = with_probs ? draft_probs_.data() + i * probs_stride : nullptr;
  }
}

// Target hidden states committed since each sequence's previous propose (ABI
// specd_propose_batch.num_hidden). Invariant: a sequence of length L has hidden states for
// positions 0..L-2 (the last token has not been through the target yet).
void Speculator::pass_hidden(std::span<sched::StepRow* const> rows, specd_propose_batch& pb) {
  const size_t H = static_cast<size_t>(hidden_size_);
  num_hidden_.assign(rows.size(), 0);
  hidden_buf_.clear();
  for (size_t i = 0; i < rows.size(); ++i) {
    const sched::Sequence& s = *rows[i]->seq;
    auto it = seqs_.find(s.id);
    if (it == seqs_.end()) continue;
    const auto L = static_cast<int64_t>(s.tokens.size());
    SPECD_CHECK(it->second.next_pos == L - 1, ErrorCode::kInternal,
                "speculator: sequence " + std::to_string(s.id) + " of length " + std::to_string(L) +
                    " has target hidden states up to position " + std::to_string(it->second.next_pos));
    num_hidden_[i] = static_cast<int32_t>(it->second.rows.size() / H);
    hidden_buf_.insert(hidden_buf_.end(), it->second.rows.begin(), it->second.rows.end());
    it->second.rows.clear();  // the proposer keeps what it is given ("committed since the previous call")
  }
  pb.num_hidden = num_hidden_.data();
  pb.target_hidden = hidden_view(hidden_buf_.data(), static_cast<int64_t>(hidden_buf_.size() / H), hidden_size_);
}

void Speculator::check_drafts(std::span<sched::StepRow* const> rows) const {
  for (size_t i = 0; i < rows.size(); ++i) {
    const int32_t n = num_drafted_[i];
    const RequestId id = rows[i]->seq->id;
    if (n < 0 || n > rows[i]->lookahead)
      throw Error(ErrorCode::kPluginCall, "proposer '" + proposer_->name() + "' drafted " + std::to_string(n) +
                                              " tokens for sequence " + std::to_string(id) + ", allowed 0.." +
                                              std::to_string(rows[i]->lookahead));
    for (int32_t j = 0; j < n; ++j) {
      const int32_t t = draft_tokens_[i * static_cast<size_t>(k_max_) + static_cast<size_t>(j)];
      if (t < 0 || t >= vocab_)
        throw Error(ErrorCode::kPluginCall, "proposer '" + proposer_->name() + "' drafted token id " +
                                                std::to_string(t) + " outside the vocabulary [0, " +
                                                std::to_string(vocab_) + ") for sequence " + std::to_string(id));
    }
  }
}

// ---- after the scorer: prefill chunks and plain decodes -------------------------------------

void Speculator::observe(sched::StepBatch& batch) {
  if (!keeps_state_ && !wants_hidden()) return;
  rows_.clear();
  for (sched::StepRow& row : batch.rows) {
    if (row.failed() || row.drafted() || row.seq->spec_k <= 0) continue;  // spec_k 0: never proposes
    const auto it = seqs_.find(row.seq->id);
    if (it == seqs_.end() || !it->second.prefilled) {
      rows_.push_back(&row);
    } else if (wants_hidden()) {
      // A plain decode: its hidden state goes with the next propose (drafted rows: accept()).
      try {
        add_hidden(row, row.n);
      } catch (const Error& e) {
        fail(row, "target hidden states", e);
      }
    }
  }
  try {
    prefill(rows_);
  } catch (const Error& e) {
    fail(rows_, "proposer on_prefill", e);
  }
}

void Speculator::prefill(std::span<sched::StepRow* const> rows) {
  if (rows.empty()) return;
  const size_t H = static_cast<size_t>(hidden_size_);
  seqs_buf_.resize(rows.size());
  num_new_.resize(rows.size());
  hidden_buf_.clear();
  for (size_t i = 0; i < rows.size(); ++i) {
    const sched::StepRow& row = *rows[i];
    SeqState& st = seqs_[row.seq->id];
    // A choice forked from another's prompt (n > 1) starts past positions the proposer never saw:
    // they all reach it now (without hidden states: the engine does not fork for proposers that
    // need them).
    const bool forked = row.start > st.next_pos && st.next_pos == 0 && !wants_hidden();
    SPECD_CHECK((row.start == st.next_pos || forked) && st.rows.empty(), ErrorCode::kInternal,
                "speculator: prefill chunk of sequence " + std::to_string(row.seq->id) + " starts at " +
                    std::to_string(row.start) + ", the proposer has seen up to " + std::to_string(st.next_pos));
    // The prompt processed so far: the chunk is its last n tokens.
    seqs_buf_[i] = abi_sequence(*row.seq, static_cast<int64_t>(row.start) + row.n);
    num_new_[i] = row.start + row.n - static_cast<int32_t>(st.next_pos);
    if (wants_hidden()) hidden_buf_.insert(hidden_buf_.end(), row.hidden, row.hidden + static_cast<size_t>(row.n) * H);
  }
  specd_prefill_batch pb{};
  pb.struct_size = sizeof(pb);
  pb.num_seqs = static_cast<int32_t>(rows.size());
  pb.seqs = seqs_buf_.data();
  pb.num_new = num_new_.data();
  if (wants_hidden())
    pb.target_hidden = hidden_view(hidden_buf_.data(), static_cast<int64_t>(hidden_buf_.size() / H), hidden_size_);
  proposer_->on_prefill(pb);
  for (const sched::StepRow* row : rows) {
    SeqState& st = seqs_[row->seq->id];
    st.next_pos = row->start + row->n;
    // The chunk that ends the prompt, or the one that ends a preempted sequence's re-prefill
    // (all but its last token: the scheduler leaves that one to the next decode).
    const auto len = static_cast<int64_t>(row->seq->tokens.size());
    if (row->sample || (row->seq->num_generated() > 0 && st.next_pos == len - 1)) st.prefilled = true;
  }
}

// Hidden states of newly committed positions [row.start, row.start + n) of a decoding sequence
// (a plain decode, or the chunk plus the accepted drafts of a scored row).
void Speculator::add_hidden(const sched::StepRow& row, int32_t n) {
  SeqState& st = seqs_[row.seq->id];
  SPECD_CHECK(row.start == st.next_pos, ErrorCode::kInternal,
              "speculator: hidden states of sequence " + std::to_string(row.seq->id) + " for position " +
                  std::to_string(row.start) + ", expected position " + std::to_string(st.next_pos));
  st.rows.insert(st.rows.end(), row.hidden, row.hidden + static_cast<size_t>(n) * static_cast<size_t>(hidden_size_));
  st.next_pos = row.start + n;
}

// ---- verify -----------------------------------------------------------------------------------

bool Speculator::verify(sched::StepBatch& batch) {
  rows_.clear();
  for (sched::StepRow& row : batch.rows)
    if (row.drafted() && !row.failed()) rows_.push_back(&row);
  const bool verified = arms_->verify(rows_);
  observe_acceptance();
  return verified;
}

// Evidence for positions 0..min(a, m-1) of each verified row (the drafts up to the first
// rejection): under a lossless serving verifier the acceptance probability of rejection sampling,
// Σ_v min(p(v), q(v)) (p(d) for a one-hot q, i.e. no draft probabilities), else the 0/1 outcome.
void Speculator::observe_acceptance() {
  const size_t V = static_cast<size_t>(vocab_);
  const std::span<sched::StepRow* const> rows = arms_->verified_rows();
  for (size_t i = 0; i < rows.size(); ++i) {
    const sched::StepRow& row = *rows[i];
    if (row.failed()) continue;
    const bool lossless = arms_->arm(static_cast<size_t>(row.seq->arm)).verifier->capabilities().lossless != 0;
    const int32_t n = std::min(row.num_accepted + 1, static_cast<int32_t>(row.drafts.size()));
    evidence_.resize(static_cast<size_t>(n));
    for (int32_t j = 0; j < n; ++j) {
      const auto jj = static_cast<size_t>(j);
      double x = j < row.num_accepted ? 1.0 : 0.0;
      if (lossless) {
        const float* p = arms_->target_probs(i, jj);
        const float* q = arms_->draft_probs(i, jj);
        x = q != nullptr ? overlap(p, q, V) : p[static_cast<size_t>(row.drafts[jj])];
      }
      evidence_[jj] = x;
    }
    policy_->observe_verified(row, evidence_, policy_metrics_);
  }
}

// ---- after commit -----------------------------------------------------------------------------

void Speculator::accept(sched::StepRow& row) {
  if (!row.speculates() || row.failed()) return;
  try {
    // Committed and through the target: the chunk's positions and the accepted drafts.
    if (wants_hidden() && row.drafted()) add_hidden(row, row.n + row.num_accepted);
    if (keeps_state_)
      proposer_->on_accept(row.seq->id, row.num_accepted,
                           {row.emitted.data(), static_cast<int64_t>(row.num_appended)});
  } catch (const Error& e) {
    fail(row, "proposer on_accept", e);
  }
}

void Speculator::release(RequestId id) {
  seqs_.erase(id);
  policy_->release(id);
  if (keeps_state_) proposer_->on_release(id);
}

}  // namespace specd::speculative

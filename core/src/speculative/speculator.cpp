#include "speculative/speculator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "specd/error.hpp"
#include "specd/log.hpp"
#include "speculative/abi_views.hpp"
#include "speculative/propose_grammar.hpp"

namespace specd::speculative {
namespace {

log::Logger& spec_log() {
  return log::get("spec");
}

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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Speculator::Speculator(const config::EngineConfig& cfg, std::shared_ptr<const model::LlamaWeights> target,
                       int32_t block_size, int64_t max_model_len, int64_t vocab_size, tp::ModelFactory& models,
                       model::Placement placement)
    : scorer_cfg_(cfg.speculative.scorer), vocab_(vocab_size), hidden_size_(target->config().hidden_size) {
  if (!cfg.speculative.enabled) {
    accounting_ = std::make_unique<ArmAccounting>(nullptr, cfg);
    return;
  }
  default_k_ = cfg.speculative.num_speculative_tokens;
  dynamic_ = cfg.speculative.dynamic;
  registry_.scan(plugin::Registry::search_path(cfg.plugins.paths));
  const int64_t target_layers = target->config().num_layers;
  host_ =
      std::make_unique<ModelHost>(std::move(target), block_size, max_model_len, cfg.kv_cache.dtype, models, placement);
  proposer_ =
      registry_.create_proposer(cfg.speculative.proposer.name, cfg.speculative.proposer.params, host_->binding());
  arms_ = std::make_unique<ArmVerifiers>(cfg.speculative, registry_, vocab_size);
  accounting_ = std::make_unique<ArmAccounting>(arms_.get(), cfg);
  const auto& caps = proposer_->capabilities();
  // ABI 1.0 hosts called on_accept and on_release whatever keeps_state said.
  keeps_state_ = caps.keeps_state != 0 || proposer_->abi_minor() < 1;
  if (caps.num_aux_hidden_layers > 0 && caps.aux_hidden_layers != nullptr)
    aux_layers_.assign(caps.aux_hidden_layers, caps.aux_hidden_layers + caps.num_aux_hidden_layers);
  for (const int32_t l : aux_layers_)
    if (l < 0 || l > target_layers)
      throw Error(ErrorCode::kConfig, "proposer '" + proposer_->name() + "' asks for the hidden states of layer " +
                                          std::to_string(l) + ", but the target has layers 0.." +
                                          std::to_string(target_layers));
  feed_.emplace(hidden_size_, caps.needs_target_hidden != 0 || !aux_layers_.empty(),
                static_cast<int64_t>(aux_layers_.size()));
  for (size_t i = 0; i < arms_->size(); ++i) {
    const Arm& arm = arms_->arm(i);
    const specd_verifier_caps& vc = arm.verifier->capabilities();
    if (caps.drafts_trees != 0 && vc.supports_trees == 0)
      throw Error(ErrorCode::kConfig,
                  "proposer '" + proposer_->name() + "' drafts trees, but verifier '" + arm.verifier->name() + "'" +
                      (arms_->size() > 1 ? " of A/B arm '" + arm.name + "'" : std::string()) + " verifies chains only");
    if (vc.needs_draft_probs == 0 && caps.produces_draft_probs != 0)
      spec_log().info("verifier '{}' ignores the draft probabilities proposer '{}' produces", arm.verifier->name(),
                      proposer_->name());
    if (vc.lossless == 0)
      spec_log().info(
          "verifier '{}' is lossy: requests that sample (temperature > 0) do not follow the target "
          "distribution exactly",
          arm.verifier->name());
    if (arms_->size() > 1 || arm.shadow)
      spec_log().info("A/B arm '{}': verifier {}, k = {}, weight {}{}", arm.name, arm.verifier->name(), arm.k,
                      arm.weight, arm.shadow ? ", shadow" : "");
  }
  policy_ = std::make_unique<SpeculationPolicy>(kMaxSpeculativeTokens, cfg.scheduler.max_num_batched_tokens,
                                                caps.supports_variable_k != 0);
  // ABI 1.6: a chain proposer's confidences let the policy choose k after the drafts exist.
  policy_->set_trimming(caps.reports_confidence != 0 && caps.drafts_trees == 0);
  policy_->set_trees(caps.drafts_trees != 0, caps.max_tree_depth);
  spec_log().info("speculative decoding: proposer {}, verifier {}, k = {}{}", proposer_->name(),
                  arms_->size() == 1 ? arms_->arm(0).verifier->name() : std::string("per A/B arm"), default_k_,
                  cfg.speculative.dynamic ? " (upper bound; dynamic k per sequence and step)" : "");
}

Speculator::~Speculator() = default;

// ---- set-up -----------------------------------------------------------------------------------

int32_t Speculator::max_k() const {
  return on() ? proposer_->capabilities().max_k : 0;
}

bool Speculator::wants_hidden() const {
  return on() && (proposer_->capabilities().needs_target_hidden != 0 || !aux_layers_.empty());
}

// Feature rows [rows, (1 + aux) * hidden] from the feed, as the ABI's two views.
void Speculator::split_features(std::vector<float>& features, specd_tensor_view& final_view,
                                specd_tensor_view& aux_view) {
  const auto H = static_cast<size_t>(hidden_size_);
  const size_t A = aux_layers_.size();
  const size_t rows = features.size() / (H * (1 + A));
  const bool final_wanted = proposer_->capabilities().needs_target_hidden != 0;
  hidden_buf_.resize(final_wanted ? rows * H : 0);
  aux_buf_.resize(rows * A * H);
  for (size_t r = 0; r < rows; ++r) {
    const float* f = features.data() + r * H * (1 + A);
    if (final_wanted) std::copy(f, f + H, hidden_buf_.data() + r * H);
    std::copy(f + H, f + H * (1 + A), aux_buf_.data() + r * A * H);
  }
  if (final_wanted) final_view = hidden_view(hidden_buf_.data(), static_cast<int64_t>(rows), hidden_size_);
  if (A > 0) {
    aux_view = hidden_view(aux_buf_.data(), static_cast<int64_t>(rows), static_cast<int64_t>(A));
    aux_view.ndim = 3;
    aux_view.shape[2] = hidden_size_;
  }
}

sched::HostedKv* Speculator::hosted_kv() {
  return host_.get();
}

void Speculator::set_prefix_caching(bool on) {
  if (host_) host_->set_prefix_caching(on);
}

size_t Speculator::hosted_bytes_per_block() const {
  return host_ ? host_->hosted_bytes_per_block() : 0;
}

void Speculator::allocate_hosted_kv(int32_t num_blocks) {
  if (host_) host_->allocate_kv(num_blocks);
}

void Speculator::describe(EngineInfo& info, const Scorer& scorer) const {
  if (!on()) return;
  info.proposer = proposer_->name();
  info.scorer = scorer.name();
  info.num_speculative_tokens = default_k_;
  info.dynamic_k = dynamic_;
  info.verifier_lossless = true;
  for (size_t i = 0; i < arms_->size(); ++i) {
    const Arm& a = arms_->arm(i);
    const bool lossless = a.verifier->capabilities().lossless != 0;
    info.arms.push_back({a.name, a.verifier->name(), lossless, a.k, a.weight, a.shadow});
    info.verifier += (i == 0 ? "" : ",") + a.verifier->name();
    info.verifier_lossless = info.verifier_lossless && lossless;
  }
}

void Speculator::calibrate(model::LlamaModel& model, kv::KvCache& kv, int32_t max_tokens) {
  if (!on()) return;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<TargetSample> samples = calibrate_target(model, kv, max_tokens, kCalibrationBudgetSeconds);
  policy_->cost().set_target_prior(samples);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  policy_metrics_.calibration_seconds = s;
  std::string shape;
  for (const TargetSample& x : samples)
    shape += fmt::format(" T={}/R={}: {:.2f} ms", x.tokens, x.logit_rows, x.seconds * 1e3);
  spec_log().info("dynamic speculation: target cost calibrated in {:.0f} ms:{}", s * 1e3, shape);
}

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
  if (!on()) return;
  policy_->plan(batch, policy_metrics_);
  const auto t0 = std::chrono::steady_clock::now();
  struct Timer {  // every return below ends the propose stage
    Speculator& s;
    std::chrono::steady_clock::time_point t0;
    ~Timer() {
      s.proposed_at_ = std::chrono::steady_clock::now();
      s.propose_s_ = std::chrono::duration<double>(s.proposed_at_ - t0).count();
    }
  } timer{*this, t0};
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
  const bool trees = caps.drafts_trees != 0;
  draft_parents_.resize(trees ? b * static_cast<size_t>(k_max_) : 0);
  for (size_t j = 0; j < draft_parents_.size(); ++j) draft_parents_[j] = static_cast<int32_t>(j % k_max_) - 1;

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
  pb.draft_parents = trees ? draft_parents_.data() : nullptr;
  const bool trim = policy_->trim_pending();
  draft_confidence_.assign(trim ? b * static_cast<size_t>(k_max_) : 0, -1.0f);
  pb.draft_confidence = trim ? draft_confidence_.data() : nullptr;
  try {
    if (wants_hidden()) {
      feature_buf_.clear();
      feed_->take_hidden(rows_, num_hidden_, feature_buf_);
      pb.num_hidden = num_hidden_.data();
      split_features(feature_buf_, pb.target_hidden, pb.target_aux_hidden);
    }
    const ProposeGrammar grammar(rows_);
    proposer_->propose(pb, grammar.any() ? &grammar : nullptr);
    check_drafts(rows_);
  } catch (const Error& e) {
    fail(rows_, "proposer", e);
    return;
  }
  for (size_t i = 0; i < b; ++i) {
    sched::StepRow& row = *rows_[i];
    row.drafts = {draft_tokens_.data() + i * static_cast<size_t>(k_max_), static_cast<size_t>(num_drafted_[i])};
    row.draft_probs = with_probs ? draft_probs_.data() + i * probs_stride : nullptr;
    row.draft_parents = {};
    if (!trees) continue;
    const std::span<const int32_t> parents(draft_parents_.data() + i * static_cast<size_t>(k_max_), row.drafts.size());
    for (size_t j = 0; j < parents.size(); ++j)
      if (parents[j] != static_cast<int32_t>(j) - 1) {
        row.draft_parents = parents;  // a real tree; a chain stays a chain
        break;
      }
  }
  if (trim) {  // the policy cuts the drafts by their confidence (policy.hpp "Trimming")
    policy_->trim(rows_, draft_confidence_, static_cast<size_t>(k_max_), seconds_since(t0), policy_metrics_);
    for (size_t i = 0; i < b; ++i) num_drafted_[i] = static_cast<int32_t>(rows_[i]->drafts.size());
  }
  apply_grammar(with_probs, probs_stride);
}

void Speculator::apply_grammar(bool with_probs, size_t probs_stride) {
  const auto V = static_cast<size_t>(vocab_);
  for (size_t i = 0; i < rows_.size(); ++i) {
    sched::StepRow& row = *rows_[i];
    row.num_forced = 0;
    if (!row.seq->constraint) continue;
    const constrain::SequenceConstraint& c = *row.seq->constraint;
    if (!row.tree()) {
      int32_t* tokens = draft_tokens_.data() + i * static_cast<size_t>(k_max_);
      size_t n = c.allowed_prefix(row.drafts, row.seq->stop_ids);
      grammar_cut_.fetch_add(row.drafts.size() - n, std::memory_order_relaxed);
      const auto room = static_cast<size_t>(std::max(0, row.lookahead)) - std::min<size_t>(n, row.lookahead);
      const std::vector<int32_t> forced = room > 0 ? c.forced_drafts({tokens, n}, room) : std::vector<int32_t>{};
      for (const int32_t t : forced) {
        tokens[n] = t;
        if (with_probs) {  // drawn from nothing but the grammar: one-hot
          float* q = draft_probs_.data() + i * probs_stride + n * V;
          std::fill_n(q, V, 0.0f);
          q[static_cast<size_t>(t)] = 1.0f;
        }
        ++n;
      }
      row.num_forced = static_cast<int32_t>(forced.size());
      grammar_forced_.fetch_add(forced.size(), std::memory_order_relaxed);
      row.drafts = {tokens, n};
      num_drafted_[i] = static_cast<int32_t>(n);
      continue;
    }
    c.allowed_nodes(row.drafts, row.draft_parents, row.seq->stop_ids, keep_);
    int32_t* tokens = draft_tokens_.data() + i * static_cast<size_t>(k_max_);
    int32_t* parents = draft_parents_.data() + i * static_cast<size_t>(k_max_);
    float* probs = with_probs ? draft_probs_.data() + i * probs_stride : nullptr;
    remap_.assign(row.drafts.size(), -1);
    size_t w = 0;
    for (size_t j = 0; j < row.drafts.size(); ++j) {  // parents come first: compact in place
      if (!keep_[j]) continue;
      remap_[j] = static_cast<int32_t>(w);
      tokens[w] = tokens[j];
      parents[w] = parents[j] < 0 ? -1 : remap_[static_cast<size_t>(parents[j])];
      if (probs != nullptr && w != j) std::copy_n(probs + j * V, V, probs + w * V);
      ++w;
    }
    grammar_cut_.fetch_add(row.drafts.size() - w, std::memory_order_relaxed);
    row.drafts = {tokens, w};
    num_drafted_[i] = static_cast<int32_t>(w);
    row.draft_parents = {};
    for (size_t j = 0; j < w; ++j)
      if (parents[j] != static_cast<int32_t>(j) - 1) {
        row.draft_parents = {parents, w};
        break;
      }
  }
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
      const int32_t parent =
          draft_parents_.empty() ? j - 1 : draft_parents_[i * static_cast<size_t>(k_max_) + static_cast<size_t>(j)];
      if (parent < -1 || parent >= j)
        throw Error(ErrorCode::kPluginCall, "proposer '" + proposer_->name() + "' gave draft node " +
                                                std::to_string(j) + " of sequence " + std::to_string(id) +
                                                " the parent " + std::to_string(parent) + ", outside [-1, " +
                                                std::to_string(j) + ")");
    }
  }
}

// ---- after the scorer: prefill chunks and plain decodes -------------------------------------

void Speculator::observe(sched::StepBatch& batch) {
  if (!keeps_state_ && !wants_hidden()) return;
  rows_.clear();
  for (sched::StepRow& row : batch.rows) {
    if (row.failed() || row.drafted() || row.seq->spec_k <= 0) continue;  // spec_k 0: never proposes
    if (!feed_->prefilled(row.seq->id)) {
      rows_.push_back(&row);
    } else if (wants_hidden()) {
      // A plain decode: its hidden state goes with the next propose (drafted rows: accept()).
      try {
        feed_->add_hidden(row, row.n);
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
  seqs_buf_.resize(rows.size());
  num_new_.resize(rows.size());
  feature_buf_.clear();
  for (size_t i = 0; i < rows.size(); ++i) {
    const sched::StepRow& row = *rows[i];
    num_new_[i] = feed_->begin_prefill(row, feature_buf_);
    // The prompt processed so far: the chunk is its last n tokens.
    seqs_buf_[i] = abi_sequence(*row.seq, static_cast<int64_t>(row.start) + row.n);
  }
  specd_prefill_batch pb{};
  pb.struct_size = sizeof(pb);
  pb.num_seqs = static_cast<int32_t>(rows.size());
  pb.seqs = seqs_buf_.data();
  pb.num_new = num_new_.data();
  if (wants_hidden()) split_features(feature_buf_, pb.target_hidden, pb.target_aux_hidden);
  proposer_->on_prefill(pb);
  for (const sched::StepRow* row : rows) feed_->end_prefill(*row);
}

// ---- verify -----------------------------------------------------------------------------------

bool Speculator::verify(sched::StepBatch& batch) {
  if (!on()) return false;
  observe(batch);
  rows_.clear();
  for (sched::StepRow& row : batch.rows)
    if (row.drafted() && !row.failed()) rows_.push_back(&row);
  const bool verified = arms_->verify(rows_);
  observe_acceptance();
  // The policy's cost model learns the step's propose time, and the target's forward through
  // verification (sampling of the plain rows included): where the step executes, never the
  // engine thread's work that async scheduling overlaps.
  policy_->observe_step(batch, propose_s_, seconds_since(proposed_at_), policy_metrics_);
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
    // A tree's evidence is its accepted depth (acceptance per depth): 1 per accepted node, then
    // 0 for the depth it stopped at.
    const bool lossless =
        !row.tree() && arms_->arm(static_cast<size_t>(row.seq->arm)).verifier->capabilities().lossless != 0;
    int32_t n = std::min(row.num_accepted + 1, static_cast<int32_t>(row.drafts.size()));
    if (row.tree()) {  // a 0 at the depth it stopped at, unless the path ended at a leaf
      const int32_t end = row.num_accepted > 0 ? row.accepted_nodes.back() : -1;
      const bool stopped =
          std::find(row.draft_parents.begin(), row.draft_parents.end(), end) != row.draft_parents.end();
      n = row.num_accepted + (stopped ? 1 : 0);
    }
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
    if (wants_hidden() && row.drafted()) feed_->add_hidden(row, row.n + row.num_accepted);
    if (keeps_state_) {
      // The proposer hears of its own drafts only: accepted drafts the grammar forced are, to it,
      // tokens committed after them (which it catches up on as on any later step).
      const int32_t own = static_cast<int32_t>(row.drafts.size()) - row.num_forced;
      const int32_t accepted = std::min(row.num_accepted, own);
      const int32_t appended =
          accepted < row.num_accepted ? std::min(row.num_appended, accepted + 1) : row.num_appended;
      proposer_->on_accept(row.seq->id, accepted, {row.emitted.data(), static_cast<int64_t>(appended)});
    }
  } catch (const Error& e) {
    fail(row, "proposer on_accept", e);
  }
}

void Speculator::collect(ArmStepRecord& into, spec::PolicyMetrics& policy) {
  if (!on()) return;
  arms_->take_record(into);
  policy = policy_metrics_;
}

void Speculator::finish(const sched::Sequence& seq) {
  if (!on()) return;
  const specd_sequence s = abi_sequence(seq, static_cast<int64_t>(seq.tokens.size()));
  proposer_->on_finish(s);
}

std::vector<spec::ProposerSeries> Speculator::observations() const {
  std::vector<spec::ProposerSeries> out;
  if (!on()) return out;
  for (const plugin::ObservedSeries& s : proposer_->context().observations().snapshot())
    out.push_back({s.name, s.count, s.sum});
  return out;
}

void Speculator::release(sched::SeqId id) {
  if (!on()) return;
  feed_->release(id);
  policy_->release(id);
  if (keeps_state_) proposer_->on_release(id);
}

}  // namespace specd::speculative

#include "speculative/cost_model.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "kv/kv_cache.hpp"
#include "model/forward.hpp"
#include "model/llama.hpp"

namespace specd::speculative {
namespace {

// Target corrections: learning rate per knot, prior weight of the global correction (in
// observations), the most one observation may move a log-correction (a 2x outlier from a busy
// machine shifts the estimate by at most kRate * log 2), and the cap on a knot's weight.
constexpr double kRate = 0.1;
constexpr double kGlobalRate = 0.2;  // fast: a shared machine's load changes within seconds
constexpr double kGlobalWeight = 2.0;
constexpr double kMaxStep = 0.7;
constexpr double kMaxWeight = 50.0;
constexpr double kWarmWeight = 3.0;
// Propose fit: decay per observation (about the last 20 calls count) and ridge.
constexpr double kDecay = 0.95;
constexpr double kRidge = 1e-3;
// The per-token coefficient c leans harder towards 0: at batch 1 without catch-up every call has
// S = L, and the fit cannot tell a per-step cost from a per-token one. An even ridge split a
// 2-layer self-draft's ~3 ms forward half and half, priced a probe's catch-up of C tokens at
// C * 1.5 ms (really one forward, ~3 ms) and kept llama-160m plain for whole requests after one
// early rejection. With this ridge such a fit puts ~1% on c; any variation of S against L (a
// batch, a catch-up) still identifies c, as its data term is far larger.
constexpr double kTokenRidge = 0.1;
constexpr double kMinSeconds = 1e-9;
// Calibration: shapes of up to kRepeatedTokens tokens are timed in kCalibrationRounds rounds.
constexpr int kCalibrationRounds = 3;
constexpr int32_t kRepeatedTokens = 8;

// Minimises β'Aβ − 2β'b over β >= 0 for the small ridge system: tries every set of free
// coefficients (the others fixed at 0) and keeps the best solution that is non-negative.
template <size_t N>
std::array<double, N> nonnegative_solve(const std::array<double, N * N>& a, const std::array<double, N>& b) {
  std::array<double, N> best{};
  double best_obj = 0;  // β = 0
  for (unsigned mask = 1; mask < (1u << N); ++mask) {
    size_t idx[N];
    size_t n = 0;
    for (size_t i = 0; i < N; ++i)
      if (mask & (1u << i)) idx[n++] = i;
    // Gaussian elimination on the n x n subsystem (the ridge keeps it positive definite).
    double m[N][N + 1];
    for (size_t r = 0; r < n; ++r) {
      for (size_t c = 0; c < n; ++c) m[r][c] = a[idx[r] * N + idx[c]];
      m[r][n] = b[idx[r]];
    }
    bool ok = true;
    for (size_t p = 0; p < n && ok; ++p) {
      if (std::abs(m[p][p]) < 1e-30) {
        ok = false;
        break;
      }
      for (size_t r = p + 1; r < n; ++r) {
        const double f = m[r][p] / m[p][p];
        for (size_t c = p; c <= n; ++c) m[r][c] -= f * m[p][c];
      }
    }
    if (!ok) continue;
    std::array<double, N> beta{};
    for (size_t r = n; r-- > 0;) {
      double s = m[r][n];
      for (size_t c = r + 1; c < n; ++c) s -= m[r][c] * beta[idx[c]];
      beta[idx[r]] = s / m[r][r];
    }
    if (std::any_of(beta.begin(), beta.end(), [](double x) { return x < 0; })) continue;
    double obj = 0;
    for (size_t i = 0; i < N; ++i) {
      obj -= 2 * beta[i] * b[i];
      for (size_t j = 0; j < N; ++j) obj += beta[i] * a[i * N + j] * beta[j];
    }
    if (obj < best_obj) {
      best_obj = obj;
      best = beta;
    }
  }
  return best;
}

}  // namespace

CostModel::CostModel(int32_t max_tokens) {
  // 1, 2, 3, 4, 6, 8, 12, 16, ...: every power of two and 1.5 times it.
  for (int32_t p = 1;; p *= 2) {
    knots_.push_back({p});
    if (p >= max_tokens) break;
    if (p >= 2) knots_.push_back({p + p / 2});
    if (p + p / 2 >= max_tokens) break;
  }
  for (Knot& k : knots_) k.prior = 1.0;  // no calibration: every T costs the same
  refresh_scales();
}

void CostModel::set_target_prior(std::span<const TargetSample> samples) {
  std::vector<TargetSample> full;
  for (const TargetSample& s : samples)
    if (s.logit_rows == s.tokens && s.tokens > 0 && s.seconds > 0) full.push_back(s);
  std::sort(full.begin(), full.end(), [](const auto& a, const auto& b) { return a.tokens < b.tokens; });
  if (full.empty()) return;
  logit_row_s_ = 0;
  for (const TargetSample& s : samples) {
    if (s.logit_rows >= s.tokens || s.logit_rows < 1) continue;
    for (const TargetSample& f : full)
      if (f.tokens == s.tokens)
        logit_row_s_ = std::max(0.0, (f.seconds - s.seconds) / static_cast<double>(s.tokens - s.logit_rows));
  }
  auto at = [&](double t) {
    if (full.size() == 1 || t <= full.front().tokens) return full.front().seconds;
    size_t i = 1;
    while (i + 1 < full.size() && full[i].tokens < t) ++i;
    const TargetSample& lo = full[i - 1];
    const TargetSample& hi = full[i];
    const double slope = std::max(0.0, (hi.seconds - lo.seconds) / (hi.tokens - lo.tokens));
    return std::max(lo.seconds, lo.seconds + slope * (t - lo.tokens));
  };
  for (Knot& k : knots_) k = {k.tokens, at(k.tokens)};
  global_log_corr_ = 0;
  refresh_scales();
}

size_t CostModel::bracket(double tokens, double& lower_weight) const {
  if (tokens <= knots_.front().tokens) {
    lower_weight = 1;
    return 0;
  }
  size_t i = 1;
  while (i + 1 < knots_.size() && knots_[i].tokens < tokens) ++i;
  const double lo = knots_[i - 1].tokens, hi = knots_[i].tokens;
  lower_weight = std::clamp((hi - tokens) / (hi - lo), 0.0, 1.0);
  return i - 1;
}

double CostModel::prior_at(double tokens) const {
  const Knot& last = knots_.back();
  if (tokens > last.tokens) {
    const Knot& prev = knots_[knots_.size() - 2];
    const double slope = std::max(0.0, (last.prior - prev.prior) / (last.tokens - prev.tokens));
    return last.prior + slope * (tokens - last.tokens);
  }
  double w = 0;
  const size_t i = bracket(tokens, w);
  if (w >= 1) return knots_[i].prior;
  return w * knots_[i].prior + (1 - w) * knots_[i + 1].prior;
}

double CostModel::effective_log_correction(const Knot& k) const {
  return (k.weight * k.log_corr + kGlobalWeight * global_log_corr_) / (k.weight + kGlobalWeight);
}

double CostModel::log_correction_at(double tokens) const {
  auto eff = [&](const Knot& k) { return effective_log_correction(k); };
  double w = 0;
  const size_t i = bracket(tokens, w);
  if (w >= 1 || i + 1 >= knots_.size()) return eff(knots_[i]);
  return w * eff(knots_[i]) + (1 - w) * eff(knots_[i + 1]);
}

double CostModel::target_seconds(double tokens, double logit_rows) const {
  const double logit_less = tokens - logit_rows;
  const double base = std::max(kMinSeconds, prior_at(tokens) - logit_row_s_ * logit_less);
  double seconds = std::exp(log_correction_at(tokens)) * base;
  // More tokens never cost less: every knot at or below T, at its own correction, is a floor.
  // (Corrections are learned where steps ran; a well-measured small T must not look dearer than
  // a barely measured larger one, or the policy takes the extra tokens for free.)
  for (const Knot& k : knots_) {
    if (k.tokens > tokens) break;
    const double knot_base = std::max(kMinSeconds, k.prior - logit_row_s_ * std::max(0.0, k.tokens - logit_rows));
    seconds = std::max(seconds, k.scale * knot_base);
  }
  return seconds;
}

void CostModel::observe_target(int32_t tokens, int32_t logit_rows, double seconds) {
  if (tokens < 1 || seconds <= 0) return;
  const double base = std::max(kMinSeconds, prior_at(tokens) - logit_row_s_ * (tokens - logit_rows));
  const double r = std::log(seconds / base);
  double w = 0;
  const size_t i = bracket(tokens, w);
  const double weights[2] = {w, 1 - w};
  // The first step near a knot pays one-off costs of its shape (buffers, first touch): llama-160m
  // at batch 8 took 29-36 ms for its first T = 24 and 15-17 ms afterwards, and learned from, it
  // priced two drafts per row out for the rest of the request. It teaches nothing.
  bool first = false;
  for (size_t j = 0; j < 2 && i + j < knots_.size(); ++j) {
    if (weights[j] < 0.5 || knots_[i + j].shown) continue;
    knots_[i + j].shown = true;
    first = true;
  }
  if (first) return;
  global_log_corr_ += kGlobalRate * std::clamp(r - global_log_corr_, -kMaxStep, kMaxStep);
  for (size_t j = 0; j < 2 && i + j < knots_.size(); ++j) {
    Knot& k = knots_[i + j];
    if (weights[j] <= 0) continue;
    // A knot's first observations are averaged (the policy sees a new step shape at once); once
    // it has kWarmWeight of them, an EWMA with bounded steps.
    if (k.weight < kWarmWeight) {
      k.log_corr += weights[j] / (k.weight + weights[j]) * (r - k.log_corr);
    } else {
      k.log_corr += kRate * weights[j] * std::clamp(r - k.log_corr, -kMaxStep, kMaxStep);
    }
    k.weight = std::min(kMaxWeight, k.weight + weights[j]);
  }
  refresh_scales();
}

void CostModel::refresh_scales() {
  for (Knot& k : knots_) k.scale = std::exp(effective_log_correction(k));
}

double CostModel::propose_seconds(int32_t draft_steps, int32_t draft_tokens, double catch_up) const {
  if (draft_steps <= 0 || !propose_seen_) return 0;
  return beta_[0] + beta_[1] * this->draft_steps(draft_steps) + beta_[2] * (draft_tokens + catch_up);
}

void CostModel::observe_propose(int32_t draft_steps, int32_t draft_tokens, double seconds, int32_t catch_up) {
  if (draft_steps <= 0 || seconds < 0) return;
  constexpr size_t N = kProposeFeatures;
  const double x[N] = {1.0, static_cast<double>(this->draft_steps(draft_steps)),
                       static_cast<double>(draft_tokens + catch_up)};
  for (size_t i = 0; i < N; ++i) {
    for (size_t j = 0; j < N; ++j) xtx_[i * N + j] = kDecay * xtx_[i * N + j] + x[i] * x[j];
    xty_[i] = kDecay * xty_[i] + x[i] * seconds;
  }
  std::array<double, N* N> a = xtx_;
  for (size_t i = 0; i < N; ++i) a[i * N + i] += i + 1 == N ? kTokenRidge : kRidge;
  beta_ = nonnegative_solve<N>(a, xty_);
  propose_seen_ = true;
}

std::vector<TargetSample> calibrate_target(model::LlamaModel& model, kv::KvCache& kv, int32_t max_tokens,
                                           double budget_s) {
  using Clock = std::chrono::steady_clock;
  std::vector<TargetSample> samples;
  const kv::KvCache::Scratch scratch = kv.scratch();
  const kv::SeqId kSeq = scratch.id();
  const int64_t vocab = model.weights().config().vocab_size;
  std::vector<int32_t> tokens(static_cast<size_t>(std::max(max_tokens, 1)));
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<int32_t>((7 + 131 * i) % static_cast<size_t>(vocab));
  model::ForwardBatch fb;
  model::ForwardOutput out;
  const auto start = Clock::now();
  // Seconds of one forward of the first n tokens, or a negative value when the cache has no room.
  auto run = [&](int32_t n, model::LogitsMode mode) {
    if (!kv.reserve(kSeq, n)) return -1.0;
    fb.seqs = {{kSeq, std::span<const int32_t>(tokens).first(static_cast<size_t>(n)), mode}};
    const auto t0 = Clock::now();
    model.forward(fb, kv, out);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    kv.truncate(kSeq, 0);
    return s;
  };
  if (run(1, model::LogitsMode::kAll) < 0) return samples;  // warm-up: first touch of buffers
  double last = 0;
  for (int32_t n = 1; n <= max_tokens; n *= 2) {
    const double spent = std::chrono::duration<double>(Clock::now() - start).count();
    // Two forwards of 2T tokens cost at most about four of T: stop before the budget runs out.
    if (n > 1 && spent + 4 * last > budget_s) break;
    // The first forward of a shape pays for its first touch (larger activation buffers, new KV
    // pages): timed once, T = 16 and 32 came out at 2x what they cost from then on (32.7 and
    // 47.3 ms where steps took 16 and 25, llama-160m), and the policy never drafted 8 rows' worth.
    // The faster of two.
    const double t = run(n, model::LogitsMode::kAll);
    if (t < 0) break;
    const double again = run(n, model::LogitsMode::kAll);
    samples.push_back({n, n, again > 0 ? std::min(t, again) : t});
    last = samples.back().seconds;
  }
  if (samples.empty()) return samples;
  // The small shapes, which decide whether a few drafts pay, are cheap: the best of three rounds
  // over all of them. Interleaved rather than back to back: on a shared machine a neighbour that
  // starts mid-calibration slowed T >= 2 alone 2.5x (T = 1 had been timed before it), and the
  // policy, seeing drafts at 2.5x the price, never drafted.
  for (int round = 0; round < kCalibrationRounds - 1; ++round) {
    for (TargetSample& s : samples) {
      if (s.tokens > kRepeatedTokens) break;
      if (const double t = run(s.tokens, model::LogitsMode::kAll); t > 0) s.seconds = std::min(s.seconds, t);
    }
  }
  const int32_t largest = samples.back().tokens;
  if (largest > 1) {
    if (const double t = run(largest, model::LogitsMode::kLast); t > 0) samples.push_back({largest, 1, t});
  }
  return samples;
}

}  // namespace specd::speculative

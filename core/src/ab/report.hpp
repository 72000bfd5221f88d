// `specd ab report` (docs/ab-testing.md): statistics of A/B logs (speculative/ab_log.hpp), with
// 95% percentile-bootstrap intervals over requests.
//
// Per serving arm (completed requests only: finish stop or length):
//   acceptance rate          Σ accepted / Σ drafted
//   mean acceptance length   1 + Σ accepted / Σ verified steps
//   tokens per step          Σ generated tokens / Σ engine steps that emitted them
//   acceptance at position i Σ accepted at i / Σ drafted at i
//   TPOT, latency            p50 / p90 / p99 over requests
//   mean log p               quality: Σ log p / Σ tokens the verifier emitted (target
//                            probabilities after the request's sampling transforms)
// Per shadow arm S on the steps of serving arm A: the same acceptance statistics for what S
// would have accepted, the paired differences S − A on the same steps, the token disagreement
// (positions both emit where the tokens differ) and the shadow cost (S's verifier time / the
// steps' wall time).
// Differences between arms X and Y (Y − X, every verdict at 95%): paired ones from shadow data
// (both directions pooled: requests X served with Y shadowing, and Y served with X shadowing),
// and unpaired ones from the traffic split (each arm's own requests, resampled independently).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ab/bootstrap.hpp"
#include "speculative/ab_log.hpp"

namespace specd::ab {

struct ArmStats {
  std::string name;
  std::string verifier;
  bool lossless = false;
  int32_t k = 0;
  size_t requests = 0;  // completed
  size_t steps = 0;     // verified steps
  Estimate acceptance_rate, mean_acceptance_length, tokens_per_step, mean_logprob;
  Estimate tpot_p50, tpot_p90, tpot_p99, latency_p50, latency_p90, latency_p99;  // seconds
  std::vector<Estimate> acceptance_at;                                           // [position]
  std::vector<double> length_fraction;  // [a]: fraction of verified steps that accepted a drafts
  std::vector<double> tpot_sorted;      // seconds, for the CDF plot
};

// Shadow arm `arm` on the steps `serving` served.
struct ShadowStats {
  std::string arm;
  std::string serving;
  bool lossless = false;
  size_t requests = 0;
  size_t steps = 0;  // steps it verified
  Estimate acceptance_rate, mean_acceptance_length, mean_logprob;
  Estimate delta_acceptance_rate, delta_mean_acceptance_length;  // arm − serving, same steps
  Estimate disagreement;                                         // differing / compared tokens
  Estimate cost;                                                 // its verifier seconds / the steps' wall seconds
  std::vector<Estimate> acceptance_at;
  std::vector<double> length_fraction;
};

struct Difference {
  std::string metric;  // "acceptance rate", "TPOT p50 (s)", ...
  std::string a, b;    // the difference is b − a
  bool paired = false;
  size_t n = 0;  // requests (paired: requests with shadow data)
  Estimate delta;
  bool significant() const { return delta.excludes_zero(); }
};

struct Report {
  std::vector<std::string> files;
  size_t records = 0;
  size_t completed = 0;
  uint64_t seed = 0;
  int resamples = 0;            // used: fewer than asked when the log is large (kMaxDrawUnits)
  int requested_resamples = 0;  // asked (ReportOptions::resamples)
  std::vector<ArmStats> arms;
  std::vector<ShadowStats> shadows;
  std::vector<Difference> differences;
};

// The report's resampling is bounded: resamples x (units drawn + a call per interval) stays
// within max_draw_units (kMaxDrawUnits: 1-2 s on one core), so a log of many records, arms or
// shadow arms gets fewer resamples; below kMinResamples its intervals are left out (point
// estimates only). The report says which.
inline constexpr uint64_t kMaxDrawUnits = uint64_t{400} << 20;
struct ReportOptions {
  uint64_t seed = 1;
  int resamples = 2000;
  uint64_t max_draw_units = kMaxDrawUnits;
};
inline constexpr int kMinResamples = 100;

// Reads every line of every file (files in order); throws specd::Error naming file:line and the
// field for a malformed line, or a file that cannot be read.
std::vector<speculative::AbRecord> read_ab_logs(const std::vector<std::string>& files);

Report build_report(const std::vector<speculative::AbRecord>& records, const ReportOptions& options);

// The report for a terminal: the headline table, shadow arms, per-position acceptance,
// differences with verdicts.
std::string render_text(const Report& report);
// Everything in the report as one JSON document (indent 2).
std::string render_json(const Report& report);
// A self-contained HTML page (tables, verdicts and three Vega-Lite plots; Vega and Vega-Lite
// inlined, so it works offline). Throws specd::Error(kUnsupported) when this build has no Vega.
std::string render_html(const Report& report);

}  // namespace specd::ab

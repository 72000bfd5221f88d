// The text and JSON forms of the A/B report (report.hpp); the HTML form is report_html.cpp.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "ab/report.hpp"
#include "ab/report_common.hpp"

namespace specd::ab {

using nlohmann::json;

std::string format_estimate(const Estimate& e, const char* spec, double scale) {
  if (!e.valid()) return "-";
  if (!(e.lo == e.lo)) return fmt::format(fmt::runtime(spec), e.value * scale);
  return fmt::format(fmt::runtime(std::string(spec) + " [" + spec + ", " + spec + "]"), e.value * scale, e.lo * scale,
                     e.hi * scale);
}

std::string verdict(const Difference& d) {
  return d.significant() ? "significant at 95%" : "not significant at 95%";
}

std::vector<QualityLine> quality_lines(const Report& r) {
  std::vector<QualityLine> out;
  for (const ShadowStats& s : r.shadows) {
    const ArmStats* serving = nullptr;
    for (const ArmStats& a : r.arms)
      if (a.name == s.serving) serving = &a;
    if (serving == nullptr || s.lossless == serving->lossless) continue;  // a lossy arm against a lossless one
    const bool shadow_lossy = !s.lossless;
    out.push_back({shadow_lossy ? s.arm : s.serving, shadow_lossy ? s.serving : s.arm, &s,
                   shadow_lossy ? s.mean_logprob : serving->mean_logprob,
                   shadow_lossy ? serving->mean_logprob : s.mean_logprob});
  }
  return out;
}

namespace {

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

// Width of the arm name columns: the longest name and two spaces, at least 14.
size_t name_width(const Report& r) {
  size_t w = 12;
  for (const ArmStats& a : r.arms) w = std::max(w, a.name.size());
  return w + 2;
}

void arm_table(const Report& r, std::string& out) {
  const size_t w = name_width(r);
  out += pad("arm", w) + pad("verifier", 20) + pad("k", 3) + pad("requests", 9) + pad("steps", 7) +
         pad("acceptance rate", 24) + pad("mean accept length", 21) + pad("tokens/step", 21) +
         pad("TPOT p50 (ms)", 24) + pad("latency p50 (s)", 24) + "mean log p\n";
  for (const ArmStats& a : r.arms) {
    out += pad(a.name, w) + pad(a.verifier + (a.lossless ? "" : "*"), 20) + pad(std::to_string(a.k), 3) +
           pad(std::to_string(a.requests), 9) + pad(std::to_string(a.steps), 7) +
           pad(format_estimate(a.acceptance_rate, "{:.3f}"), 24) +
           pad(format_estimate(a.mean_acceptance_length, "{:.2f}"), 21) +
           pad(format_estimate(a.tokens_per_step, "{:.2f}"), 21) + pad(format_estimate(a.tpot_p50, "{:.1f}", 1e3), 24) +
           pad(format_estimate(a.latency_p50, "{:.2f}"), 24) + format_estimate(a.mean_logprob, "{:.3f}") + "\n";
  }
  out += "(* lossy verifier: sampled output does not follow the target distribution exactly)\n";
}

void shadow_table(const Report& r, std::string& out) {
  if (r.shadows.empty()) return;
  out +=
      "\nShadow arms: what each would have accepted on the serving arm's steps (same drafts, target "
      "probabilities and uniforms; nothing it decides is emitted)\n";
  const size_t w = name_width(r);
  out += pad("shadow", w) + pad("on steps of", w) + pad("steps", 7) + pad("acceptance rate", 24) +
         pad("mean accept length", 21) + pad("Δ rate vs serving", 27) + pad("Δ length vs serving", 24) +
         pad("token disagreement", 24) + "cost (% of step time)\n";
  for (const ShadowStats& s : r.shadows) {
    out += pad(s.arm, w) + pad(s.serving, w) + pad(std::to_string(s.steps), 7) +
           pad(format_estimate(s.acceptance_rate, "{:.3f}"), 24) +
           pad(format_estimate(s.mean_acceptance_length, "{:.2f}"), 21) +
           pad(format_estimate(s.delta_acceptance_rate, "{:+.3f}"), 27) +
           pad(format_estimate(s.delta_mean_acceptance_length, "{:+.2f}"), 24) +
           pad(format_estimate(s.disagreement, "{:.3f}"), 24) + format_estimate(s.cost, "{:.2f}", 100) + "\n";
  }
}

void position_table(const Report& r, std::string& out) {
  size_t positions = 0;
  for (const ArmStats& a : r.arms) positions = std::max(positions, a.acceptance_at.size());
  for (const ShadowStats& s : r.shadows) positions = std::max(positions, s.acceptance_at.size());
  if (positions == 0) return;
  const size_t w = 2 * name_width(r) + 12;  // "a (shadow on b)"
  out += "\nAcceptance by draft position\n" + pad("", w);
  for (size_t p = 0; p < positions; ++p) out += pad(std::to_string(p + 1), 22);
  out += "\n";
  auto row = [&](const std::string& name, const std::vector<Estimate>& at) {
    out += pad(name, w);
    for (size_t p = 0; p < positions; ++p) out += pad(p < at.size() ? format_estimate(at[p], "{:.3f}") : "-", 22);
    out += "\n";
  };
  for (const ArmStats& a : r.arms) row(a.name, a.acceptance_at);
  for (const ShadowStats& s : r.shadows) row(s.arm + " (shadow on " + s.serving + ")", s.acceptance_at);
}

void percentile_table(const Report& r, std::string& out) {
  const size_t w = name_width(r);
  out += "\nRequest percentiles\n" + pad("arm", w) + pad("TPOT p90 (ms)", 24) + pad("TPOT p99 (ms)", 24) +
         pad("latency p90 (s)", 24) + "latency p99 (s)\n";
  for (const ArmStats& a : r.arms) {
    out += pad(a.name, w) + pad(format_estimate(a.tpot_p90, "{:.1f}", 1e3), 24) +
           pad(format_estimate(a.tpot_p99, "{:.1f}", 1e3), 24) + pad(format_estimate(a.latency_p90, "{:.2f}"), 24) +
           format_estimate(a.latency_p99, "{:.2f}") + "\n";
  }
}

json estimate_json(const Estimate& e) {
  auto num = [](double x) { return std::isnan(x) ? json(nullptr) : json(x); };
  return {{"value", num(e.value)}, {"lo", num(e.lo)}, {"hi", num(e.hi)}};
}

json estimates_json(const std::vector<Estimate>& v) {
  json out = json::array();
  for (const Estimate& e : v) out.push_back(estimate_json(e));
  return out;
}

}  // namespace

std::string resampling_note(const Report& r) {
  if (r.resamples >= r.requested_resamples) return "";
  if (r.resamples == 0)
    return fmt::format(
        "; intervals left out: {} resamples of a log this large would take too long, fewer than {} are too few",
        r.requested_resamples, kMinResamples);
  return fmt::format(" of the {} asked, to bound the report's time on a log this large", r.requested_resamples);
}

std::string render_text(const Report& r) {
  std::string out = fmt::format(
      "A/B report: {} records, {} completed; 95% intervals: percentile bootstrap over requests ({} resamples{}, "
      "seed {})\n\n",
      r.records, r.completed, r.resamples, resampling_note(r), r.seed);
  arm_table(r, out);
  shadow_table(r, out);
  for (const QualityLine& q : quality_lines(r)) {
    out += fmt::format(
        "quality: {} emits a different token than {} at {} of the positions both emit ({} shadow "
        "steps); mean log p of emitted tokens {} vs {}\n",
        q.lossy, q.lossless, format_estimate(q.shadow->disagreement, "{:.3f}"), q.shadow->steps,
        format_estimate(q.lossy_logprob, "{:.3f}"), format_estimate(q.lossless_logprob, "{:.3f}"));
  }
  position_table(r, out);
  percentile_table(r, out);
  if (!r.differences.empty()) out += "\nDifferences (b − a), 95% bootstrap intervals\n";
  for (const Difference& d : r.differences) {
    out +=
        fmt::format("  {} − {}: {} {} ({}, {} requests): {}\n", d.b, d.a, d.metric, format_estimate(d.delta, "{:+.4f}"),
                    d.paired ? "paired, shadow data" : "unpaired, traffic split", d.n, verdict(d));
  }
  return out;
}

std::string render_json(const Report& r) {
  json arms = json::array();
  for (const ArmStats& a : r.arms) {
    arms.push_back(
        {{"arm", a.name},
         {"verifier", a.verifier},
         {"lossless", a.lossless},
         {"k", a.k},
         {"requests", a.requests},
         {"steps", a.steps},
         {"acceptance_rate", estimate_json(a.acceptance_rate)},
         {"mean_acceptance_length", estimate_json(a.mean_acceptance_length)},
         {"tokens_per_step", estimate_json(a.tokens_per_step)},
         {"mean_logprob", estimate_json(a.mean_logprob)},
         {"tpot_s",
          {{"p50", estimate_json(a.tpot_p50)}, {"p90", estimate_json(a.tpot_p90)}, {"p99", estimate_json(a.tpot_p99)}}},
         {"latency_s",
          {{"p50", estimate_json(a.latency_p50)},
           {"p90", estimate_json(a.latency_p90)},
           {"p99", estimate_json(a.latency_p99)}}},
         {"acceptance_at", estimates_json(a.acceptance_at)},
         {"accepted_length_fraction", a.length_fraction}});
  }
  json shadows = json::array();
  for (const ShadowStats& s : r.shadows) {
    shadows.push_back({{"arm", s.arm},
                       {"serving_arm", s.serving},
                       {"lossless", s.lossless},
                       {"requests", s.requests},
                       {"steps", s.steps},
                       {"acceptance_rate", estimate_json(s.acceptance_rate)},
                       {"mean_acceptance_length", estimate_json(s.mean_acceptance_length)},
                       {"mean_logprob", estimate_json(s.mean_logprob)},
                       {"delta_acceptance_rate", estimate_json(s.delta_acceptance_rate)},
                       {"delta_mean_acceptance_length", estimate_json(s.delta_mean_acceptance_length)},
                       {"token_disagreement", estimate_json(s.disagreement)},
                       {"cost_fraction_of_step", estimate_json(s.cost)},
                       {"acceptance_at", estimates_json(s.acceptance_at)},
                       {"accepted_length_fraction", s.length_fraction}});
  }
  json diffs = json::array();
  for (const Difference& d : r.differences) {
    diffs.push_back({{"metric", d.metric},
                     {"a", d.a},
                     {"b", d.b},
                     {"paired", d.paired},
                     {"requests", d.n},
                     {"delta", estimate_json(d.delta)},
                     {"significant", d.significant()}});
  }
  const json j = {{"records", r.records},
                  {"completed", r.completed},
                  {"bootstrap",
                   {{"resamples", r.resamples},
                    {"requested_resamples", r.requested_resamples},
                    {"seed", r.seed},
                    {"confidence", 0.95}}},
                  {"arms", arms},
                  {"shadows", shadows},
                  {"differences", diffs}};
  return j.dump(2);
}

}  // namespace specd::ab

// The HTML form of the A/B report: one self-contained page (no network access needed) with the
// headline tables, the verdicts and three plots drawn by Vega-Lite in the browser:
//   #plot-position  acceptance by draft position per arm and shadow arm, with 95% intervals
//   #plot-length    histogram of accepted drafts per verified step
//   #plot-tpot      CDF of the requests' time per output token per arm
// Why Vega-Lite: a plot is a small declarative JSON spec next to its data (what the report
// already computes), it draws SVG with axes, legends and tooltips, and its two minified files
// inline into the page, so the report stays one file that opens offline. After drawing, the
// page sets <body data-plots="3"> (or data-errors="...") and says so in #render-status; the
// browser test reads those.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>

#include "ab/report.hpp"
#include "ab/report_common.hpp"
#include "ab/vega_assets.hpp"
#include "specd/error.hpp"

namespace specd::ab {
namespace {

using nlohmann::json;

std::string escape_html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// JavaScript placed inside <script>: "</script" (any case) would end the element early. It can
// only occur inside a JS string or regular expression, where "<\/" means the same.
std::string escape_script(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    out += s[i];
    if (s[i] != '<' || s.size() - i < 8 || s[i + 1] != '/') continue;
    bool close = true;
    for (size_t j = 2; close && j < 8; ++j) close = std::tolower(static_cast<unsigned char>(s[i + j])) == "</script"[j];
    if (close) out += '\\';
  }
  return out;
}

// JSON placed inside <script>: every '<' (only ever inside JSON strings) written as \u003c.
std::string escape_json(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

json estimate_point(const std::string& series, size_t position, const Estimate& e) {
  return {{"series", series}, {"position", position + 1}, {"rate", e.value}, {"lo", e.lo}, {"hi", e.hi}};
}

json plot_specs(const Report& r) {
  json position = json::array(), length = json::array(), tpot = json::array();
  auto add_series = [&](const std::string& name, const std::vector<Estimate>& at, const std::vector<double>& frac) {
    for (size_t p = 0; p < at.size(); ++p)
      if (at[p].valid() && at[p].lo == at[p].lo) position.push_back(estimate_point(name, p, at[p]));
    for (size_t a = 0; a < frac.size(); ++a)
      length.push_back({{"series", name}, {"accepted", a}, {"fraction", frac[a]}});
  };
  for (const ArmStats& a : r.arms) {
    add_series(a.name, a.acceptance_at, a.length_fraction);
    for (size_t i = 0; i < a.tpot_sorted.size(); ++i)
      tpot.push_back({{"arm", a.name},
                      {"tpot_ms", a.tpot_sorted[i] * 1e3},
                      {"cdf", static_cast<double>(i + 1) / static_cast<double>(a.tpot_sorted.size())}});
  }
  for (const ShadowStats& s : r.shadows)
    add_series(s.arm + " (shadow on " + s.serving + ")", s.acceptance_at, s.length_fraction);
  const json color = {{"field", "series"}, {"type", "nominal"}, {"title", "arm"}};
  json specs;
  specs["plot-position"] = {
      {"title", "Acceptance by draft position (95% intervals)"},
      {"width", 560},
      {"height", 280},
      {"data", {{"values", position}}},
      {"encoding",
       {{"x", {{"field", "position"}, {"type", "ordinal"}, {"title", "draft position"}}}, {"color", color}}},
      {"layer",
       json::array({{{"mark", {{"type", "line"}, {"point", true}}},
                     {"encoding",
                      {{"y",
                        {{"field", "rate"},
                         {"type", "quantitative"},
                         {"title", "acceptance rate"},
                         {"scale", {{"domain", {0, 1}}}}}},
                       {"tooltip", json::array({{{"field", "series"}},
                                                {{"field", "position"}},
                                                {{"field", "rate"}, {"format", ".3f"}},
                                                {{"field", "lo"}, {"format", ".3f"}},
                                                {{"field", "hi"}, {"format", ".3f"}}})}}}},
                    {{"mark", "rule"},
                     {"encoding", {{"y", {{"field", "lo"}, {"type", "quantitative"}}}, {"y2", {{"field", "hi"}}}}}}})}};
  specs["plot-length"] = {
      {"title", "Accepted drafts per verified step"},
      {"width", 560},
      {"height", 280},
      {"data", {{"values", length}}},
      {"mark", "bar"},
      {"encoding",
       {{"x", {{"field", "accepted"}, {"type", "ordinal"}, {"title", "drafts accepted in one step"}}},
        {"xOffset", {{"field", "series"}, {"type", "nominal"}}},
        {"y",
         {{"field", "fraction"},
          {"type", "quantitative"},
          {"title", "fraction of steps"},
          {"axis", {{"format", "%"}}}}},
        {"color", color},
        {"tooltip",
         json::array({{{"field", "series"}}, {{"field", "accepted"}}, {{"field", "fraction"}, {"format", ".1%"}}})}}}};
  specs["plot-tpot"] = {{"title", "Time per output token: CDF over requests"},
                        {"width", 560},
                        {"height", 280},
                        {"data", {{"values", tpot}}},
                        {"mark", {{"type", "line"}, {"interpolate", "step-after"}, {"point", true}}},
                        {"encoding",
                         {{"x",
                           {{"field", "tpot_ms"},
                            {"type", "quantitative"},
                            {"title", "time per output token (ms)"},
                            {"scale", {{"zero", false}}}}},
                          {"y",
                           {{"field", "cdf"},
                            {"type", "quantitative"},
                            {"title", "fraction of requests"},
                            {"scale", {{"domain", {0, 1}}}}}},
                          {"color", {{"field", "arm"}, {"type", "nominal"}}},
                          {"tooltip", json::array({{{"field", "arm"}},
                                                   {{"field", "tpot_ms"}, {"format", ".2f"}},
                                                   {{"field", "cdf"}, {"format", ".2f"}}})}}}};
  return specs;
}

std::string td(const std::string& s) {
  return "<td>" + escape_html(s) + "</td>";
}

std::string tables(const Report& r) {
  std::string h =
      "<h2>Arms</h2><table><tr><th>arm</th><th>verifier</th><th>k</th><th>requests</th><th>steps</th>"
      "<th>acceptance rate</th><th>mean acceptance length</th><th>tokens / step</th>"
      "<th>TPOT p50 / p90 / p99 (ms)</th><th>latency p50 / p90 / p99 (s)</th><th>mean log p</th></tr>";
  for (const ArmStats& a : r.arms) {
    h += "<tr>" + td(a.name) + td(a.verifier + (a.lossless ? "" : " (lossy)")) + td(std::to_string(a.k)) +
         td(std::to_string(a.requests)) + td(std::to_string(a.steps)) +
         td(format_estimate(a.acceptance_rate, "{:.3f}")) + td(format_estimate(a.mean_acceptance_length, "{:.2f}")) +
         td(format_estimate(a.tokens_per_step, "{:.2f}")) +
         td(format_estimate(a.tpot_p50, "{:.1f}", 1e3) + " / " + format_estimate(a.tpot_p90, "{:.1f}", 1e3) + " / " +
            format_estimate(a.tpot_p99, "{:.1f}", 1e3)) +
         td(format_estimate(a.latency_p50, "{:.2f}") + " / " + format_estimate(a.latency_p90, "{:.2f}") + " / " +
            format_estimate(a.latency_p99, "{:.2f}")) +
         td(format_estimate(a.mean_logprob, "{:.3f}")) + "</tr>";
  }
  h += "</table>";
  if (!r.shadows.empty()) {
    h += "<h2>Shadow arms</h2><p>What each shadow arm would have accepted on the serving arm's steps: the same drafts, "
         "target probabilities and uniforms; nothing it decides is emitted.</p><table><tr><th>shadow arm</th>"
         "<th>on steps of</th><th>steps</th><th>acceptance rate</th><th>mean acceptance length</th>"
         "<th>&Delta; rate vs serving</th><th>&Delta; length vs serving</th><th>token disagreement</th>"
         "<th>cost (% of step time)</th></tr>";
    for (const ShadowStats& s : r.shadows) {
      h += "<tr>" + td(s.arm) + td(s.serving) + td(std::to_string(s.steps)) +
           td(format_estimate(s.acceptance_rate, "{:.3f}")) + td(format_estimate(s.mean_acceptance_length, "{:.2f}")) +
           td(format_estimate(s.delta_acceptance_rate, "{:+.3f}")) +
           td(format_estimate(s.delta_mean_acceptance_length, "{:+.2f}")) +
           td(format_estimate(s.disagreement, "{:.3f}")) + td(format_estimate(s.cost, "{:.2f}", 100)) + "</tr>";
    }
    h += "</table>";
  }
  const std::vector<QualityLine> quality = quality_lines(r);
  if (!quality.empty()) h += "<h2>Quality of lossy arms</h2><ul>";
  for (const QualityLine& q : quality) {
    h += "<li>" + escape_html(q.lossy) + " emits a different token than " + escape_html(q.lossless) + " at " +
         escape_html(format_estimate(q.shadow->disagreement, "{:.3f}")) + " of the positions both emit (" +
         std::to_string(q.shadow->steps) + " shadow steps); mean log p of emitted tokens " +
         escape_html(format_estimate(q.lossy_logprob, "{:.3f}")) + " vs " +
         escape_html(format_estimate(q.lossless_logprob, "{:.3f}")) + "</li>";
  }
  if (!quality.empty()) h += "</ul>";
  if (!r.differences.empty())
    h += "<h2>Differences (b &minus; a)</h2><table><tr><th>b &minus; a</th><th>metric</th>"
         "<th>difference [95% interval]</th><th>data</th><th>verdict</th></tr>";
  for (const Difference& d : r.differences) {
    h += "<tr>" + td(d.b + " − " + d.a) + td(d.metric) + td(format_estimate(d.delta, "{:+.4f}")) +
         td(std::string(d.paired ? "paired (shadow), " : "unpaired (split), ") + std::to_string(d.n) + " requests") +
         "<td class=\"" + (d.significant() ? "sig" : "nosig") + "\">" + verdict(d) + "</td></tr>";
  }
  if (!r.differences.empty()) h += "</table>";
  return h;
}

constexpr const char* kStyle = R"(body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f3f3f3}.sig{color:#0a6b0a;font-weight:600}.nosig{color:#666}.plot{margin:12px 0}
#render-status{color:#555;font-style:italic}#render-status.error{color:#b00;font-style:normal;font-weight:600})";

// Registered first so that an error in any later script is reported on the page.
constexpr const char* kErrorHook = R"(window.specdPlotErrors=[];window.addEventListener('error',function(e){
window.specdPlotErrors.push(String(e.message||e));var s=document.getElementById('render-status');
document.body.dataset.errors=window.specdPlotErrors.join(' | ');if(s){s.className='error';
s.textContent='Plot errors: '+window.specdPlotErrors.join('; ');}});)";

constexpr const char* kRender = R"((function(){var specs=JSON.parse(document.getElementById('plot-specs').textContent);
var status=document.getElementById('render-status');var drawn=0;
function fail(err){window.specdPlotErrors.push(String(err&&err.message||err));
document.body.dataset.errors=window.specdPlotErrors.join(' | ');status.className='error';
status.textContent='Plot errors: '+window.specdPlotErrors.join('; ');}
Promise.all(Object.keys(specs).map(function(id){var vg=vegaLite.compile(specs[id]).spec;
var view=new vega.View(vega.parse(vg),{renderer:'svg',container:'#'+id,hover:true});
return view.runAsync().then(function(){drawn+=1;});})).then(function(){
if(window.specdPlotErrors.length)return;document.body.dataset.plots=String(drawn);
status.textContent=drawn+' plots drawn with Vega '+vega.version+' and Vega-Lite '+vegaLite.version+'.';},fail);})();)";

}  // namespace

std::string render_html(const Report& r) {
  const VegaAssets* vega = vega_assets();
  if (vega == nullptr)
    throw Error(ErrorCode::kUnsupported,
                "--html: this specd was built without Vega-Lite (tools/node_modules had no vega packages when it was "
                "configured); run scripts/bootstrap.sh and reconfigure, or use --json");
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>specd A/B report</title><style>";
  h += kStyle;
  h += "</style><script>";
  h += kErrorHook;
  h += "</script></head><body><h1>specd A/B report</h1>";
  h += fmt::format(
      "<p>{} records, {} completed. Intervals: 95% percentile bootstrap over requests ({} resamples{}, "
      "seed {}). Plots by Vega {} and Vega-Lite {} (BSD-3-Clause, inlined).</p>",
      r.records, r.completed, r.resamples, escape_html(resampling_note(r)), r.seed, vega->vega_version,
      vega->vega_lite_version);
  h += tables(r);
  h += "<h2>Plots</h2><p id=\"render-status\">Drawing plots&hellip;</p>";
  h += "<div class=\"plot\" id=\"plot-position\"></div><div class=\"plot\" id=\"plot-length\"></div>"
       "<div class=\"plot\" id=\"plot-tpot\"></div>";
  h += "<script type=\"application/json\" id=\"plot-specs\">" + escape_json(plot_specs(r).dump()) + "</script>";
  h += "<script>" + escape_script(vega->vega) + "</script>";
  h += "<script>" + escape_script(vega->vega_lite) + "</script>";
  h += "<script>";
  h += kRender;
  h += "</script></body></html>\n";
  return h;
}

}  // namespace specd::ab

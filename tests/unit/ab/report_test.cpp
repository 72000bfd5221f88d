// A/B report statistics (ab/report.hpp) on synthetic logs whose answer is known.
#include "ab/report.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ab/bootstrap.hpp"

using specd::ab::Bootstrap;
using specd::ab::Estimate;
using specd::speculative::AbRecord;
using specd::speculative::AbShadowTrace;

namespace {

// A request of `arm` with `steps` verified steps of k = 4 drafts, accepting a_i ~ Binomial-ish
// from rng; with `shadow`, a shadow arm that accepts `shadow_gain` more per step (capped at 4).
AbRecord request(uint64_t id, const std::string& arm, std::mt19937_64& rng, const std::string& shadow = "",
                 int shadow_gain = 0) {
  AbRecord r;
  r.id = id;
  r.arm = arm;
  r.verifier = arm == "typical" ? "typical_acceptance" : "rejection";
  r.lossless = arm != "typical";
  r.assigned = "random";
  r.finish = "length";
  r.temperature = 1;
  r.k = 4;
  const int steps = 5 + static_cast<int>(rng() % 10);
  AbShadowTrace s;
  s.arm = shadow;
  s.verifier = "typical_acceptance";
  s.k = 4;
  for (int i = 0; i < steps; ++i) {
    const int a = static_cast<int>(rng() % 3);
    r.drafted.push_back(4);
    r.accepted.push_back(a);
    s.drafted.push_back(4);
    s.accepted.push_back(std::min(4, a + shadow_gain));
    s.compared_tokens += std::min(a, a + shadow_gain) + 1;
    s.differing_tokens += shadow_gain != 0;
    r.generated_tokens += a + 1;
  }
  r.decode_steps = steps + 1;
  r.tpot_s = 0.01 + 0.001 * static_cast<double>(rng() % 5);
  r.latency_s = r.tpot_s * r.generated_tokens;
  r.step_s = 0.01 * steps;
  s.verify_s = 0.0001 * steps;
  r.logprob_sum = -1.0 * r.generated_tokens;
  r.logprob_tokens = r.generated_tokens;
  if (!shadow.empty()) r.shadows.push_back(s);
  return r;
}

const specd::ab::Difference* find(const specd::ab::Report& rep, const std::string& metric, bool paired) {
  for (const auto& d : rep.differences)
    if (d.metric == metric && d.paired == paired) return &d;
  return nullptr;
}

}  // namespace

TEST(Bootstrap, QuantileAndSeededIntervals) {
  std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(specd::ab::quantile(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(specd::ab::quantile(v, 1.0), 4.0);
  const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto mean = [&](std::span<const uint32_t> idx) {
    double s = 0;
    for (uint32_t i : idx) s += x[i];
    return s / static_cast<double>(idx.size());
  };
  const Estimate a = Bootstrap(5, 500).interval("m", x.size(), mean);
  const Estimate b = Bootstrap(5, 500).interval("m", x.size(), mean);
  EXPECT_DOUBLE_EQ(a.value, 5.5);
  EXPECT_EQ(a.lo, b.lo);
  EXPECT_EQ(a.hi, b.hi);
  EXPECT_LT(a.lo, 5.5);
  EXPECT_GT(a.hi, 5.5);
  EXPECT_FALSE(a.excludes_zero() && a.lo < 0);
}

TEST(AbReport, PairedDifferenceFromShadowDataIsExactAndSignificant) {
  std::mt19937_64 rng(3);
  std::vector<AbRecord> records;
  for (uint64_t id = 1; id <= 40; ++id) records.push_back(request(id, "rejection", rng, "typical", 1));
  for (uint64_t id = 41; id <= 80; ++id) records.push_back(request(id, "typical", rng));
  const specd::ab::Report rep = specd::ab::build_report(records, {1, 500});
  ASSERT_EQ(rep.arms.size(), 2u);
  ASSERT_EQ(rep.shadows.size(), 1u);
  EXPECT_EQ(rep.shadows[0].arm, "typical");
  EXPECT_EQ(rep.shadows[0].serving, "rejection");
  // Accepted lengths 0..2, +1 each step, none capped: exactly +1 per step.
  EXPECT_DOUBLE_EQ(rep.shadows[0].delta_mean_acceptance_length.value, 1.0);
  const auto* paired = find(rep, "mean acceptance length", true);
  ASSERT_NE(paired, nullptr);
  EXPECT_EQ(paired->a, "rejection");
  EXPECT_EQ(paired->b, "typical");
  EXPECT_DOUBLE_EQ(paired->delta.lo, 1.0);
  EXPECT_DOUBLE_EQ(paired->delta.hi, 1.0);
  EXPECT_TRUE(paired->significant());
  EXPECT_GT(rep.shadows[0].cost.value, 0.0);
  EXPECT_NEAR(rep.shadows[0].cost.value, 0.01, 1e-9);
  const std::string text = specd::ab::render_text(rep);
  EXPECT_NE(text.find("typical − rejection: mean acceptance length +1.0000 [+1.0000, +1.0000] (paired, shadow data"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("quality: typical emits a different token than rejection"), std::string::npos) << text;
  const auto j = nlohmann::json::parse(specd::ab::render_json(rep));
  EXPECT_EQ(j["arms"].size(), 2u);
  EXPECT_EQ(j["shadows"][0]["serving_arm"], "rejection");
}

TEST(AbReport, SameDistributionUnpairedDifferencesAreNotSignificant) {
  std::mt19937_64 rng(11);
  std::vector<AbRecord> records;
  for (uint64_t id = 1; id <= 120; ++id) records.push_back(request(id, id % 2 ? "x" : "y", rng));
  const specd::ab::Report rep = specd::ab::build_report(records, {1, 1000});
  ASSERT_FALSE(rep.differences.empty());
  for (const auto& d : rep.differences) {
    EXPECT_FALSE(d.paired);
    EXPECT_LE(d.delta.lo, 0.0) << d.metric;
    EXPECT_GE(d.delta.hi, 0.0) << d.metric;
  }
}

TEST(AbReport, IncompleteRequestsAreCountedButNotMeasured) {
  std::mt19937_64 rng(1);
  std::vector<AbRecord> records = {request(1, "x", rng), request(2, "x", rng)};
  records[1].finish = "error";
  const specd::ab::Report rep = specd::ab::build_report(records, {1, 200});
  EXPECT_EQ(rep.records, 2u);
  EXPECT_EQ(rep.completed, 1u);
  ASSERT_EQ(rep.arms.size(), 1u);
  EXPECT_EQ(rep.arms[0].requests, 1u);
}

// Up to 8 arms every pair is compared; with more, each arm against the one that served the most
// requests, so a log with 1,000 arms costs 999 comparisons rather than half a million.
TEST(AbReport, ManyArmsAreComparedWithTheMostServedOne) {
  for (const int arms : {8, 30}) {
    std::mt19937_64 rng(5);
    std::vector<AbRecord> records;
    uint64_t id = 0;
    for (int a = 0; a < arms; ++a) records.push_back(request(++id, "arm" + std::to_string(100 + a), rng));
    for (int extra = 0; extra < 3; ++extra) records.push_back(request(++id, "arm107", rng));
    const specd::ab::Report rep = specd::ab::build_report(records, {1, 50});
    std::set<std::pair<std::string, std::string>> pairs;
    for (const auto& d : rep.differences) pairs.insert({d.a, d.b});
    if (arms == 8) {
      EXPECT_EQ(pairs.size(), 8u * 7u / 2u);
    } else {
      EXPECT_EQ(pairs.size(), static_cast<size_t>(arms - 1));
      for (const auto& [a, b] : pairs) EXPECT_TRUE(a == "arm107" || b == "arm107") << a << " vs " << b;
    }
  }
}

// The report's resampling is bounded by max_draw_units (kMaxDrawUnits): a small log keeps
// every resample asked; 20,000 requests get fewer (and say so); where even kMinResamples do not
// fit, the report has point estimates without intervals (and says so). 20,000 requests took over
// 10 s with every resample.
TEST(AbReport, ResamplingIsBoundedAndTheReportSaysSo) {
  std::mt19937_64 rng(9);
  std::vector<AbRecord> small, large;
  for (uint64_t id = 1; id <= 40; ++id) small.push_back(request(id, id % 2 ? "rejection" : "typical", rng));
  for (uint64_t id = 1; id <= 20000; ++id) large.push_back(request(id, id % 2 ? "rejection" : "typical", rng));

  const specd::ab::Report s = specd::ab::build_report(small, {1, 2000});
  EXPECT_EQ(s.resamples, 2000);
  EXPECT_EQ(s.requested_resamples, 2000);
  EXPECT_EQ(specd::ab::render_text(s).find("asked"), std::string::npos);

  const specd::ab::Report l = specd::ab::build_report(large, {1, 2000});
  EXPECT_GE(l.resamples, specd::ab::kMinResamples);
  EXPECT_LT(l.resamples, 2000);
  ASSERT_EQ(l.arms.size(), 2u);
  EXPECT_TRUE(std::isfinite(l.arms[0].acceptance_rate.lo));
  EXPECT_NE(specd::ab::render_text(l).find(std::to_string(l.resamples) + " resamples of the 2000 asked"),
            std::string::npos);
  EXPECT_NE(specd::ab::render_json(l).find("\"requested_resamples\": 2000"), std::string::npos);

  // The same 40 requests where one resample costs more than max_draw_units / kMinResamples.
  const specd::ab::Report m = specd::ab::build_report(small, {1, 2000, 1000});
  EXPECT_EQ(m.resamples, 0);
  ASSERT_EQ(m.arms.size(), 2u);
  EXPECT_DOUBLE_EQ(m.arms[0].acceptance_rate.value, s.arms[0].acceptance_rate.value);
  EXPECT_TRUE(std::isnan(m.arms[0].acceptance_rate.lo));
  EXPECT_NE(specd::ab::render_text(m).find("intervals left out"), std::string::npos);
}

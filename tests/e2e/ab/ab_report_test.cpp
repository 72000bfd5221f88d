// The A/B report on logs from a real engine: an A/A test finds no difference, a real A/B
// difference is significant, `specd ab run` writes the log, and the HTML report renders its
// three plots in headless chromium without script errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "ab_test_util.hpp"

namespace {

using specd::ab_test::ab_config;
using specd::ab_test::run_ab;
using specd::ab_test::sampled_requests;
using specd::ab_test::work_dir;
namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// stdout to `out`; stderr (the logs) too, unless `err` names another file.
int run_cli(const std::string& args, const fs::path& out, const fs::path& err = {}) {
  const std::string to_err = err.empty() ? " 2>&1" : " 2> " + err.string();
  return std::system((std::string(SPECD_CLI_PATH) + " " + args + " > " + out.string() + to_err).c_str());
}

// Two arms with the same verifier, traffic split by the seeded draw, shadowing each other:
// every difference the report gives (paired and unpaired) has an interval containing 0, except
// the times (TPOT, latency), which measure the machine and each request's place in the batch,
// not the verifier: requests of one run share the engine, so an unpaired time difference can
// be real (one arm's requests were admitted first). The times are checked for validity only.
TEST(AbReportE2E, AATestFindsNoDifference) {
  const auto run = run_ab(
      ab_config("[{name: a, verifier: rejection}, {name: b, verifier: rejection}]", "all", work_dir() / "aa.jsonl"),
      sampled_requests(48, 1.0f, 24, 100));
  ASSERT_EQ(run.records.size(), 48u);
  const specd::ab::Report rep = specd::ab::build_report(run.records, {7, 2000});
  ASSERT_EQ(rep.arms.size(), 2u);
  EXPECT_GT(rep.arms[0].requests, 10u);
  EXPECT_GT(rep.arms[1].requests, 10u);
  size_t paired = 0;
  for (const auto& d : rep.differences) {
    ASSERT_TRUE(d.delta.valid()) << d.metric;
    if (!d.paired && d.metric.find("(s)") != std::string::npos) continue;  // a time
    EXPECT_LE(d.delta.lo, 0.0) << d.metric << (d.paired ? " (paired)" : " (unpaired)");
    EXPECT_GE(d.delta.hi, 0.0) << d.metric << (d.paired ? " (paired)" : " (unpaired)");
    EXPECT_FALSE(d.significant());
    if (d.paired) {
      ++paired;
      EXPECT_EQ(d.delta.value, 0.0) << "same verifier, same uniforms: identical decisions";
    }
  }
  EXPECT_EQ(paired, 2u);
  EXPECT_GE(rep.differences.size(), 8u);
}

// Typical acceptance accepts drafts rejection sampling would reject when p is flat (temperature
// 1 on the random fixture): the paired difference in acceptance is significant, and so is the
// token disagreement that the quality column reports.
TEST(AbReportE2E, RealDifferenceIsSignificant) {
  const auto run = run_ab(ab_config("[{name: rejection, verifier: rejection}, {name: typical, verifier: "
                                    "typical_acceptance}]",
                                    "all", work_dir() / "ab.jsonl"),
                          sampled_requests(24, 1.0f, 24, 300));
  const specd::ab::Report rep = specd::ab::build_report(run.records, {1, 2000});
  bool found = false;
  for (const auto& d : rep.differences) {
    if (!d.paired || d.metric != "mean acceptance length") continue;
    found = true;
    EXPECT_EQ(d.a, "rejection");
    EXPECT_EQ(d.b, "typical");
    EXPECT_GT(d.delta.value, 0.0);
    EXPECT_TRUE(d.significant()) << d.delta.value << " [" << d.delta.lo << ", " << d.delta.hi << "]";
  }
  EXPECT_TRUE(found);
  const std::string text = specd::ab::render_text(rep);
  EXPECT_NE(text.find("typical − rejection: mean acceptance length"), std::string::npos) << text;
  EXPECT_NE(text.find("(paired, shadow data, 24 requests): significant at 95%"), std::string::npos) << text;
  EXPECT_NE(text.find("quality: typical emits a different token than rejection"), std::string::npos) << text;
}

// `specd ab run` over a prompt file, `specd ab report --json` and `--html`; the page renders in
// headless chromium with its three plots drawn and no script error.
TEST(AbReportE2E, AbRunAndHtmlReportRenderInChromium) {
  const fs::path dir = work_dir() / "cli";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path config = dir / "ab.yaml";
  std::ofstream(config) << "model:\n  path: " << specd::spec_test::target_fixture(false, 0.02).string()
                        << "\n  num_threads: 1\nkv_cache:\n  memory_mib: 64\nspeculative:\n"
                        << "  num_speculative_tokens: 3\n  proposer: {name: draft_model, layers: 1}\n"
                        << "  arms:\n    - {name: rejection, verifier: rejection}\n"
                        << "    - {name: typical, verifier: typical_acceptance}\n  shadow: all\n";
  const fs::path prompts = dir / "prompts.jsonl";
  std::ofstream(prompts)
      << "{\"prompt\": \"Once upon a time\"}\n{\"prompt_ids\": [1, 910, 338, 263], \"max_tokens\": 12}\n"
      << "\n{\"prompt\": \"The quick brown fox\", \"temperature\": 0.8}\n";
  const fs::path log = dir / "ab.jsonl";
  ASSERT_EQ(run_cli("ab run --config " + config.string() + " --prompts " + prompts.string() + " --repeat 2 --log " +
                        log.string() + " --max-tokens 16 --temperature 1",
                    dir / "run.txt"),
            0)
      << read_file(dir / "run.txt");
  const std::string run_out = read_file(dir / "run.txt");
  EXPECT_NE(run_out.find("ab run: 12 requests"), std::string::npos) << run_out;
  EXPECT_NE(run_out.find("as a shadow on rejection's steps"), std::string::npos) << run_out;
  const auto records = specd::ab::read_ab_logs({log.string()});
  EXPECT_EQ(records.size(), 12u) << "3 prompts x 2 repeats x 2 arms";

  ASSERT_EQ(run_cli("ab report " + log.string() + " --json", dir / "report.json"), 0) << read_file(dir / "report.json");
  const auto j = nlohmann::json::parse(read_file(dir / "report.json"));
  EXPECT_EQ(j["arms"].size(), 2u);
  EXPECT_EQ(j["shadows"].size(), 2u);

  // `specd generate --json --arm`: the serving arm, and per arm its metrics (typical served, so
  // rejection's only numbers are as typical's shadow).
  ASSERT_EQ(run_cli("generate --config " + config.string() +
                        " --json --arm typical --prompt 'Once upon a time' --max-tokens 12 --temperature 1 --seed 3",
                    dir / "generate.json", dir / "generate.log"),
            0)
      << read_file(dir / "generate.log");
  const auto g = nlohmann::json::parse(read_file(dir / "generate.json"))["speculative"];
  EXPECT_EQ(g["arm"], "typical");
  ASSERT_EQ(g["arms"].size(), 2u);
  EXPECT_EQ(g["arms"][1]["arm"], "typical");
  EXPECT_EQ(g["arms"][1]["requests"], 1);
  EXPECT_EQ(g["arms"][0]["requests"], 0);
  EXPECT_EQ(g["arms"][0]["shadows"][0]["serving_arm"], "typical");
  EXPECT_GT(g["arms"][0]["shadows"][0]["draft_tokens"].get<int>(), 0);

  const fs::path html = dir / "report.html";
  ASSERT_EQ(run_cli("ab report " + log.string() + " --html " + html.string(), dir / "report.txt"), 0)
      << read_file(dir / "report.txt");
  const std::string page = read_file(html);
  EXPECT_EQ(page.find("<script src"), std::string::npos) << "self-contained: every script is inline";
  EXPECT_EQ(page.find("<link"), std::string::npos);

  const char* chromium = "/usr/bin/chromium";
  ASSERT_TRUE(fs::exists(chromium)) << "headless chromium is needed for this test: scripts/bootstrap.sh installs it";
  const fs::path profile = dir / "chromium-profile";
  const std::string cmd = std::string(chromium) +
                          " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                          " --disable-background-networking --disable-component-update --disable-sync"
                          " --user-data-dir=" +
                          profile.string() + " --virtual-time-budget=30000 --dump-dom file://" + html.string() + " > " +
                          (dir / "dom.html").string() + " 2> " + (dir / "chromium.log").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_file(dir / "chromium.log");
  const std::string dom = read_file(dir / "dom.html");
  EXPECT_EQ(dom.find("data-errors"), std::string::npos) << "script errors: " << dom.substr(0, 2000);
  EXPECT_NE(dom.find("data-plots=\"3\""), std::string::npos) << dom.substr(0, 2000);
  EXPECT_NE(dom.find("3 plots drawn with Vega"), std::string::npos);
  for (const char* id : {"plot-position", "plot-length", "plot-tpot"}) {
    const size_t at = dom.find(std::string("id=\"") + id + "\"");
    ASSERT_NE(at, std::string::npos) << id;
    const size_t end = dom.find("</svg>", at);
    ASSERT_NE(end, std::string::npos) << id << " has no SVG";
    const std::string svg = dom.substr(at, end - at);
    // Drawn marks: Vega's SVG renderer writes each mark as a <g class="mark-<type> ..."> group
    // whose items are paths with geometry (d="M...").
    size_t marks = 0;
    for (size_t p = svg.find("class=\"mark-"); p != std::string::npos; p = svg.find("class=\"mark-", p + 1)) {
      const size_t close = svg.find("</g>", p);
      const size_t path = svg.find("<path", p);
      const size_t d = path == std::string::npos ? std::string::npos : svg.find(" d=\"", path);
      if (d != std::string::npos && path < close && svg.compare(d, 5, " d=\"M") == 0) ++marks;
    }
    EXPECT_GT(marks, 0u) << id << ": no drawn marks";
  }
}

}  // namespace

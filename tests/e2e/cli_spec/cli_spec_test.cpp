// `specd generate --json` and `specd bench --json` with a `speculative` section (set through
// --set) on the tiny fixture: the speculative fields are present and consistent.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include "fixture.hpp"

namespace specd::cli::test {
namespace {

struct CliRun {
  int status = -1;
  std::string out;  // stdout
};

// stdout only; stderr (logs, the human summary) goes to a file shown on failure.
CliRun run(const std::string& args) {
  CliRun r;
  // One file per test: ctest runs this binary's tests as concurrent processes, and a shared file
  // once showed one test the other's error.
  const testing::TestInfo* t = testing::UnitTest::GetInstance()->current_test_info();
  std::string name = "stderr-";
  name += t != nullptr ? std::string(t->test_suite_name()) + "." + t->name() : std::string("none");
  name += ".txt";
  for (char& c : name)
    if (c == '/') c = '_';  // parameterized tests' names
  const std::string err = (std::filesystem::path(SPECD_TEST_WORK_DIR) / "cli_spec" / name).string();
  const std::string cmd = std::string(SPECD_CLI_PATH) + " " + args + " 2>'" + err + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  r.status = pclose(p);
  if (r.status != 0) {
    std::ifstream in(err);
    r.out += "\n--- stderr ---\n" + std::string(std::istreambuf_iterator<char>(in), {});
  }
  return r;
}

std::filesystem::path tiny() {
  const auto dir = std::filesystem::path(SPECD_TEST_WORK_DIR) / "cli_spec";
  std::filesystem::create_directories(dir);
  fixture::Options o;
  o.preset = "tiny";
  o.seed = 7;
  o.layer_std = 0.004;  // the first layer predicts much like the whole model: drafts get accepted
  return fixture::write(o, dir / "tiny");
}

const std::string kSpec =
    " --set speculative.proposer.name=draft_model --set speculative.proposer.layers=1"
    " --set speculative.verifier.name=greedy --set speculative.num_speculative_tokens=3"
    " --set kv_cache.memory_mib=16";

TEST(CliSpec, GenerateJsonHasSpeculativeObject) {
  // Static k: the subject is the speculative object, which needs drafts (a dynamic policy may decode
  // 12 tokens plainly on a loaded machine: seen once in a full-suite run).
  const CliRun r = run("generate --model '" + tiny().string() + "'" + kSpec + " --set speculative.dynamic=false" +
                       " --prompt 'Once upon a time' --json --max-tokens 12 --temperature 0 --ignore-eos");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j.at("token_ids").size(), 12u);
  ASSERT_TRUE(j.contains("speculative")) << r.out;
  const nlohmann::json& s = j.at("speculative");
  EXPECT_EQ(s.at("proposer"), "draft_model");
  EXPECT_EQ(s.at("verifier"), "greedy");
  EXPECT_EQ(s.at("k"), 3);
  const auto draft = s.at("draft_tokens").get<int64_t>();
  const auto accepted = s.at("accepted_tokens").get<int64_t>();
  const auto steps = s.at("spec_steps").get<int64_t>();
  EXPECT_GT(draft, 0);
  EXPECT_GE(accepted, 0);
  EXPECT_LE(accepted, draft);
  EXPECT_LE(draft, 3 * steps);
  const double rate = s.at("acceptance_rate").get<double>();
  EXPECT_GE(rate, 0.0);
  EXPECT_LE(rate, 1.0);
  EXPECT_NEAR(rate, static_cast<double>(accepted) / static_cast<double>(draft), 1e-9);
  const double len = s.at("mean_acceptance_length").get<double>();
  EXPECT_GE(len, 1.0);
  EXPECT_LE(len, 4.0);
}

TEST(CliSpec, GenerateWithoutSpeculationHasNoSpeculativeObject) {
  const CliRun r = run("generate --model '" + tiny().string() +
                       "' --prompt 'Once upon a time' --json --max-tokens 4 --temperature 0 --ignore-eos");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_FALSE(j.contains("speculative"));
}

TEST(CliSpec, GreedySpeculativeOutputEqualsPlain) {
  const std::string common = " --prompt 'Once upon a time' --json --max-tokens 10 --temperature 0 --ignore-eos";
  const CliRun spec = run("generate --model '" + tiny().string() + "'" + kSpec + common);
  const CliRun plain = run("generate --model '" + tiny().string() + "'" + kSpec + " --no-speculation" + common);
  ASSERT_EQ(spec.status, 0) << spec.out;
  ASSERT_EQ(plain.status, 0) << plain.out;
  const nlohmann::json a = nlohmann::json::parse(spec.out, nullptr, false);
  const nlohmann::json b = nlohmann::json::parse(plain.out, nullptr, false);
  ASSERT_TRUE(a.is_object() && b.is_object());
  EXPECT_EQ(a.at("token_ids"), b.at("token_ids"));
  EXPECT_EQ(b.at("speculative").at("draft_tokens"), 0);
}

TEST(CliSpec, BenchJsonReportsPlainAndSpeculativeRows) {
  // Static k: every speculative step drafts, so the acceptance and time-split formulas apply.
  const CliRun r = run("bench --model '" + tiny().string() + "'" + kSpec + " --set speculative.dynamic=false" +
                       " --prompt-tokens 16 --gen-tokens 8 --batch 1,2 --repeats 1 --score-k 2 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  ASSERT_EQ(j.at("decode").size(), 2u);
  ASSERT_TRUE(j.contains("speculative")) << r.out;
  const nlohmann::json& s = j.at("speculative");
  EXPECT_EQ(s.at("proposer"), "draft_model");
  EXPECT_EQ(s.at("k"), 3);
  ASSERT_EQ(s.at("rows").size(), 2u);
  for (const nlohmann::json& row : s.at("rows")) {
    EXPECT_GT(row.at("plain").at("tokens_per_s").get<double>(), 0.0) << row;
    EXPECT_GT(row.at("speculative").at("tokens_per_s").get<double>(), 0.0) << row;
    EXPECT_GT(row.at("speedup").get<double>(), 0.0);
    const auto draft = row.at("draft_tokens").get<uint64_t>();
    const auto accepted = row.at("accepted_tokens").get<uint64_t>();
    const auto drafts = row.at("num_drafts").get<uint64_t>();
    EXPECT_GT(draft, 0u);
    EXPECT_LE(accepted, draft);
    const double rate = row.at("acceptance_rate").get<double>();
    EXPECT_GE(rate, 0.0);
    EXPECT_LE(rate, 1.0);
    EXPECT_NEAR(row.at("mean_acceptance_length").get<double>(),
                1.0 + static_cast<double>(accepted) / static_cast<double>(drafts), 1e-9);
    const auto& per_position = row.at("acceptance_per_position");
    EXPECT_GE(per_position.size(), 1u);
    EXPECT_LE(per_position.size(), 3u);
    for (const auto& p : per_position) {
      EXPECT_GE(p.get<double>(), 0.0);
      EXPECT_LE(p.get<double>(), 1.0);
    }
    const auto& t = row.at("time");
    for (const char* key : {"propose_s", "score_s", "verify_s"}) EXPECT_GE(t.at(key).get<double>(), 0.0) << key;
    EXPECT_NEAR(t.at("propose_fraction").get<double>() + t.at("score_fraction").get<double>() +
                    t.at("verify_fraction").get<double>(),
                1.0, 1e-6);
  }
  const nlohmann::json& sc = s.at("scoring");
  EXPECT_EQ(sc.at("k"), 2);
  ASSERT_EQ(sc.at("rows").size(), 2u);
  for (const nlohmann::json& row : sc.at("rows")) {
    EXPECT_GT(row.at("decode_ms").get<double>(), 0.0);
    EXPECT_GT(row.at("score_ms").get<double>(), 0.0);
  }
  EXPECT_EQ(j.at("device"), "cpu");
  EXPECT_EQ(j.at("read_bandwidth").at("measured_by"), "cpu read");
}

// With the target on its device runtime (staged on the CPU here; a GPU's runs the same code):
// the engine rows and the scoring measurement run there, and the report says where.
TEST(CliSpec, BenchRunsOnTheModelsDeviceRuntime) {
  const CliRun r = run("bench --model '" + tiny().string() + "'" + kSpec +
                       " --set model.device=staged --prompt-tokens 8 --gen-tokens 4 --batch 1 --repeats 1 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j.at("device"), "staged (cpu)");
  const nlohmann::json& sc = j.at("speculative").at("scoring").at("rows").at(0);
  EXPECT_GT(sc.at("score_ms").get<double>(), 0.0);
  EXPECT_GT(j.at("speculative").at("rows").at(0).at("speculative").at("tokens_per_s").get<double>(), 0.0);
}

// Per-arm output of `specd bench` (two A/B arms, each a shadow of the other): every speculative
// request is counted on one arm, the arms' drafts add up to the speculative rows' drafts, and
// each shadow verified exactly the drafts its serving arm verified (same k), at a cost > 0.
TEST(CliBench, PerArmNumbersAddUpToTheTotals) {
  const std::string arms =
      " --set speculative.proposer.name=draft_model --set speculative.proposer.layers=1"
      " --set speculative.num_speculative_tokens=3 --set kv_cache.memory_mib=16"
      " --set 'speculative.arms=[{name: a, verifier: greedy}, {name: b, verifier: rejection}]'"
      " --set speculative.shadow=all"
      // The subject is the arms' accounting: every speculative run drafts (a dynamic policy may
      // decode the whole text run plainly, leaving no shadow line to print).
      " --set speculative.dynamic=false";
  const CliRun r = run("bench --model '" + tiny().string() + "'" + arms +
                       " --prompt-tokens 16 --gen-tokens 8 --batch 2,3 --repeats 1 --score-k 2 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  const nlohmann::json& s = j.at("speculative");
  ASSERT_EQ(s.at("arms").size(), 2u) << s;
  uint64_t row_drafts = 0, row_draft_tokens = 0, row_accepted = 0;
  for (const nlohmann::json& row : s.at("rows")) {
    row_drafts += row.at("num_drafts").get<uint64_t>();
    row_draft_tokens += row.at("draft_tokens").get<uint64_t>();
    row_accepted += row.at("accepted_tokens").get<uint64_t>();
  }
  uint64_t requests = 0, drafts = 0, draft_tokens = 0, accepted = 0;
  for (const nlohmann::json& arm : s.at("arms")) {
    requests += arm.at("requests").get<uint64_t>();
    drafts += arm.at("drafts").get<uint64_t>();
    draft_tokens += arm.at("draft_tokens").get<uint64_t>();
    accepted += arm.at("accepted_tokens").get<uint64_t>();
    EXPECT_EQ(arm.at("k"), 3);
    EXPECT_TRUE(arm.at("shadow").get<bool>());
  }
  // Batches 2 and 3 (one speculative run each) and the prefill run's one-token request, which
  // gets an arm but never drafts.
  EXPECT_EQ(requests, 6u);
  EXPECT_GT(row_draft_tokens, 0u);
  EXPECT_EQ(drafts, row_drafts);
  EXPECT_EQ(draft_tokens, row_draft_tokens);
  EXPECT_EQ(accepted, row_accepted);
  // Each arm as a shadow on the other's steps: the same drafts (same k), and greedy and rejection
  // at temperature 0 accept the same prefix.
  const nlohmann::json& a = s.at("arms")[0];
  const nlohmann::json& b = s.at("arms")[1];
  for (const auto& [shadow, serving] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
    if (serving->at("drafts").get<uint64_t>() == 0) continue;  // the draw gave this arm no request
    ASSERT_EQ(shadow->at("shadows").size(), 1u) << *shadow;
    const nlohmann::json& sh = shadow->at("shadows")[0];
    EXPECT_EQ(sh.at("serving_arm"), serving->at("arm"));
    EXPECT_EQ(sh.at("draft_tokens"), serving->at("draft_tokens"));
    EXPECT_EQ(sh.at("accepted_tokens"), serving->at("accepted_tokens"));
    EXPECT_EQ(sh.at("token_disagreement").get<double>(), 0.0);
    EXPECT_GT(sh.at("verify_ms_per_step").get<double>(), 0.0);
    EXPECT_GT(sh.at("cost_fraction_of_step").get<double>(), 0.0);
    EXPECT_LT(sh.at("cost_fraction_of_step").get<double>(), 1.0);
  }
  // The human summary prints the same per-arm lines.
  const CliRun text = run("bench --model '" + tiny().string() + "'" + arms +
                          " --prompt-tokens 16 --gen-tokens 8 --batch 2,3 --repeats 1 --score-k 2");
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("per arm, over all speculative runs:"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("arm a (greedy, lossy, k=3): "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("arm b (rejection, k=3): "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("as a shadow on "), std::string::npos) << text.out;
}

TEST(CliSpec, ShippedConfigsValidate) {
  for (const char* name : {"ngram", "self-draft", "ab-rejection", "ab-typical"}) {
    const auto file = std::filesystem::path(SPECD_SOURCE_DIR) / "configs" / (std::string(name) + ".yaml");
    const CliRun r = run("validate --config '" + file.string() + "'");
    EXPECT_EQ(r.status, 0) << name << ": " << r.out;
  }
}

// `--dtype a,b`: one engine per weight dtype, each with its floor, decode rows and the
// scoring ratio, plus the bandwidth yardstick measured before and after.
TEST(CliBench, DtypeListReportsOneRunPerDtype) {
  const CliRun r = run("bench --model '" + tiny().string() +
                       "' --dtype f32,q8_0 --prompt-tokens 8 --gen-tokens 4 --batch 1 --repeats 1 --score-k 2 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  const auto& bw = j.at("read_bandwidth");
  EXPECT_GT(bw.at("gb_s").get<double>(), 0.0);
  for (const char* when : {"before", "after"}) {
    const auto& b = bw.at(when);
    EXPECT_LE(b.at("min_gb_s").get<double>(), b.at("median_gb_s").get<double>()) << when;
    EXPECT_LE(b.at("median_gb_s").get<double>(), b.at("max_gb_s").get<double>()) << when;
    EXPECT_GT(b.at("long_read_gb_s").get<double>(), 0.0) << when;
  }
  const auto& runs = j.at("runs");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].at("dtype"), "f32");
  EXPECT_EQ(runs[0].at("kv_dtype"), "f32");
  EXPECT_EQ(runs[1].at("dtype"), "q8_0");
  EXPECT_EQ(runs[1].at("kv_dtype"), "f16");
  // The quantized run reads fewer weight bytes per step (its layers are 8.5 bits a weight).
  EXPECT_LT(runs[1].at("decode_weight_bytes").get<uint64_t>(), runs[0].at("decode_weight_bytes").get<uint64_t>());
  for (const auto& run : runs) {
    EXPECT_GT(run.at("decode_floor_ms_per_step").get<double>(), 0.0);
    ASSERT_EQ(run.at("decode").size(), 1u);
    EXPECT_GT(run.at("decode")[0].at("step_over_floor").get<double>(), 0.0);
    const auto& sc = run.at("scoring");
    EXPECT_EQ(sc.at("k"), 2);
    EXPECT_GT(sc.at("rows")[0].at("ratio").get<double>(), 0.0);
  }
}

// `--compare-k`: every arm of every batch has its rates, the plain arm never drafts, a static
// arm drafts, the dynamic arm reports its policy, and the dynamic arm is compared with the best
// other arm and with plain both over the whole run and over the full-batch steps.
TEST(CliBench, CompareKReportsEveryArmAndBothRatios) {
  const CliRun r = run("bench --model '" + tiny().string() + "'" + kSpec +
                       " --prompt-tokens 16 --gen-tokens 8 --batch 1,3 --repeats 2 --compare-k plain,2,dynamic --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j.at("repeats"), 2);
  ASSERT_EQ(j.at("rows").size(), 2u);
  for (const nlohmann::json& row : j.at("rows")) {
    const int batch = row.at("batch").get<int>();
    ASSERT_EQ(row.at("arms").size(), 3u);
    for (const nlohmann::json& arm : row.at("arms")) {
      EXPECT_GT(arm.at("tokens_per_s").get<double>(), 0.0) << arm;
      EXPECT_GT(arm.at("full_batch_tokens_per_s").get<double>(), 0.0) << arm;
    }
    const nlohmann::json& plain = row.at("arms")[0];
    EXPECT_EQ(plain.at("arm"), "plain");
    EXPECT_DOUBLE_EQ(plain.at("tokens_per_step").get<double>(), batch) << "plain decoding emits one token per row";
    EXPECT_GT(row.at("arms")[1].at("acceptance_rate").get<double>(), 0.0) << "k=2 drafts on the tiny fixture";
    EXPECT_GT(row.at("arms")[2].at("dynamic").at("steps").get<int>(), 0) << "the dynamic arm plans its steps";
    for (const nlohmann::json* v : {&row, &row.at("full_batch")}) {
      EXPECT_TRUE(v->contains("best_other")) << *v;
      EXPECT_GT(v->at("dynamic_vs_best_other").get<double>(), 0.0) << *v;
      EXPECT_GT(v->at("dynamic_vs_plain").get<double>(), 0.0) << *v;
    }
  }
}

// The paired ratios: the median over the repeats of dynamic's rate / the other arm's in the same
// repeat. Racing: with --drop-below 1 every static arm behind the leader after a repeat stops, so
// at most one of k=2 and k=4 runs every repeat; plain and dynamic always do. With --drop-below 0
// every arm runs every repeat.
TEST(CliBench, CompareKRacesSlowArmsAndPairsRatios) {
  for (const double drop : {1.0, 0.0}) {
    const CliRun r = run("bench --model '" + tiny().string() + "'" + kSpec +
                         " --prompt-tokens 16 --gen-tokens 8 --batch 2 --repeats 3 --compare-k plain,2,4,dynamic" +
                         " --drop-below " + std::to_string(drop) + " --json");
    ASSERT_EQ(r.status, 0) << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.out;
    const nlohmann::json& row = j.at("rows").at(0);
    const nlohmann::json& arms = row.at("arms");
    ASSERT_EQ(arms.size(), 4u);
    EXPECT_EQ(arms[0].at("runs"), 3) << "plain always runs";
    EXPECT_EQ(arms[3].at("runs"), 3) << "dynamic always runs";
    const int static_runs = arms[1].at("runs").get<int>() + arms[2].at("runs").get<int>();
    if (drop == 1.0) {
      EXPECT_LE(static_runs, 3 + 1) << "one static arm at most keeps the lead: " << arms;
      EXPECT_GE(static_runs, 2) << "every arm runs the first repeat: " << arms;
    } else {
      EXPECT_EQ(static_runs, 6) << arms;
    }
    for (const char* key : {"dynamic_vs_best_other", "dynamic_vs_plain"})
      EXPECT_GT(row.at("paired").at(key).get<double>(), 0.0) << row;
    for (const nlohmann::json& arm : arms) {
      ASSERT_EQ(arm.at("rates").size(), 3u) << arm;
      int ran = 0;
      for (const nlohmann::json& rate : arm.at("rates")) ran += rate.get<double>() > 0 ? 1 : 0;
      EXPECT_EQ(ran, arm.at("runs").get<int>()) << "a repeat an arm skipped is -1: " << arm;
    }
  }
}

// --interleave steps: one engine per arm, the runs advancing a step each in turn. Each arm still
// does exactly the work it does alone: its tokens per step and acceptance match --interleave runs.
TEST(CliBench, CompareKInterleavedByStepsDoesEachArmsOwnWork) {
  nlohmann::json by[2];
  for (const int steps : {0, 1}) {
    const CliRun r = run("bench --model '" + tiny().string() + "'" + kSpec +
                         " --prompt-tokens 16 --gen-tokens 8 --batch 1,3 --repeats 2 --drop-below 0" +
                         " --compare-k plain,2,dynamic --interleave " + (steps ? "steps" : "runs") + " --json");
    ASSERT_EQ(r.status, 0) << r.out;
    by[steps] = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(by[steps].is_discarded()) << r.out;
    EXPECT_EQ(by[steps].at("interleave"), steps ? "steps" : "runs");
  }
  for (size_t row = 0; row < 2; ++row) {
    const nlohmann::json& runs = by[0].at("rows").at(row);
    const nlohmann::json& steps = by[1].at("rows").at(row);
    for (size_t arm = 0; arm < 3; ++arm) {
      const nlohmann::json& a = steps.at("arms").at(arm);
      for (const nlohmann::json& rate : a.at("rates")) EXPECT_GT(rate.get<double>(), 0.0) << a;
      if (a.at("arm") == "dynamic") continue;  // its choices depend on the step times it measures
      EXPECT_DOUBLE_EQ(a.at("tokens_per_step").get<double>(),
                       runs.at("arms").at(arm).at("tokens_per_step").get<double>())
          << a;
      EXPECT_DOUBLE_EQ(a.at("acceptance_rate").get<double>(),
                       runs.at("arms").at(arm).at("acceptance_rate").get<double>())
          << a;
    }
    EXPECT_GT(steps.at("arms")[1].at("acceptance_rate").get<double>(), 0.0) << "k=2 drafts on the tiny fixture";
    EXPECT_GT(steps.at("paired").at("dynamic_vs_plain").get<double>(), 0.0) << steps;
  }
}

// --prompt reaches the compared runs (it once fell back to synthetic prompts there silently);
// the modes that build their own prompts refuse it.
TEST(CliBench, CompareKDecodesTheGivenPrompt) {
  const CliRun r = run("bench --model '" + tiny().string() + "'" + kSpec +
                       " --prompt 'one two three' --gen-tokens 8 --batch 1 --repeats 1 --compare-k plain,dynamic"
                       " --interleave steps --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j.at("prompt"), "given");
  const int n = j.at("prompt_tokens").get<int>();
  EXPECT_GT(n, 0);
  EXPECT_LT(n, 16) << "the report gives the prompt's own length, not --prompt-tokens' 128";
  for (const char* mode : {" --scorers mqa", " --multi-turn 2"}) {
    const CliRun bad = run("bench --model '" + tiny().string() + "'" + kSpec + " --prompt 'one two'" + mode);
    EXPECT_NE(bad.status, 0) << mode;
    EXPECT_NE(bad.out.find("--prompt and --prompt-file do not apply"), std::string::npos) << bad.out;
  }
}

TEST(CliBench, CompareKInterleavedByStepsRefusesAsyncScheduling) {
  const CliRun r = run("bench --model '" + tiny().string() + "'" + kSpec +
                       " --set scheduler.async_scheduling=true --compare-k plain,dynamic --interleave steps");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("--interleave steps times each engine step"), std::string::npos) << r.out;
  const CliRun bad =
      run("bench --model '" + tiny().string() + "'" + kSpec + " --compare-k plain,dynamic --interleave rows");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("--interleave"), std::string::npos) << bad.out;
}

TEST(CliBench, CompareKDropBelowOutOfRangeIsAClearError) {
  const CliRun r =
      run("bench --model '" + tiny().string() + "'" + kSpec + " --compare-k plain,dynamic --drop-below 1.5");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("--drop-below"), std::string::npos) << r.out;
}

TEST(CliBench, UnknownDtypeIsAClearError) {
  const CliRun r = run("bench --model '" + tiny().string() + "' --dtype iq4_xs --json");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("iq4_xs"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace specd::cli::test

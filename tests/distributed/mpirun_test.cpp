// `mpirun -np 2 specd ...` end to end (label `distributed`): greedy output under tensor
// parallelism equals plain TP-1 output token for token, with every proposer and the draft at
// TP 1 and TP 2; a killed rank ends the job within seconds naming the lost rank; a load that
// fails on one rank ends every rank with an error naming it; the server under mpirun passes the
// official OpenAI client's checks and serves prefix-cache hits from the same blocks on both
// ranks. The launcher runs as root here too: kLauncherEnv sets OpenMPI's allow-run-as-root
// variables.
#include <signal.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "fixture.hpp"
#include "server/http_client.hpp"
#include "server/server_process.hpp"

namespace specd::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// OpenMPI refuses root without these (docs/distributed.md); --bind-to none leaves both ranks
// free to run on any core of a shared machine.
const char* const kLauncherEnv = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";
const std::vector<std::string> kLauncher = {SPECD_MPIEXEC, "-np", "2", "--oversubscribe", "--bind-to", "none"};

std::string launcher() {
  std::string s = kLauncherEnv;
  for (const std::string& a : kLauncher) s += a + " ";
  return s;
}

fs::path work_dir() {
  return fs::path(SPECD_TEST_WORK_DIR) / "distributed";
}

struct Outcome {
  int status = -1;
  std::string out;  // stdout (the JSON result)
  std::string err;
  double seconds = 0;
};

// Runs `command` through the shell (bounded by `timeout 120`).
Outcome shell(const std::string& command) {
  fs::create_directories(work_dir());
  const fs::path err = work_dir() / "stderr.txt";
  Outcome r;
  const auto t0 = Clock::now();
  FILE* p = ::popen(("timeout 120 " + command + " 2>" + err.string()).c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::ifstream in(err);
  r.err.assign(std::istreambuf_iterator<char>(in), {});
  return r;
}

// The fixtures: `tiny` (GQA Llama) as the target, a 1-layer draft checkpoint of it, and a
// target with an MTP module. Layers drawn with std 0.06 (not the default 0.02, where the
// embeddings decide the argmax) so that a wrong shard or a missed all-reduce changes the
// output, while a 1-layer self-draft still gets about a quarter of its drafts accepted.
fixture::Options tiny_options() {
  fixture::Options o;
  o.preset = "tiny";
  o.seed = 11;
  o.layer_std = 0.06;
  return o;
}

fs::path target_dir() {
  static const fs::path dir = fixture::write(tiny_options(), work_dir() / "tiny");
  return dir;
}

fs::path draft_dir() {
  static const fs::path dir = fixture::write_draft_of(target_dir(), 1, work_dir() / "tiny-draft");
  return dir;
}

fs::path mtp_dir() {
  static const fs::path dir = [] {
    fixture::Options o = tiny_options();
    o.mtp_modules = 1;
    o.mtp_identity = true;
    return fixture::write(o, work_dir() / "tiny-mtp");
  }();
  return dir;
}

// An EAGLE-3 target and head: a tied-embedding target with faint layers predicts the token it
// just read, so its output repeats; the head copies the target's own prediction (the state
// leaving its last layer, through its norm and LM head), so its drafts are accepted whenever the
// output repeats, and only if rank 0 captured the whole (all-reduced) layer state and read the
// right embedding rows.
fs::path eagle3_target_dir() {
  static const fs::path dir = [] {
    fixture::Options o;
    o.preset = "tiny-tied";
    o.seed = 5;
    o.layer_std = 0.004;
    return fixture::write(o, work_dir() / "tiny-tied-faint");
  }();
  return dir;
}

fs::path eagle3_dir() {
  static const fs::path dir = [] {
    fixture::Eagle3Options o;
    o.copy_target = true;
    o.aux_layers = {1, 1, 1};  // SGLang ids: the output of layer 1, the target's last
    return fixture::write_eagle3_head(eagle3_target_dir(), o, work_dir() / "tiny-tied-faint-eagle3");
  }();
  return dir;
}

fs::path write_config(const std::string& name, const fs::path& model, const std::string& extra) {
  const fs::path file = work_dir() / (name + ".yaml");
  fs::create_directories(work_dir());
  std::ofstream(file) << "model:\n  path: " << model.string() << "\n  dtype: f32\n  max_model_len: 256\n"
                      << "kv_cache:\n  memory_mib: 8\n"
                      << extra;
  return file;
}

const char* const kPrompt = "the cat sat on the mat and the cat sat on the mat and the";

std::string generate_args(const fs::path& config) {
  return std::string(SPECD_CLI_PATH) + " generate --config " + config.string() + " --prompt '" + kPrompt +
         "' --temperature 0 --max-tokens 24 --json";
}

json result_of(const Outcome& r) {
  const json j = json::parse(r.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "stdout: " << r.out << "\nstderr: " << r.err;
  return j;
}

// Plain greedy decoding at TP 1 (no launcher), per target model.
std::vector<int32_t> reference(const fs::path& model) {
  static std::map<fs::path, std::vector<int32_t>> cache;
  if (auto it = cache.find(model); it != cache.end()) return it->second;
  const Outcome r = shell(generate_args(write_config("plain-tp1", model, "")));
  EXPECT_EQ(r.status, 0) << r.err;
  const json j = result_of(r);
  return cache[model] = j.is_discarded() ? std::vector<int32_t>{} : j["token_ids"].get<std::vector<int32_t>>();
}

struct Case {
  std::string name;
  // YAML of speculative.proposer's settings; empty: no speculation; "draft": the draft
  // checkpoint (its path is known only at run time).
  std::string proposer;
  int32_t proposer_tp = 0;  // speculative.proposer.tensor_parallel_size; 0: unset (the target's)
  bool mtp = false;         // the target with an MTP module
  std::string scheduler;    // YAML of the scheduler section
  bool dynamic = false;     // speculative.dynamic (false: every step drafts k)
  int32_t k = 3;            // speculative.num_speculative_tokens (a tree's node budget)
};

const std::string kSelfDraft = "    name: draft_model\n    layers: 1\n    temperature: 0\n";
std::string draft_checkpoint() {
  return "    name: draft_model\n    model: " + draft_dir().string() + "\n    temperature: 0\n";
}
std::string eagle3_head() {
  return "    name: eagle3\n    model: " + eagle3_dir().string() + "\n";
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

class MpirunGenerate : public ::testing::TestWithParam<Case> {};

TEST_P(MpirunGenerate, GreedyOutputEqualsPlainTp1) {
  const Case& c = GetParam();
  const fs::path model = c.mtp ? mtp_dir() : c.proposer.starts_with("eagle3") ? eagle3_target_dir() : target_dir();
  std::string extra = c.scheduler.empty() ? "" : "scheduler:\n" + c.scheduler;
  if (!c.proposer.empty()) {
    // Static k (every step drafts, so the test sees accepted drafts) unless the case is dynamic.
    extra += "speculative:\n  num_speculative_tokens: " + std::to_string(c.k) +
             "\n  dynamic: " + std::string(c.dynamic ? "true" : "false") + "\n  verifier: greedy\n  proposer:\n" +
             (c.proposer == "draft"         ? draft_checkpoint()
              : c.proposer == "eagle3"      ? eagle3_head()
              : c.proposer == "eagle3_tree" ? eagle3_head() + "    tree:\n      depth: 3\n      top_k: 2\n"
                                            : c.proposer);
    if (c.proposer_tp > 0) extra += "    tensor_parallel_size: " + std::to_string(c.proposer_tp) + "\n";
  }
  const std::vector<int32_t> want = reference(model);
  ASSERT_EQ(want.size(), 24u);
  const Outcome r = shell(launcher() + generate_args(write_config(c.name, model, extra)));
  ASSERT_EQ(r.status, 0) << r.err;
  // The target really ran on two ranks (and the draft where it was asked to).
  EXPECT_NE(r.err.find("tensor parallel over 2 ranks (MPI)"), std::string::npos) << r.err;
  if (c.proposer_tp > 0 && c.proposer.find("mtp") == std::string::npos) {
    EXPECT_NE(r.err.find("draft models run on " + std::to_string(c.proposer_tp) + " of them"), std::string::npos)
        << r.err;
  }
  const json j = result_of(r);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["token_ids"].get<std::vector<int32_t>>(), want);
  const bool from_text =
      c.proposer.find("ngram") != std::string::npos || c.proposer.find("suffix") != std::string::npos;
  if (!c.proposer.empty() && !from_text && !c.dynamic) {
    // Drafts were accepted: the verify/rollback path ran under tensor parallelism.
    EXPECT_GT(j["speculative"]["accepted_tokens"].get<int64_t>(), 0) << j.dump();
  }
  if (c.dynamic) {
    EXPECT_GT(j["speculative"]["policy"]["steps"].get<int64_t>(), 0) << "the policy planned: " << j.dump();
  }
}

Case make_case(std::string name, std::string proposer, int32_t proposer_tp = 0, bool mtp = false,
               std::string scheduler = "", bool dynamic = false, int32_t k = 3) {
  return {std::move(name), std::move(proposer), proposer_tp, mtp, std::move(scheduler), dynamic, k};
}

const std::string kAsync = "  async_scheduling: true\n";
// Draft trees under tensor parallelism: the forward message carries each row's tree and the
// followers repeat the accepted paths' row copies (k = 10 nodes, so non-chain paths are accepted
// and compacted). On this fixture the greedy output does not depend on half the heads' K/V of
// a few positions, so the followers' copies themselves are checked in kv_cache_test
// (CompactMovesRowsAndIsRepeatedOnAFollower); here the protocol and the output are.
const std::string kSelfDraftTree = kSelfDraft + "    tree:\n      depth: 3\n      top_k: 2\n";
const std::string kMtp = "    name: mtp\n    num_modules: 1\n";

INSTANTIATE_TEST_SUITE_P(
    Proposers, MpirunGenerate,
    ::testing::Values(make_case("plain", ""), make_case("plain_async", "", 0, false, kAsync),
                      make_case("self_draft_tp2", kSelfDraft, 2), make_case("self_draft_tp1", kSelfDraft, 1),
                      make_case("draft_tp2", "draft", 2), make_case("draft_tp1_async", "draft", 1, false, kAsync),
                      make_case("ngram", "    name: ngram\n"), make_case("mtp", kMtp, 0, true),
                      make_case("suffix_tree", "    name: suffix\n    tree: true\n", 0, false, kAsync, false, 6),
                      make_case("mtp_multi_step", kMtp, 0, true, kAsync + "  num_scheduler_steps: 2\n"),
                      // The dynamic policy (the default) under tensor parallelism: the same output.
                      make_case("self_draft_tp2_dynamic", kSelfDraft, 2, false, "", true),
                      make_case("draft_tp1_async_dynamic", "draft", 1, false, kAsync, true),
                      make_case("mtp_dynamic", kMtp, 0, true, "", true),
                      make_case("self_draft_tree_tp2", kSelfDraftTree, 2, false, "", false, 10),
                      make_case("self_draft_tree_tp1_async", kSelfDraftTree, 1, false, kAsync, false, 10),
                      // EAGLE-3 over the split target's layer states, the head on rank 0 alone
                      // (with a whole copy of the target's embeddings).
                      make_case("eagle3_tp1", "eagle3", 1),
                      make_case("eagle3_tp1_tree", "eagle3_tree", 1, false, "", false, 6)),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// Seeded sampling with the coupled verifier under tensor parallelism: the same tokens as plain
// Gumbel-max sampling at TP 1 (same seed, same output with speculation on or off, on one rank or
// two), with a self-draft at TP 2 drawing its drafts with the shared noise.
TEST(MpirunSampling, CoupledSpeculationAtTp2EqualsPlainGumbelSamplingAtTp1) {
  auto sampled = [](const fs::path& config, const std::string& set) {
    return std::string(SPECD_CLI_PATH) + " generate --config " + config.string() + " --prompt '" + kPrompt +
           "' --temperature 1 --seed 7 --max-tokens 24 --json" + set;
  };
  const Outcome plain = shell(sampled(write_config("gumbel-tp1", target_dir(), ""), " --set model.sampler=gumbel"));
  ASSERT_EQ(plain.status, 0) << plain.err;
  const std::string spec =
      "speculative:\n  num_speculative_tokens: 3\n  dynamic: false\n  verifier: coupled\n"
      "  proposer:\n    name: draft_model\n    layers: 1\n    temperature: 1\n"
      "    draft_sampler: gumbel\n";
  const Outcome coupled = shell(launcher() + sampled(write_config("coupled-tp2", target_dir(), spec), ""));
  ASSERT_EQ(coupled.status, 0) << coupled.err;
  EXPECT_NE(coupled.err.find("tensor parallel over 2 ranks (MPI)"), std::string::npos) << coupled.err;
  const json a = result_of(plain), b = result_of(coupled);
  ASSERT_FALSE(a.is_discarded() || b.is_discarded());
  EXPECT_EQ(b["token_ids"], a["token_ids"]);
  EXPECT_GT(b["speculative"]["accepted_tokens"].get<int64_t>(), 0) << b.dump();
}

TEST(MpirunConfig, ImpossibleSizesAreRefusedClearly) {
  const Outcome alone = shell(std::string(SPECD_CLI_PATH) + " generate --model " + target_dir().string() +
                              " --prompt hi --set model.tensor_parallel_size=2");
  EXPECT_NE(alone.status, 0);
  EXPECT_NE(alone.err.find("model.tensor_parallel_size = 2 needs 2 MPI ranks"), std::string::npos) << alone.err;
  EXPECT_NE(alone.err.find("mpirun -np 2"), std::string::npos) << alone.err;

  const Outcome three = shell(launcher() + SPECD_CLI_PATH + " generate --model " + target_dir().string() +
                              " --prompt hi --set model.tensor_parallel_size=3");
  EXPECT_NE(three.status, 0);
  EXPECT_NE(three.err.find("model.tensor_parallel_size = 3 but the MPI job has 2 ranks"), std::string::npos)
      << three.err;

  const Outcome mtp_tp1 =
      shell(launcher() + generate_args(write_config("mtp-tp1", mtp_dir(),
                                                    "speculative:\n  proposer:\n    name: mtp\n    num_modules: 1\n"
                                                    "    tensor_parallel_size: 1\n")));
  EXPECT_NE(mtp_tp1.status, 0);
  EXPECT_NE(mtp_tp1.err.find("MTP modules share the target's sharded embeddings"), std::string::npos) << mtp_tp1.err;

  const Outcome eagle3_tp2 =
      shell(launcher() + generate_args(write_config(
                             "eagle3-tp2", target_dir(),
                             "speculative:\n  proposer:\n" + eagle3_head() + "    tensor_parallel_size: 2\n")));
  EXPECT_NE(eagle3_tp2.status, 0);
  EXPECT_NE(eagle3_tp2.err.find("an EAGLE-3 head runs on rank 0 alone, not split over 2 ranks"), std::string::npos)
      << eagle3_tp2.err;
}

TEST(MpirunFailures, LoadFailingOnOneRankEndsEveryRankNamingIt) {
  // MPMD: rank 1 starts in a directory without the (relative) model path, as on a node where
  // the checkpoint was not copied.
  const fs::path empty = work_dir() / "empty";
  fs::create_directories(empty);
  (void)target_dir();
  std::string cmd = std::string(kLauncherEnv) + SPECD_MPIEXEC + " --oversubscribe --bind-to none";
  const std::string args = " generate --model tiny --prompt hi --max-tokens 4";
  cmd += " -np 1 -wdir " + work_dir().string() + " " + SPECD_CLI_PATH + args;
  cmd += " : -np 1 -wdir " + empty.string() + " " + SPECD_CLI_PATH + args;
  const Outcome r = shell(cmd);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("could not load the target tiny on every rank (rank 1: model directory or GGUF file tiny "
                       "does not exist)"),
            std::string::npos)
      << r.err;
  EXPECT_LT(r.seconds, 60.0);  // ended, not hung (the shell's bound is 120 s)
}

// The ranks mpirun started for `mpirun_pid`, by OMPI_COMM_WORLD_RANK.
std::map<int, pid_t> ranks_of(pid_t mpirun_pid) {
  std::map<int, pid_t> ranks;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string pid, comm, state;
    pid_t ppid = 0;
    stat >> pid >> comm >> state >> ppid;
    if (ppid != mpirun_pid) continue;
    std::ifstream env(e.path() / "environ");
    std::string var;
    while (std::getline(env, var, '\0')) {
      if (var.starts_with("OMPI_COMM_WORLD_RANK=")) ranks[std::stoi(var.substr(21))] = std::stoi(name);
    }
  }
  return ranks;
}

std::string write_server_config() {
  const fs::path file = work_dir() / "serve.yaml";
  std::ofstream(file) << "model:\n  path: " << target_dir().string() << "\n  max_model_len: 256\n"
                      << "kv_cache:\n  memory_mib: 8\nserver:\n  model_name: tiny\n";
  return file.string();
}

const std::vector<std::string> kLauncherEnvList = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};

TEST(MpirunFailures, KilledRankEndsTheJobNamingIt) {
  ServerProcess s(write_server_config(), kLauncherEnvList, kLauncher);
  ASSERT_TRUE(s.ready()) << s.log();
  const std::map<int, pid_t> ranks = ranks_of(s.pid());
  ASSERT_EQ(ranks.size(), 2u) << s.log();
  // A request in flight while the rank goes.
  std::thread client([&] {
    http_call(s.port(), "POST", "/v1/completions",
              R"({"model":"tiny","prompt":"hi","max_tokens":200,"temperature":0,"ignore_eos":true})");
  });
  const auto t0 = Clock::now();
  ::kill(ranks.at(1), SIGKILL);
  const int status = s.wait(std::chrono::seconds(10));
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  client.join();
  EXPECT_NE(status, 0);
  EXPECT_NE(status, -SIGKILL) << "mpirun did not end within 10 s:\n" << s.log();  // wait() killed it
  EXPECT_LT(seconds, 10.0);
  EXPECT_NE(s.log().find("process rank 1 with PID"), std::string::npos) << s.log();
}

TEST(MpirunServer, PassesTheOfficialOpenAIClient) {
  const fs::path tools = fs::path(SPECD_SOURCE_DIR) / "tools";
  if (std::system("node --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  if (!fs::exists(tools / "node_modules/openai/package.json")) {
    GTEST_SKIP() << "tools/node_modules/openai is missing (run scripts/bootstrap.sh)";
  }
  ServerProcess s(write_server_config(), kLauncherEnvList, kLauncher);
  ASSERT_TRUE(s.ready()) << s.log();
  const Outcome r = shell("env SPECD_URL=http://127.0.0.1:" + std::to_string(s.port()) +
                          "/v1 SPECD_MODEL=tiny SPECD_TOOLS_DIR=" + tools.string() + " node " +
                          (fs::path(SPECD_SOURCE_DIR) / "tests/server/js/openai_client.mjs").string());
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("all openai client checks passed"), std::string::npos) << r.out << r.err;
  EXPECT_NE(s.log().find("tensor parallel over 2 ranks (MPI)"), std::string::npos) << s.log();
  // n > 1 shares the prompt's KV blocks; the copy-on-write of the last partial block must happen
  // on every rank: at temperature 0 each choice equals the single greedy answer. Prompts of token
  // ids of 21 and 35 tokens leave 20 and 34 shared tokens, partial blocks of 16.
  for (const int32_t len : {21, 35}) {
    json prompt = json::array();
    for (int32_t i = 0; i < len; ++i) prompt.push_back(5 + (i * 7) % 90);
    json body = {{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}};
    const HttpResponse one = http_call(s.port(), "POST", "/v1/completions", body.dump());
    body["n"] = 3;
    const HttpResponse three = http_call(s.port(), "POST", "/v1/completions", body.dump());
    ASSERT_EQ(one.status, 200) << one.body;
    ASSERT_EQ(three.status, 200) << three.body;
    const std::string want = json::parse(one.body)["choices"][0]["text"].get<std::string>();
    const json choices = json::parse(three.body)["choices"];
    ASSERT_EQ(choices.size(), 3u) << three.body;
    for (const json& c : choices) EXPECT_EQ(c["text"].get<std::string>(), want) << "prompt of " << len << " tokens";
    // The second request found the first one's full blocks in the prefix cache (rank 0 decides,
    // the other rank reads the same blocks through rank 0's tables): same text as computed.
    EXPECT_EQ(json::parse(three.body)["usage"]["prompt_tokens_details"]["cached_tokens"], len == 35 ? 32 : 16)
        << three.body;
  }
  // A request that fails (its prompt exceeds max_model_len 256) fails alone, on rank 0, before
  // any forward is announced: the ranks stay in step and the next request is served.
  std::string long_prompt;
  for (int i = 0; i < 400; ++i) long_prompt += "cat ";
  const HttpResponse bad = http_call(s.port(), "POST", "/v1/completions",
                                     json{{"model", "tiny"}, {"prompt", long_prompt}, {"max_tokens", 4}}.dump());
  EXPECT_EQ(bad.status, 400) << bad.body;
  const HttpResponse good = http_call(s.port(), "POST", "/v1/completions",
                                      json{{"model", "tiny"}, {"prompt", "hi"}, {"max_tokens", 4}}.dump());
  EXPECT_EQ(good.status, 200) << good.body;
  // SIGTERM to mpirun reaches rank 0, which drains and ends the session; the job ends (mpirun
  // itself exits 1 after forwarding a signal, docs/distributed.md).
  EXPECT_NE(s.stop(std::chrono::seconds(30)), -SIGKILL) << s.log();
  EXPECT_NE(s.log().find("server stopped"), std::string::npos) << s.log();
}

}  // namespace
}  // namespace specd::test

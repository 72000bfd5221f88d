// `specd generate / score` through the real executable (SPECD_CLI_PATH).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "config/config.hpp"
#include "runtime_test_util.hpp"
#include "specd/engine.hpp"

namespace specd::model::test {
namespace {

struct CliRun {
  int status = -1;
  std::string out;  // stdout + stderr
};

CliRun run(const std::string& args) {
  CliRun r;
  const std::string cmd = std::string(SPECD_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  r.status = pclose(p);
  return r;
}

bool registered(const std::string& command) {
  const CliRun help = run("--help");
  return help.out.find(command) != std::string::npos;
}

// The last line that parses as a JSON object (log lines go to stderr and may precede it).
nlohmann::json last_json(const std::string& out) {
  nlohmann::json j;
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(start, end - start);
    if (!line.empty() && line[0] == '{') j = nlohmann::json::parse(line, nullptr, false);
    start = end + 1;
  }
  return j;
}

TEST(Cli, GenerateJson) {
  if (!registered("generate")) GTEST_SKIP() << "`specd generate` is not registered in main.cpp in this build";
  const auto dir = fixture("tiny");
  const CliRun r = run("generate --model '" + dir.string() +
                    "' --prompt 'Once upon a time' --json --max-tokens 8 --temperature 0 --ignore-eos");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = last_json(r.out);
  ASSERT_TRUE(j.is_object()) << r.out;
  const auto ids = j.at("token_ids").get<std::vector<int32_t>>();
  EXPECT_EQ(ids.size(), 8u);
  EXPECT_EQ(j.at("finish_reason"), "length");
  EXPECT_GT(j.at("timings").at("total_s").get<double>(), 0.0);
  Engine e(config::for_model_dir(dir.string()));
  // The streamed text continues the prompt: decode(prompt + generated) minus decode(prompt)
  // (decoding the generated ids alone would drop SentencePiece's leading space).
  std::vector<int32_t> all = e.encode("Once upon a time");
  const std::string prefix = e.decode(all);
  all.insert(all.end(), ids.begin(), ids.end());
  const std::string full = e.decode(all);
  ASSERT_EQ(full.compare(0, prefix.size(), prefix), 0);
  EXPECT_EQ(j.at("text").get<std::string>(), full.substr(prefix.size()));
  // Greedy output equals the engine's.
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = 8;
  sp.ignore_eos = true;
  add_request(e, {.prompt = "Once upon a time", .prompt_ids = {}, .sampling = sp, .speculative = {}});
  std::vector<int32_t> want;
  while (e.has_unfinished()) {
    for (const auto& o : e.step()) want.insert(want.end(), o.new_token_ids.begin(), o.new_token_ids.end());
  }
  EXPECT_EQ(ids, want);
}

TEST(Cli, GenerateRejectsBadSamplingAndScoreReportsPerplexity) {
  if (!registered("score")) GTEST_SKIP() << "`specd score` is not registered in main.cpp in this build";
  const auto dir = fixture("tiny");
  const CliRun bad = run("generate --model '" + dir.string() + "' --prompt hi --top-p 0");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("top_p"), std::string::npos) << bad.out;
  const CliRun s = run("score --model '" + dir.string() + "' --prompt 'The quick brown fox' --json");
  ASSERT_EQ(s.status, 0) << s.out;
  const nlohmann::json j = last_json(s.out);
  ASSERT_TRUE(j.is_object()) << s.out;
  EXPECT_EQ(j.at("tokens").size(), j.at("num_tokens").get<size_t>() - 1);
  EXPECT_GT(j.at("perplexity").get<double>(), 1.0);
}

}  // namespace
}  // namespace specd::model::test

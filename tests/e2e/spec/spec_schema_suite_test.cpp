// The structured-output schema suite (docs/structured-output.md): JSON Schemas of the kinds real
// projects write (tests/data/schemas/: nested objects, formats, patterns, enums, bounded numbers,
// anyOf/oneOf/allOf, recursive $ref, prefixItems, additionalProperties schemas), each generated
// greedily and sampled with several seeds, by the target alone and with a speculative draft
// model. Every finished output is validated by an independent oracle, python3-jsonschema
// (validate_json.py, format checks on), and must pass; greedy output is the same with and without
// speculation. The fixture model is random: a logit bias towards the characters that close
// strings and containers keeps its outputs short enough to finish, which changes nothing about
// what the grammar allows.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "spec_test_util.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/tokenizer_impl.hpp"

namespace {

namespace fs = std::filesystem;
using specd::Request;
using specd::spec_test::Generation;
using specd::spec_test::run_engine;

std::vector<fs::path> schema_files() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(SPECD_TEST_DATA_DIR) / "schemas"))
    if (e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string read(const fs::path& p) {
  std::ifstream f(p);
  return {std::istreambuf_iterator<char>(f), {}};
}

// Tokens that close a string or a container, or separate members: biased up.
std::vector<std::pair<int32_t, float>> closing_bias(const specd::Tokenizer& tok) {
  std::vector<std::pair<int32_t, float>> bias;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    const std::string b = tok.impl().token_bytes(id);
    if (b == "\"" || b == "}" || b == "]" || b == "\"," || b == "\"}" || b == ",") bias.push_back({id, 8.0f});
  }
  return bias;
}

std::vector<Request> suite_requests(const specd::Tokenizer& tok, const std::vector<fs::path>& schemas) {
  std::vector<Request> out;
  const auto bias = closing_bias(tok);
  for (size_t s = 0; s < schemas.size(); ++s) {
    for (int seed = -1; seed < 3; ++seed) {  // -1: greedy
      Request r;
      r.prompt = "Answer in JSON:";
      r.structured.kind = specd::StructuredOutput::Kind::kJsonSchema;
      r.structured.spec = read(schemas[s]);
      r.sampling.max_tokens = 400;
      r.sampling.logit_bias = bias;
      r.sampling.temperature = seed < 0 ? 0.0f : 1.0f;
      if (seed >= 0) r.sampling.seed = 700 + static_cast<uint64_t>(seed);
      out.push_back(std::move(r));
    }
  }
  return out;
}

TEST(SchemaSuite, EveryFinishedOutputValidatesWithAndWithoutSpeculation) {
  if (std::system("/usr/bin/python3 -c 'import jsonschema' 2>/dev/null") != 0)
    GTEST_SKIP() << "python3-jsonschema is not installed (scripts/bootstrap.sh installs it)";
  const auto target = specd::spec_test::target_fixture(false, 0.02);
  const auto tok = specd::Tokenizer::load(target);
  const std::vector<fs::path> schemas = schema_files();
  ASSERT_GE(schemas.size(), 10u);
  const std::vector<Request> requests = suite_requests(*tok, schemas);
  const std::vector<Generation> plain = run_engine(specd::config::for_model_dir(target.string()), requests);
  const std::vector<Generation> spec =
      run_engine(specd::spec_test::spec_config(target, "draft_model", "rejection", 4), requests);

  const fs::path out = specd::spec_test::work_dir() / "schema-suite.jsonl";
  std::ofstream lines(out);
  int finished = 0, total = 0;
  for (const std::vector<Generation>* run : {&plain, &spec}) {
    for (size_t i = 0; i < requests.size(); ++i) {
      const Generation& g = (*run)[i];
      ASSERT_TRUE(g.error.empty()) << schemas[i / 4] << ": " << g.error;
      ++total;
      if (g.finish_reason != specd::FinishReason::kStop) continue;
      std::vector<int32_t> ids = g.tokens;
      if (!ids.empty() && ids.back() == tok->eos_id()) ids.pop_back();
      std::string text;
      for (const int32_t id : ids) text += tok->impl().token_bytes(id);
      lines << nlohmann::json{{"schema", schemas[i / 4].string()}, {"text", text}}.dump() << "\n";
      ++finished;
    }
  }
  lines.close();
  for (size_t i = 0; i < requests.size(); i += 4) EXPECT_EQ(spec[i].tokens, plain[i].tokens) << schemas[i / 4];
  RecordProperty("finished", std::to_string(finished) + "/" + std::to_string(total));
  EXPECT_GE(finished * 4, total * 3) << "most outputs should finish within max_tokens";
  const std::string cmd = "/usr/bin/python3 " + std::string(SPECD_SOURCE_DIR) + "/tests/e2e/spec/validate_json.py " +
                          out.string() + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string report;
  char buf[4096];
  while (fgets(buf, sizeof buf, p) != nullptr) report += buf;
  const int status = pclose(p);
  EXPECT_EQ(status, 0) << report;
  EXPECT_NE(report.find("checked " + std::to_string(finished) + " invalid 0"), std::string::npos) << report;
}

}  // namespace

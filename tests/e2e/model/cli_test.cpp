// `specd generate / score` through the real executable (SPECD_CLI_PATH).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "config/config.hpp"
#include "convert.hpp"
#include "runtime_test_util.hpp"
#include "specd/engine.hpp"
#include "specd/kernels/cpu_isa.hpp"

namespace specd::model::test {
namespace {

struct CliRun {
  int status = -1;
  std::string out;  // stdout + stderr
};

// `env`: assignments put before the command ("NAME=value").
CliRun run_env(const std::string& env, const std::string& args) {
  CliRun r;
  const std::string cmd = env + (env.empty() ? "" : " ") + std::string(SPECD_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  r.status = pclose(p);
  return r;
}

CliRun run(const std::string& args) {
  return run_env("", args);
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

// SPECD_CPU_ISA forces each level the CPU can run (the same tokens on every one, greedy), and a
// level it lacks, or a misspelt one, fails the command with the reason.
TEST(Cli, CpuIsaEnvironmentForcesEachLevel) {
  const auto dir = fixture("tiny");
  const std::string args =
      "generate --model '" + dir.string() + "' --prompt 'Once upon a time' --json --max-tokens 6 --temperature 0";
  std::string first;
  for (kernels::CpuIsa isa : kernels::kAllCpuIsas) {
    const std::string name(kernels::cpu_isa_name(isa));
    const CliRun r = run_env("SPECD_CPU_ISA=" + name, args);
    const auto supported = kernels::supported_cpu_isas();
    if (std::find(supported.begin(), supported.end(), isa) == supported.end()) {
      EXPECT_NE(r.status, 0) << name;
      EXPECT_NE(r.out.find("asks for the " + name + " kernels, but this CPU supports at most"), std::string::npos)
          << r.out;
      continue;
    }
    ASSERT_EQ(r.status, 0) << name << ": " << r.out;
    EXPECT_NE(r.out.find("CPU kernels: " + name + " ("), std::string::npos) << r.out;
    const std::string ids = last_json(r.out).at("token_ids").dump();
    if (first.empty()) first = ids;
    EXPECT_EQ(ids, first) << name;
  }
  const CliRun bad = run_env("SPECD_CPU_ISA=avx9000", args);
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("unknown CPU instruction-set level 'avx9000'"), std::string::npos) << bad.out;
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

// A GGUF file (named without .gguf: the content decides) runs, tokenizes and is described by
// `specd inspect` like the directory it was written from.
TEST(Cli, GgufFileGeneratesTokenizesAndInspects) {
  const auto dir = fixture("tiny");
  const auto file = std::filesystem::path(SPECD_TEST_WORK_DIR) / "runtime" / "tiny-q8.model";
  specd::gguf::ConvertOptions o;
  o.type = specd::gguf::TensorType::kQ8_0;
  specd::gguf::convert_checkpoint(dir, file, o);
  const std::string gen = " --prompt 'Once upon a time' --json --max-tokens 8 --temperature 0 --ignore-eos";
  const CliRun from_file = run("generate --model '" + file.string() + "'" + gen);
  const CliRun from_dir = run("generate --model '" + dir.string() + "' --set model.dtype=q8_0" + gen);
  ASSERT_EQ(from_file.status, 0) << from_file.out;
  ASSERT_EQ(from_dir.status, 0) << from_dir.out;
  EXPECT_EQ(last_json(from_file.out).at("token_ids"), last_json(from_dir.out).at("token_ids"));
  EXPECT_EQ(last_json(from_file.out).at("text"), last_json(from_dir.out).at("text"));

  const CliRun tok_file = run("tokenize --tokenizer '" + file.string() + "' --text 'Hello GGUF world'");
  const CliRun tok_dir = run("tokenize --tokenizer '" + dir.string() + "' --text 'Hello GGUF world'");
  ASSERT_EQ(tok_file.status, 0) << tok_file.out;
  EXPECT_EQ(tok_file.out, tok_dir.out);

  const CliRun inspect = run("inspect '" + file.string() + "' --json");
  ASSERT_EQ(inspect.status, 0) << inspect.out;
  const nlohmann::json j = nlohmann::json::parse(inspect.out);
  EXPECT_EQ(j.at("format"), "gguf");
  EXPECT_EQ(j.at("gguf_version"), 3);
  EXPECT_TRUE(j.at("runnable").get<bool>());
  EXPECT_EQ(j.at("architecture"), "LlamaForCausalLM");
  EXPECT_EQ(j.at("config").at("layers"), 2);
  EXPECT_EQ(j.at("config").at("head_dim"), 16);
  std::map<std::string, int> by_type;
  for (const auto& t : j.at("tensors").at("by_type"))
    by_type[t.at("type").get<std::string>()] = t.at("count").get<int>();
  EXPECT_EQ(by_type, (std::map<std::string, int>{{"F16", 2}, {"F32", 5}, {"Q8_0", 14}}));
  EXPECT_EQ(j.at("tokenizer").at("kind"), "llama");
  EXPECT_EQ(j.at("tokenizer").at("bos").at("id"), 1);
  EXPECT_EQ(j.at("tokenizer").at("bos").at("text"), "<s>");
  EXPECT_TRUE(j.at("tokenizer").at("adds_bos").get<bool>());

  const CliRun text = run("inspect '" + dir.string() + "'");
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("(safetensors)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("2 layers, hidden 64"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("tokenizer     tokenizer.json, 32000 tokens (3 special)"), std::string::npos) << text.out;
  const CliRun missing = run("inspect /nonexistent/model");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.out.find("/nonexistent/model does not exist"), std::string::npos) << missing.out;
}

// `specd inspect` shows each family's own fields: experts, windows, Gemma's scale and caps,
// longrope.
TEST(Cli, InspectShowsTheFamilyFields) {
  const auto field = [&](const std::string& preset) {
    const CliRun r = run("inspect '" + fixture(preset).string() + "' --json");
    EXPECT_EQ(r.status, 0) << r.out;
    return nlohmann::json::parse(r.out).at("config");
  };
  const nlohmann::json moe = field("tiny-qwen3-moe");
  EXPECT_EQ(moe.at("experts").at("count"), 8);
  EXPECT_EQ(moe.at("experts").at("per_token"), 2);
  EXPECT_EQ(moe.at("experts").at("intermediate"), 32);
  const nlohmann::json gemma = field("tiny-gemma3");
  EXPECT_EQ(gemma.at("sliding_window").at("window"), 4);
  EXPECT_EQ(gemma.at("sliding_window").at("layers"), 5);
  EXPECT_EQ(gemma.at("gemma").at("rope_local_base_freq"), 10000.0);
  EXPECT_EQ(field("tiny-phi3-longrope").at("longrope").at("original_max_position_embeddings"), 32);
  EXPECT_FALSE(field("tiny").contains("experts"));
  const CliRun text = run("inspect '" + fixture("tiny-gemma2").string() + "'");
  EXPECT_NE(text.out.find("window        4 positions in 1 of the layers"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("soft caps 0.1 (attention) 3 (logits)"), std::string::npos) << text.out;
}

// `specd template render` prints the prompt exactly: the model's own template (Qwen 3's) from a
// directory and from its GGUF file alike, with the generation prompt, tools and kwargs; a
// template's raise_exception fails the command with the template's message.
TEST(Cli, TemplateRenderPrintsThePromptFromADirectoryAndAGgufFile) {
  if (!registered("template")) GTEST_SKIP() << "`specd template` is not registered in main.cpp in this build";
  const auto dir = fixture("tiny-qwen3");
  const auto work = std::filesystem::path(SPECD_TEST_WORK_DIR) / "runtime";
  const auto file = work / "tiny-qwen3.gguf";
  specd::gguf::convert_checkpoint(dir, file, {});
  const auto messages = work / "messages.json";
  const auto tools = work / "tools.json";
  std::ofstream(messages) << R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])";
  std::ofstream(tools) << R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])";
  const std::string args = " --messages '" + messages.string() + "' --add-generation-prompt";
  const CliRun from_dir = run("template render --model '" + dir.string() + "'" + args);
  const CliRun from_file = run("template render --model '" + file.string() + "'" + args);
  ASSERT_EQ(from_dir.status, 0) << from_dir.out;
  EXPECT_EQ(from_dir.out,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(from_file.out, from_dir.out);
  const CliRun no_think =
      run("template render --model '" + dir.string() + "'" + args + " --kwargs '{\"enable_thinking\": false}'");
  EXPECT_EQ(no_think.out, from_dir.out + "<think>\n\n</think>\n\n");
  const CliRun with_tools =
      run("template render --model '" + dir.string() + "'" + args + " --tools '" + tools.string() + "'");
  EXPECT_NE(with_tools.out.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
                                "{\"type\": \"object\"}}}\n</tools>"),
            std::string::npos)
      << with_tools.out;

  const auto raising = work / "raising.jinja";
  std::ofstream(raising)
      << "{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}";
  const CliRun raised =
      run("template render --model '" + dir.string() + "' --template '" + raising.string() + "'" + args);
  EXPECT_NE(raised.status, 0);
  EXPECT_NE(raised.out.find("System role not supported"), std::string::npos) << raised.out;
}

}  // namespace
}  // namespace specd::model::test

// Config: YAML → typed structs, strict validation with file:line: path messages, every error
// reported at once, --set overrides, plugin subtrees, and `specd validate`.
#include "config/config.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "specd/error.hpp"

namespace fs = std::filesystem;
using specd::config::EngineConfig;

namespace {

std::string config_error(const std::string& yaml, const specd::config::Overrides& overrides = {}) {
  try {
    specd::config::load_string(yaml, "x.yaml", overrides);
  } catch (const specd::Error& e) {
    EXPECT_EQ(e.code(), specd::ErrorCode::kConfig);
    return e.what();
  }
  ADD_FAILURE() << "expected a config error for:\n" << yaml;
  return {};
}

fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path dir = fs::path(SPECD_TEST_WORK_DIR) / "config_test";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  return p;
}

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  *status = pclose(pipe);
  return out;
}

TEST(Config, ReadsEverySection) {
  const EngineConfig c = specd::config::load_string(R"(
model:
  path: /models/llama
  dtype: bf16
  device: cuda:1
  max_model_len: 4096
speculative:
  num_speculative_tokens: 5
  disable_by_batch_size: 16
  proposer:
    name: ngram
    prompt_lookup_max: 4
    nested: {a: 1, b: [x, y]}
  verifier: {name: typical_acceptance, posterior_threshold: 0.09}
  dynamic: false
scheduler: {max_num_seqs: 8, max_num_batched_tokens: 512, chunked_prefill: false}
kv_cache: {block_size: 32, memory_mib: 256}
server: {host: 0.0.0.0, port: 9000, api_keys: [k1, k2], chat_template: llama3}
plugins: {paths: [/opt/plugins]}
logging: {level: debug}
)",
                                                    "x.yaml");
  EXPECT_EQ(c.model.path, "/models/llama");
  EXPECT_EQ(c.model.dtype, "bf16");
  EXPECT_EQ(c.model.device, "cuda:1");
  EXPECT_EQ(c.model.max_model_len, 4096);
  EXPECT_TRUE(c.speculative.enabled);
  EXPECT_EQ(c.speculative.num_speculative_tokens, 5);
  EXPECT_EQ(c.speculative.disable_by_batch_size, 16);
  EXPECT_FALSE(c.speculative.dynamic);
  EXPECT_TRUE(
      specd::config::load_string("model: {path: /m}\nspeculative: {proposer: ngram}\n", "y.yaml").speculative.dynamic)
      << "dynamic speculation is the default: it won the benchmark grid (docs/speculative.md)";
  EXPECT_EQ(c.speculative.proposer.name, "ngram");
  EXPECT_EQ(c.speculative.verifier.name, "typical_acceptance");
  EXPECT_EQ(c.scheduler.max_num_seqs, 8);
  EXPECT_FALSE(c.scheduler.chunked_prefill);
  EXPECT_EQ(c.kv_cache.block_size, 32);
  EXPECT_EQ(c.kv_cache.memory_mib, 256);
  EXPECT_EQ(c.server.port, 9000);
  EXPECT_EQ(c.server.api_keys, (std::vector<std::string>{"k1", "k2"}));
  EXPECT_EQ(c.plugins.paths, (std::vector<std::string>{"/opt/plugins"}));
  EXPECT_EQ(c.logging.level, "debug");

  // The proposer's subtree is handed over flattened, with lines, without `name`.
  const auto& entries = c.speculative.proposer.params.entries();
  ASSERT_EQ(entries.size(), 6u);
  EXPECT_EQ(entries[0].key, "prompt_lookup_max");
  EXPECT_EQ(entries[0].text, "4");
  EXPECT_EQ(entries[0].line, 12);  // the raw string opens with a newline
  EXPECT_EQ(entries[1].key, "nested");
  EXPECT_EQ(entries[2].key, "nested.a");
  EXPECT_EQ(entries[4].key, "nested.b[0]");
  EXPECT_STREQ(c.speculative.proposer.params.raw()->path, "speculative.proposer");
}

TEST(Config, DefaultsWhenSectionsAreAbsent) {
  const EngineConfig c = specd::config::load_string("model: {path: m}\n", "x.yaml");
  EXPECT_FALSE(c.speculative.enabled);
  EXPECT_EQ(c.model.device, "cpu");
  EXPECT_EQ(c.kv_cache.block_size, 16);
  EXPECT_EQ(c.scheduler.max_num_seqs, 64);
  EXPECT_EQ(c.server.port, 8000);
  EXPECT_EQ(c.logging.level, "info");
}

TEST(Config, ProposerShorthandAndDefaultVerifier) {
  const EngineConfig c = specd::config::load_string("model: {path: m}\nspeculative:\n  proposer: ngram\n", "x.yaml");
  EXPECT_EQ(c.speculative.proposer.name, "ngram");
  EXPECT_EQ(c.speculative.verifier.name, "rejection");
  EXPECT_EQ(c.speculative.num_speculative_tokens, 4);
}

TEST(Config, ScorerDefaultsToMqaAndTakesAPluginName) {
  EXPECT_EQ(specd::config::load_string("model: {path: m}\nspeculative: {proposer: ngram}\n", "x.yaml")
                .speculative.scorer.name,
            "mqa");
  const EngineConfig c = specd::config::load_string(
      "model: {path: m}\nspeculative:\n  proposer: ngram\n  scorer: batch_expansion\n", "x.yaml");
  EXPECT_EQ(c.speculative.scorer.name, "batch_expansion");
  const std::string e =
      config_error("model: {path: m}\nspeculative:\n  proposer: ngram\n  scorer: {name: mqa, rows: 2}\n");
  EXPECT_NE(e.find("x.yaml:4: speculative.scorer.rows: unknown key (the built-in mqa scorer takes no parameters)"),
            std::string::npos)
      << e;
}

TEST(Config, TensorParallelSizesAreReadByTheCore) {
  const EngineConfig c = specd::config::load_string(
      "model: {path: m, tensor_parallel_size: 2}\nspeculative:\n  proposer:\n    name: draft_model\n"
      "    layers: 1\n    tensor_parallel_size: 1\n",
      "x.yaml");
  EXPECT_EQ(c.model.tensor_parallel_size, 2);
  EXPECT_EQ(c.speculative.proposer_tensor_parallel_size, 1);
  EXPECT_EQ(c.speculative.proposer.params.size(), 1u);  // layers only: the plugin never sees the TP size
  EXPECT_EQ(specd::config::load_string("model: {path: m}\nspeculative: {proposer: ngram}\n", "x.yaml")
                .speculative.proposer_tensor_parallel_size,
            0);  // unset: the target's
  EXPECT_EQ(config_error("model: {path: m}\nspeculative:\n  proposer: {name: ngram, tensor_parallel_size: 0}\n"),
            "x.yaml:3: speculative.proposer.tensor_parallel_size: expected integer in [1, 1024], got \"0\"");
}

TEST(Config, WrongTypeGivesPathAndLine) {
  EXPECT_EQ(config_error("model:\n  path: m\nspeculative:\n  proposer: ngram\n  num_speculative_tokens: five\n"),
            "x.yaml:5: speculative.num_speculative_tokens: expected integer in [1, 32], got \"five\"");
}

TEST(Config, OutOfRange) {
  EXPECT_EQ(config_error("model: {path: m}\nscheduler:\n  max_num_seqs: 0\n"),
            "x.yaml:3: scheduler.max_num_seqs: expected integer in [1, 4096], got \"0\"");
  EXPECT_EQ(config_error("model: {path: m}\nkv_cache: {block_size: 24}\n"),
            "x.yaml:2: kv_cache.block_size: expected a power of two, got 24");
  EXPECT_EQ(config_error("model: {path: m}\nkv_cache:\n  gpu_memory_fraction: 0\n"),
            "x.yaml:3: kv_cache.gpu_memory_fraction: expected number in (0, 1], got \"0\"");
  EXPECT_EQ(config_error("model: {path: m}\nkv_cache:\n  gpu_memory_fraction: 0.5\n"),
            "x.yaml:3: kv_cache.gpu_memory_fraction: sizes the KV cache in GPU memory and applies to model.device "
            "cuda; the model runs on the cpu (kv_cache.memory_mib sizes it there)");
  EXPECT_DOUBLE_EQ(
      specd::config::load_string("model: {path: m, device: cuda}\nkv_cache: {gpu_memory_fraction: 0.5}\n", "x.yaml")
          .kv_cache.gpu_memory_fraction,
      0.5);
  EXPECT_EQ(config_error("model: {path: m, cuda_graphs: false}\n"),
            "x.yaml:1: model.cuda_graphs: applies to model.device cuda; the model runs on the cpu (no graphs there)");
  EXPECT_FALSE(
      specd::config::load_string("model: {path: m, device: cuda, cuda_graphs: false}\n", "x.yaml").model.cuda_graphs);
  EXPECT_TRUE(specd::config::load_string("model: {path: m, device: cuda}\n", "x.yaml").model.cuda_graphs);
}

TEST(Config, UnknownKeysAtEveryLevel) {
  EXPECT_EQ(config_error("model: {path: m}\nmodle: {}\n"),
            "x.yaml:2: modle: unknown key (expected one of: model, speculative, scheduler, kv_cache, server, plugins, "
            "logging)");
  const std::string msg = config_error("model:\n  path: m\n  dtyp: f16\n");
  EXPECT_EQ(msg.rfind("x.yaml:3: model.dtyp: unknown key (expected one of: path,", 0), 0u) << msg;
}

TEST(Config, MissingRequiredFields) {
  EXPECT_EQ(config_error("scheduler: {max_num_seqs: 4}\n"), "x.yaml: model: required section is missing");
  EXPECT_EQ(config_error("model:\n  dtype: f32\n"), "x.yaml:2: model.path: required string is missing");
  EXPECT_EQ(config_error("model: {path: m}\nspeculative:\n  num_speculative_tokens: 3\n"),
            "x.yaml:3: speculative.proposer: required key is missing");
  EXPECT_EQ(config_error("model: {path: m}\nspeculative:\n  proposer: {prompt_lookup_max: 3}\n"),
            "x.yaml:3: speculative.proposer.name: required component name is missing");
}

TEST(Config, WrongShapesAndChoices) {
  EXPECT_EQ(config_error("model: {path: m}\nscheduler: 5\n"), "x.yaml:2: scheduler: expected a map, got \"5\"");
  EXPECT_EQ(config_error("model: {path: m, device: gpu}\n"),
            "x.yaml:1: model.device: expected cpu, cuda, cuda:N or staged, got \"gpu\"");
  EXPECT_EQ(config_error("model: {path: m, dtype: int8}\n"),
            "x.yaml:1: model.dtype: expected one of auto, f32, f16, bf16, q8_0, q4_0, q2_k, q3_k, q4_k, q5_k, q6_k, "
            "q4_k_m, q5_k_m, got \"int8\"");
  EXPECT_EQ(config_error("model: {path: m}\nplugins: {paths: /opt}\n"),
            "x.yaml:2: plugins.paths: expected a list of strings, got \"/opt\"");
  EXPECT_EQ(config_error("model: {path: m}\nserver: {port: 70000}\n"),
            "x.yaml:2: server.port: expected integer in [0, 65535], got \"70000\"");
  EXPECT_EQ(config_error("model: {path: m}\nserver:\n  cors_allow_origins: [\"*\", example.com]\n"),
            "x.yaml:3: server.cors_allow_origins[1]: expected \"*\" or an origin such as https://example.com:8080 "
            "(scheme, host, optional port), got \"example.com\"");
  EXPECT_EQ(specd::config::load_string("model: {path: m}\n", "x.yaml").server.cors_allow_origins,
            (std::vector<std::string>{"*"}));
  EXPECT_EQ(
      specd::config::load_string("model: {path: m}\nserver: {cors_allow_origins: [\"https://a.b:81\"]}\n", "x.yaml")
          .server.cors_allow_origins,
      (std::vector<std::string>{"https://a.b:81"}));
}

TEST(Config, ReportsEveryErrorAtOnce) {
  const std::string msg = config_error(
      "model:\n  path: m\n  device: tpu\nscheduler:\n  max_num_seqs: -1\n  extra: 1\nlogging: {level: loud}\n");
  EXPECT_NE(msg.find("x.yaml:3: model.device"), std::string::npos) << msg;
  EXPECT_NE(msg.find("x.yaml:5: scheduler.max_num_seqs"), std::string::npos) << msg;
  EXPECT_NE(msg.find("x.yaml:6: scheduler.extra: unknown key"), std::string::npos) << msg;
  EXPECT_NE(msg.find("x.yaml:7: logging.level: expected one of trace"), std::string::npos) << msg;
  EXPECT_EQ(std::count(msg.begin(), msg.end(), '\n'), 3) << msg;
}

TEST(Config, InvalidYamlNamesTheLine) {
  const std::string msg = config_error("model:\n  path: [unclosed\n");
  EXPECT_EQ(msg.rfind("x.yaml:", 0), 0u) << msg;
  EXPECT_NE(msg.find("invalid YAML"), std::string::npos) << msg;
}

TEST(Config, OverridesApplyAndAreNamedInErrors) {
  const EngineConfig c = specd::config::load_string(
      "model: {path: m}\nspeculative: {proposer: ngram}\n", "x.yaml",
      {{"speculative.num_speculative_tokens", "7"}, {"model.path", "/other"}, {"plugins.paths", "[/a, /b]"}});
  EXPECT_EQ(c.speculative.num_speculative_tokens, 7);
  EXPECT_EQ(c.model.path, "/other");
  EXPECT_EQ(c.plugins.paths, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(config_error("model: {path: m}\n", {{"scheduler.max_num_seqs", "lots"}}),
            "--set scheduler.max_num_seqs: scheduler.max_num_seqs: expected integer in [1, 4096], got \"lots\"");
  EXPECT_THROW(specd::config::parse_override("novalue"), specd::Error);
  EXPECT_THROW(specd::config::parse_override("a..b=1"), specd::Error);
  EXPECT_EQ(specd::config::parse_override("a.b=c=d").second, "c=d");
}

TEST(Config, RelativePathsResolveAgainstTheConfigFile) {
  const fs::path file = write_file("rel.yaml", "model: {path: ../models/tiny}\nplugins: {paths: [plug]}\n");
  const EngineConfig c = specd::config::load_file(file);
  EXPECT_EQ(fs::path(c.model.path), (file.parent_path() / "../models/tiny").lexically_normal());
  EXPECT_EQ(fs::path(c.plugins.paths.at(0)), file.parent_path() / "plug");
  EXPECT_EQ(c.source_file, file.string());
}

TEST(Config, ModelDirAloneUsesDefaults) {
  const EngineConfig c = specd::config::for_model_dir("/m", {{"kv_cache.block_size", "8"}});
  EXPECT_EQ(c.model.path, "/m");
  EXPECT_EQ(c.kv_cache.block_size, 8);
  EXPECT_FALSE(c.speculative.enabled);
}

TEST(Config, MissingFileIsNotFound) {
  try {
    specd::config::load_file("/no/such/config.yaml");
    FAIL();
  } catch (const specd::Error& e) {
    EXPECT_EQ(e.code(), specd::ErrorCode::kNotFound);
    EXPECT_STREQ(e.what(), "cannot open config file /no/such/config.yaml");
  }
}

TEST(ValidateCli, ValidConfigPrintsSummary) {
  const fs::path file = write_file("ok.yaml", "model: {path: /m}\nkv_cache: {block_size: 8}\n");
  int status = 0;
  const std::string out = run(std::string(SPECD_CLI_PATH) + " validate --config " + file.string(), &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("block_size 8"), std::string::npos) << out;
  EXPECT_NE(out.find("valid"), std::string::npos) << out;
}

TEST(ValidateCli, ReportsSchemaAndPluginErrorsWithLines) {
  const fs::path file = write_file("bad.yaml",
                                   "model: {path: /m}\n"
                                   "plugins: {paths: [" SPECD_TEST_PLUGIN_DIR
                                   "/good]}\n"
                                   "speculative:\n"
                                   "  proposer:\n"
                                   "    name: test_repeat\n"
                                   "    window: 100\n"
                                   "    colour: red\n"
                                   "  verifier: {name: no_such_verifier}\n");
  int status = 0;
  const std::string out = run(std::string(SPECD_CLI_PATH) + " validate --config " + file.string(), &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find(file.string() + ":6: speculative.proposer.window: expected integer in [1, 64], got \"100\""),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(file.string() + ":7: speculative.proposer.colour: unknown key"), std::string::npos) << out;
  EXPECT_NE(out.find(file.string() + ":8: speculative.verifier.name: no verifier named 'no_such_verifier'"),
            std::string::npos)
      << out;

  const std::string out2 = run(
      std::string(SPECD_CLI_PATH) + " validate --config " + file.string() + " --set scheduler.max_num_seqs=0", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out2.find("--set scheduler.max_num_seqs"), std::string::npos) << out2;
}

TEST(ValidateCli, EveryShippedConfigValidates) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(SPECD_SOURCE_DIR) / "configs")) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    int status = 0;
    const std::string out =
        run("env -u SPECD_PLUGIN_PATH " + std::string(SPECD_CLI_PATH) + " validate --config " + entry.path().string(),
            &status);
    EXPECT_EQ(status, 0) << entry.path() << ":\n" << out;
  }
  EXPECT_GT(count, 0) << "configs/ has no YAML files";
}

}  // namespace

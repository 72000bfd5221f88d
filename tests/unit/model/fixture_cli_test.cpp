// The specd-fixture command line: writes loadable checkpoints and fails clearly on bad input.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdlib>

#include "model/checkpoint.hpp"
#include "model_test_util.hpp"

namespace specd::model::test {
namespace {

namespace fs = std::filesystem;

// Runs specd-fixture with `args`; returns the exit status and fills `output` (stdout + stderr).
int run_cli(const std::string& args, std::string* output) {
  const fs::path log = scratch_dir() / "cli.log";
  const std::string cmd =
      std::string(SPECD_BINARY_DIR) + "/bin/specd-fixture " + args + " >'" + log.string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  *output = read_file(log);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(FixtureCli, WritesShardedBf16CheckpointAndDraft) {
  const fs::path out = fixture_dir("cli-tiny-bf16-shards2-layers3");
  std::string log;
  ASSERT_EQ(
      run_cli("--preset tiny --seed 3 --dtype bf16 --shards 2 --layers 3 --mtp-modules 1 --out '" + out.string() + "'",
              &log),
      0)
      << log;
  const auto ckpt = Checkpoint::open(out);
  EXPECT_EQ(ckpt->config().num_layers, 3);
  EXPECT_EQ(ckpt->config().num_mtp_modules, 1);
  EXPECT_EQ(ckpt->find("model.embed_tokens.weight")->dtype, DType::kBF16);
  EXPECT_TRUE(fs::exists(out / "model.safetensors.index.json"));

  // Same values as the library writes for the same options.
  fixture::Options options;
  options.seed = 3;
  options.dtype = DType::kBF16;
  options.layers = 3;
  const std::vector<float> want = fixture::tensor_values(options, "model.layers.2.self_attn.k_proj.weight");
  const TensorView& k = ckpt->require("model.layers.2.self_attn.k_proj.weight", {32, 64});
  std::vector<float> got(want.size());
  Checkpoint::to_f32(k, got.data());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], bf16_to_f32(f32_to_bf16(want[i]))) << i;

  const fs::path draft = fixture_dir("cli-tiny-bf16-shards2-layers3-draft1");
  ASSERT_EQ(run_cli("--draft-of '" + out.string() + "' --draft-layers 1 --out '" + draft.string() + "'", &log), 0)
      << log;
  EXPECT_EQ(Checkpoint::open(draft)->config().num_layers, 1);
}

// The demo's memory-bound model: llama-160m's shape with the bundled tokenizer, whose vocabulary
// and special tokens config.json must then name (a random model generates every id it has).
TEST(FixtureCli, VocabularyAndSpecialTokensFollowTheTokenizerDir) {
  const fs::path out = fixture_dir("cli-tiny-specd-py-tokenizer");
  const std::string tokenizer = std::string(SPECD_SOURCE_DIR) + "/models/specd-py";
  std::string log;
  ASSERT_EQ(
      run_cli("--preset tiny --tokenizer-dir '" + tokenizer + "' --vocab-size 4096 --out '" + out.string() + "'", &log),
      0)
      << log;
  const auto ckpt = Checkpoint::open(out);
  EXPECT_EQ(ckpt->config().vocab_size, 4096);
  EXPECT_EQ(ckpt->config().bos_token_id, 4094);  // <|startoftext|> in models/specd-py
  EXPECT_EQ(ckpt->config().eos_token_ids, std::vector<int32_t>{4095});
  EXPECT_EQ(ckpt->require("model.embed_tokens.weight", {4096, 64}).shape[0], 4096);
}

TEST(FixtureCli, BadInputFailsWithAMessage) {
  std::string log;
  EXPECT_EQ(run_cli("--preset gpt5 --out '" + (scratch_dir() / "x").string() + "'", &log), 1);
  EXPECT_NE(log.find("unknown fixture preset 'gpt5'"), std::string::npos) << log;
  EXPECT_NE(run_cli("--preset tiny --dtype int8 --out x", &log), 0);
  EXPECT_NE(log.find("int8"), std::string::npos) << log;
  EXPECT_EQ(run_cli("--preset tiny", &log), 1);
  EXPECT_NE(log.find("--out is required"), std::string::npos) << log;
  EXPECT_EQ(run_cli("--preset tiny --tokenizer-dir /nonexistent --out '" + (scratch_dir() / "y").string() + "'", &log),
            1);
  EXPECT_NE(log.find("/nonexistent/tokenizer.json"), std::string::npos) << log;
}

}  // namespace
}  // namespace specd::model::test

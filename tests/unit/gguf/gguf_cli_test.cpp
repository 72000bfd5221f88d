// The specd-to-gguf command line: converts a checkpoint, refuses bad input with a message.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "fixture.hpp"
#include "gguf_reader.hpp"
#include "unit/model/model_test_util.hpp"

namespace specd::gguf::test {
namespace {

namespace fs = std::filesystem;
using model::test::fixture_dir;
using model::test::read_file;

// Runs specd-to-gguf with `args` and returns its exit status; `output` gets stdout + stderr.
int run_cli(const fs::path& dir, const std::string& args, std::string* output) {
  const fs::path log = dir / "cli.log";
  const std::string cmd =
      std::string(SPECD_BINARY_DIR) + "/bin/specd-to-gguf " + args + " >'" + log.string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  *output = read_file(log);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(GgufCli, ConvertsAndRefusesBadInput) {
  const fs::path model = fixture::write(fixture::Options{}, fixture_dir("tiny-f32"));
  const fs::path dir = model::test::scratch_dir();
  const std::string out = (dir / "draft.gguf").string();
  std::string log;
  ASSERT_EQ(run_cli(dir, "--model '" + model.string() + "' --out '" + out + "' --type f16 --layers 1 --name d1", &log),
            0)
      << log;
  EXPECT_NE(log.find("llama, 1 layers, llama tokenizer (32000 tokens), 12 tensors (f16), 9 checkpoint tensors not "
                     "written"),
            std::string::npos)
      << log;
  const File f = read_gguf(out);
  EXPECT_EQ(f.at("general.name").s, "d1");
  EXPECT_EQ(f.at("general.file_type").u, 1u);
  EXPECT_EQ(f.at("llama.block_count").u, 1u);

  EXPECT_NE(run_cli(dir, "--model '" + model.string() + "' --out x.gguf --type iq4_xs", &log), 0);
  EXPECT_NE(log.find("--type"), std::string::npos) << log;
  // Rows of 64 are not whole K-quant super-blocks (256): refused naming the tensor, no file left.
  EXPECT_EQ(run_cli(dir, "--model '" + model.string() + "' --out x.gguf --type q4_k", &log), 1);
  EXPECT_NE(log.find("'blk.0.attn_q.weight': ne[0] = 64 is not a whole number of Q4_K blocks"), std::string::npos)
      << log;
  EXPECT_FALSE(std::filesystem::exists(dir / "x.gguf"));
  EXPECT_EQ(run_cli(dir, "--model '" + model.string() + "' --out x.gguf --layers 5", &log), 1);
  EXPECT_NE(log.find("specd-to-gguf: error: --layers 5: "), std::string::npos) << log;
  EXPECT_EQ(run_cli(dir, "--model '" + (dir / "nope").string() + "' --out x.gguf", &log), 1);
  EXPECT_NE(log.find("nope"), std::string::npos) << log;
  EXPECT_NE(run_cli(dir, "--out x.gguf", &log), 0);
  EXPECT_NE(log.find("--model is required"), std::string::npos) << log;
}

}  // namespace
}  // namespace specd::gguf::test

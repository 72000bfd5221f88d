// tools/reference/llama_ref.py, the independent numpy forward that runtime tests compare
// against: it runs on fixture checkpoints and returns finite logits of the right shape.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>

#include "model/checkpoint.hpp"
#include "model_test_util.hpp"

namespace specd::model::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kPython = "/usr/bin/python3";

bool numpy_available() {
  const std::string cmd = std::string(kPython) + " -c 'import numpy' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

json run_reference(const fs::path& model, const std::string& tokens, const fs::path& out, bool hidden) {
  const fs::path script = fs::path(SPECD_SOURCE_DIR) / "tools" / "reference" / "llama_ref.py";
  const fs::path log = out.string() + ".log";
  const std::string cmd = std::string(kPython) + " '" + script.string() + "' --model '" + model.string() +
                          "' --tokens " + tokens + " --out '" + out.string() + "'" + (hidden ? " --hidden" : "") +
                          " >'" + log.string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd << "\n" << read_file(log);
  if (rc != 0) return json();
  return json::parse(read_file(out));
}

#define SKIP_WITHOUT_NUMPY()                                    \
  if (!numpy_available())                                       \
  GTEST_SKIP() << kPython                                       \
               << " cannot import numpy (scripts/bootstrap.sh " \
                  "installs python3-numpy)"

TEST(ReferenceScript, TinyLogitsAreFiniteAndCausal) {
  SKIP_WITHOUT_NUMPY();
  const fs::path model = fixture::write(fixture::Options{}, fixture_dir("tiny-f32"));
  const fs::path dir = scratch_dir();
  const json a = run_reference(model, "1,15043,3186,29892,2", dir / "a.json", false);
  ASSERT_FALSE(a.is_null());
  ASSERT_EQ(a["vocab_size"], 32000);
  ASSERT_EQ(a["logits"].size(), 5u);
  for (const json& row : a["logits"]) {
    ASSERT_EQ(row.size(), 32000u);
    double sum_sq = 0;
    for (const json& v : row) {
      ASSERT_TRUE(std::isfinite(v.get<double>()));
      sum_sq += v.get<double>() * v.get<double>();
    }
    EXPECT_GT(sum_sq, 0.0);
  }
  EXPECT_FALSE(a.contains("hidden"));

  // Changing the last token leaves the earlier positions' logits unchanged (causal mask), and
  // changes the last position's.
  const json b = run_reference(model, "1,15043,3186,29892,500", dir / "b.json", false);
  ASSERT_FALSE(b.is_null());
  for (size_t t = 0; t < 4; ++t) {
    for (size_t v = 0; v < 32000; v += 97) {
      ASSERT_NEAR(a["logits"][t][v].get<double>(), b["logits"][t][v].get<double>(), 1e-9) << t << "," << v;
    }
  }
  EXPECT_NE(a["logits"][4][0].get<double>(), b["logits"][4][0].get<double>());
}

TEST(ReferenceScript, HiddenStatesFeedTheTiedHead) {
  SKIP_WITHOUT_NUMPY();
  fixture::Options options;
  options.preset = "tiny-qwen2";
  options.dtype = DType::kBF16;
  const fs::path model = fixture::write(options, fixture_dir("tiny-qwen2-bf16"));
  const json r = run_reference(model, "151643,9707,11,1879", scratch_dir() / "r.json", true);
  ASSERT_FALSE(r.is_null());
  ASSERT_EQ(r["vocab_size"], 151936);
  ASSERT_EQ(r["logits"].size(), 4u);
  ASSERT_EQ(r["hidden"].size(), 4u);
  ASSERT_EQ(r["hidden"][0].size(), 64u);

  // Tied embeddings: logits = hidden . embed^T, with the embedding read by the C++ reader.
  const auto ckpt = Checkpoint::open(model);
  const TensorView& embed = ckpt->require("model.embed_tokens.weight", {151936, 64});
  std::vector<float> table(static_cast<size_t>(embed.numel()));
  Checkpoint::to_f32(embed, table.data());
  for (size_t t = 0; t < 4; ++t) {
    for (size_t v : {size_t{0}, size_t{9707}, size_t{151935}}) {
      double dot = 0;
      for (size_t d = 0; d < 64; ++d) dot += r["hidden"][t][d].get<double>() * table[v * 64 + d];
      EXPECT_NEAR(r["logits"][t][v].get<double>(), dot, 1e-9 * (1 + std::fabs(dot))) << t << "," << v;
    }
  }
}

TEST(ReferenceScript, RejectsTokensOutsideTheVocabulary) {
  SKIP_WITHOUT_NUMPY();
  const fs::path model = fixture::write(fixture::Options{}, fixture_dir("tiny-f32"));
  const fs::path dir = scratch_dir();
  const fs::path script = fs::path(SPECD_SOURCE_DIR) / "tools" / "reference" / "llama_ref.py";
  const std::string cmd = std::string(kPython) + " '" + script.string() + "' --model '" + model.string() +
                          "' --tokens 1,32000 --out '" + (dir / "x.json").string() + "' >/dev/null 2>&1";
  EXPECT_NE(std::system(cmd.c_str()), 0);
}

}  // namespace
}  // namespace specd::model::test

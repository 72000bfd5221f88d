// specd's logits and final hidden states against the independent numpy reference
// (tools/reference/llama_ref.py), for every Llama-family flavour of the fixtures.
// Error measure, per position: max |specd - ref| / max |ref| over the row; bound 1e-4.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>

#include "runtime_test_util.hpp"

namespace specd::model::test {
namespace {

bool have_numpy() {
  return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

nlohmann::json run_reference(const std::filesystem::path& dir, const std::vector<int32_t>& tokens,
                             const std::string& tag, int64_t context = 0) {
  std::string list;
  for (int32_t t : tokens) {
    if (!list.empty()) list.push_back(',');
    list.append(std::to_string(t));
  }
  const auto out = std::filesystem::path(SPECD_TEST_WORK_DIR) / "runtime" / ("ref-" + tag + ".json");
  const std::string cmd = "/usr/bin/python3 " SPECD_SOURCE_DIR "/tools/reference/llama_ref.py --model '" +
                          dir.string() + "' --tokens " + list + " --out '" + out.string() + "' --hidden --context " +
                          std::to_string(context);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out);
  return nlohmann::json::parse(in);
}

class ReferenceLogits : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceLogits, MatchNumpyReference) {
  if (!have_numpy()) GTEST_SKIP() << "/usr/bin/python3 has no numpy; the reference forward needs it";
  const std::string preset = GetParam();
  const auto dir = fixture(preset);
  auto w = load_weights(dir);
  const auto tokens = some_tokens(11, static_cast<int32_t>(w->config().vocab_size), 1);
  const nlohmann::json ref = run_reference(dir, tokens, preset);

  // Prefill of the first 7 tokens, then 4 more scored in one call: both paths are compared.
  Runner r(w, 4, 64);
  ForwardBatch b;
  const std::vector<int32_t> head(tokens.begin(), tokens.begin() + 7), tail(tokens.begin() + 7, tokens.end());
  r.kv->add_sequence(1);
  ASSERT_TRUE(r.kv->reserve(1, 11));
  b.return_hidden = true;
  b.seqs = {{1, head, LogitsMode::kAll}};
  std::vector<std::vector<float>> logits, hidden;
  for (int pass = 0; pass < 2; ++pass) {
    r.model->forward(b, *r.kv, r.out);
    for (int32_t i = 0; i < r.out.num_rows(); ++i) {
      logits.emplace_back(r.out.logits_row(i).begin(), r.out.logits_row(i).end());
      hidden.emplace_back(r.out.hidden_row(i).begin(), r.out.hidden_row(i).end());
    }
    b.seqs = {{1, tail, LogitsMode::kAll}};
  }
  const auto ref_logits = ref["logits"].get<std::vector<std::vector<float>>>();
  const auto ref_hidden = ref["hidden"].get<std::vector<std::vector<float>>>();
  const double err = max_row_rel_error(logits, ref_logits);
  const double herr = max_row_rel_error(hidden, ref_hidden);
  std::printf("[ %s ] max relative error: logits %.3g, hidden %.3g\n", preset.c_str(), err, herr);
  EXPECT_LT(err, 1e-4) << preset;
  EXPECT_LT(herr, 1e-4) << preset;
}

INSTANTIATE_TEST_SUITE_P(Flavours, ReferenceLogits,
                         ::testing::Values("tiny", "tiny-llama3", "tiny-qwen2", "tiny-qwen3", "tiny-mistral",
                                           "tiny-tied", "tiny-rope-linear", "tiny-llama-bias", "tiny-qwen3-moe",
                                           "tiny-mistral-swa", "tiny-mixtral", "tiny-phi3", "tiny-gemma2",
                                           "tiny-gemma3", "tiny-phi3-longrope"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

// Phi-3's longrope with the long factors (a served context above the original 32) and the short
// ones: each matches the reference given the same context, and the two differ.
TEST(ReferenceLogitsLongRope, LongAndShortFactorsFollowTheServedContext) {
  if (!have_numpy()) GTEST_SKIP() << "/usr/bin/python3 has no numpy; the reference forward needs it";
  const auto dir = fixture("tiny-phi3-longrope");
  auto w = load_weights(dir);
  const auto tokens = some_tokens(11, static_cast<int32_t>(w->config().vocab_size), 1);
  std::vector<std::vector<float>> by_context[2];
  for (const int64_t context : {int64_t{32}, int64_t{4096}}) {
    const nlohmann::json ref = run_reference(dir, tokens, "phi3-longrope-" + std::to_string(context), context);
    Runner r(w, 4, 64);
    r.model->set_context_length(context);
    const auto logits = r.append(1, tokens);
    const double err = max_row_rel_error(logits, ref["logits"].get<std::vector<std::vector<float>>>());
    std::printf("[ longrope, context %lld ] max relative error: logits %.3g\n", static_cast<long long>(context), err);
    EXPECT_LT(err, 1e-4) << context;
    by_context[context > 32 ? 1 : 0] = logits;
  }
  // Above the 1e-4 the matches allow: each context matches its own reference only.
  EXPECT_GT(max_row_rel_error(by_context[0], by_context[1]), 2e-4) << "the long factors must change the logits";
}

}  // namespace
}  // namespace specd::model::test

// EAGLE-3 draft heads in the public checkpoint layout (LlamaForCausalLMEagle3): config.json's
// layer ids in both spellings, the head's forward against the independent numpy reference
// (tools/reference/eagle3_ref.py) from fused target states and from its own outputs, and clear
// errors for bad checkpoints naming the file and tensor.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <random>

#include "runtime_test_util.hpp"
#include "specd/error.hpp"

namespace specd::model::test {
namespace {

namespace fs = std::filesystem;

fs::path head_dir(const fs::path& target, fixture::Eagle3Options o, const std::string& tag) {
  return fixture::write_eagle3_head(target, o, fs::path(SPECD_TEST_WORK_DIR) / "runtime" / ("eagle3-" + tag));
}

std::vector<std::vector<float>> random_rows(int64_t n, int64_t width, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<std::vector<float>> rows(static_cast<size_t>(n), std::vector<float>(static_cast<size_t>(width)));
  for (auto& r : rows)
    for (float& x : r) x = d(rng);
  return rows;
}

nlohmann::json reference(const fs::path& head, const fs::path& target, const std::vector<int32_t>& tokens,
                         const std::vector<std::vector<float>>& inputs, const std::string& tag) {
  const fs::path dir = fs::path(SPECD_TEST_WORK_DIR) / "runtime";
  const fs::path in = dir / ("eagle3-in-" + tag + ".json"), out = dir / ("eagle3-out-" + tag + ".json");
  std::ofstream(in) << nlohmann::json(inputs).dump();
  std::string list;
  for (int32_t t : tokens) {
    if (!list.empty()) list.push_back(',');
    list.append(std::to_string(t));
  }
  const std::string cmd = "/usr/bin/python3 " SPECD_SOURCE_DIR "/tools/reference/eagle3_ref.py --head '" +
                          head.string() + "' --target '" + target.string() + "' --tokens " + list + " --inputs '" +
                          in.string() + "' --out '" + out.string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(out);
  return nlohmann::json::parse(f);
}

TEST(Eagle3Config, LayerIdsInBothSpellingsAndTheDraftVocabulary) {
  const fs::path target = fixture("tiny");
  fixture::Eagle3Options o;
  o.draft_vocab = 512;
  o.aux_layers = {0, 0, 1};  // SGLang / SpecForge: layer outputs
  const auto c = Checkpoint::open(head_dir(target, o, "config"))->config();
  ASSERT_TRUE(c.eagle3.has_value());
  EXPECT_EQ(c.eagle3->aux_layers, (std::vector<int32_t>{1, 1, 2}));  // specd: the stream entering layer l
  EXPECT_EQ(c.eagle3->draft_vocab_size, 512);
  EXPECT_EQ(c.eagle3->target_hidden_size, c.hidden_size);
  // vLLM's top-level spelling counts as specd does: the same ids, unshifted.
  const fs::path top = fs::path(SPECD_TEST_WORK_DIR) / "runtime" / "eagle3-config-top";
  fs::remove_all(top);
  fs::copy(head_dir(target, o, "config"), top, fs::copy_options::recursive);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(top / "config.json"));
  j.erase("eagle_config");
  j["eagle_aux_hidden_state_layer_ids"] = {0, 1, 2};
  std::ofstream(top / "config.json") << j.dump();
  EXPECT_EQ(Checkpoint::open(top)->config().eagle3->aux_layers, (std::vector<int32_t>{0, 1, 2}));
  j["eagle_aux_hidden_state_layer_ids"] = {0, 1};
  std::ofstream(top / "config.json") << j.dump();
  EXPECT_THROW(Checkpoint::open(top), Error);  // a head fuses 3 layers
  // A head is not a model of its own.
  try {
    load_weights(head_dir(target, o, "config"));
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is an EAGLE-3 draft head"), std::string::npos) << e.what();
  }
}

// Fused target states (3 * hidden wide) for 6 tokens, then the head's own outputs (hidden wide)
// on another sequence: logits at the draft vocabulary's target ids and the pre-norm states match
// the reference within 1e-4 of the row's scale; every other id is -inf.
TEST(Eagle3Forward, MatchesTheNumpyReference) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 has no numpy; the reference forward needs it";
  const fs::path target = fixture("tiny");
  fixture::Eagle3Options o;
  o.draft_vocab = 300;
  o.layer_std = 0.1;
  const fs::path head = head_dir(target, o, "forward");
  const auto t = load_weights(target);
  const auto w = LlamaWeights::load_eagle3(Checkpoint::open(head), t, DType::kF32);
  ASSERT_TRUE(w->is_eagle3());
  const int64_t H = t->config().hidden_size, V = t->config().vocab_size;
  Runner r(w, 4, 64);
  const auto tokens = some_tokens(6, static_cast<int32_t>(V), 5);
  for (const int64_t width : {3 * H, H}) {
    const auto inputs = random_rows(6, width, static_cast<uint32_t>(width));
    std::vector<float> flat;
    for (const auto& row : inputs) flat.insert(flat.end(), row.begin(), row.end());
    const auto seq = static_cast<kv::SeqId>(width);
    r.kv->add_sequence(seq);
    ASSERT_TRUE(r.kv->reserve(seq, 6));
    ForwardBatch b;
    b.seqs = {{seq, tokens, LogitsMode::kAll}};
    b.input_hidden = flat.data();
    b.input_hidden_width = width;
    b.return_hidden = true;
    r.model->forward(b, *r.kv, r.out);
    const nlohmann::json ref = reference(head, target, tokens, inputs, std::to_string(width));
    const auto ids = ref["target_ids"].get<std::vector<int64_t>>();
    ASSERT_EQ(static_cast<int64_t>(ids.size()), 300);
    for (int32_t p = 0; p < 6; ++p) {
      const auto logits = r.out.logits_row(p);
      const auto want = ref["draft_logits"][static_cast<size_t>(p)].get<std::vector<double>>();
      double scale = 0, err = 0;
      for (size_t i = 0; i < ids.size(); ++i) {
        scale = std::max(scale, std::abs(want[i]));
        err = std::max(err, std::abs(logits[static_cast<size_t>(ids[i])] - want[i]));
      }
      EXPECT_LT(err, 1e-4 * scale) << "width " << width << " position " << p;
      size_t finite = 0;
      for (float x : logits) finite += std::isfinite(x) ? 1 : 0;
      EXPECT_EQ(finite, ids.size());
      const auto hidden = r.out.hidden_row(p);
      const auto want_h = ref["hidden"][static_cast<size_t>(p)].get<std::vector<double>>();
      double hs = 0, he = 0;
      for (int64_t i = 0; i < H; ++i) {
        hs = std::max(hs, std::abs(want_h[static_cast<size_t>(i)]));
        he = std::max(he, std::abs(hidden[static_cast<size_t>(i)] - want_h[static_cast<size_t>(i)]));
      }
      EXPECT_LT(he, 1e-4 * hs) << "pre-norm state, width " << width << " position " << p;
    }
  }
  // Rows of another width are refused.
  std::vector<float> bad(6 * 2 * static_cast<size_t>(H));
  ForwardBatch b;
  r.kv->add_sequence(99);
  ASSERT_TRUE(r.kv->reserve(99, 6));
  b.seqs = {{99, tokens, LogitsMode::kLast}};
  b.input_hidden = bad.data();
  b.input_hidden_width = 2 * H;
  EXPECT_THROW(r.model->forward(b, *r.kv, r.out), Error);
}

TEST(Eagle3Errors, BadCheckpointsNameTheFileAndTensor) {
  const fs::path target = fixture("tiny");
  const auto t = load_weights(target);
  auto expect = [&](const std::string& corrupt, const std::string& needle) {
    fixture::Eagle3Options o;
    o.draft_vocab = 64;
    o.corrupt = corrupt;
    const fs::path head = head_dir(target, o, corrupt);
    try {
      LlamaWeights::load_eagle3(Checkpoint::open(head), t, DType::kF32);
      FAIL() << corrupt << ": expected an error";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(needle), std::string::npos) << corrupt << ": " << what;
      EXPECT_NE(what.find(head.filename().string()), std::string::npos) << corrupt << ": " << what;
    }
  };
  expect("fc_width", "tensor fc.weight has shape");
  expect("d2t_range", "d2t[63]");
  expect("missing_o_proj", "missing tensor midlayer.self_attn.o_proj.weight");
  // A head written for another target (tiny-llama3: another vocabulary) is refused.
  const fs::path other = fixture("tiny-llama3");
  fixture::Eagle3Options o;
  o.draft_vocab = 64;
  try {
    LlamaWeights::load_eagle3(Checkpoint::open(head_dir(other, o, "other")), t, DType::kF32);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not the target's"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace specd::model::test

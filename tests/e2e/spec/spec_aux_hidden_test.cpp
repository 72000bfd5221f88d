// Target hidden states of named layers (ABI 1.3 aux_hidden_layers, EAGLE-3's features): a
// proposer that asks for layers 0, 1 and L gets, for every committed position exactly once and in
// order, the residual stream entering those layers, as one forward over the whole sequence
// computes it, whatever the prefill chunking and however many drafts each step accepted. A layer
// the target does not have is refused at load.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kv/kv_cache.hpp"
#include "model/checkpoint.hpp"
#include "model/llama.hpp"
#include "spec_test_util.hpp"
#include "specd/error.hpp"

namespace fs = std::filesystem;
using specd::spec_test::Generation;
using specd::spec_test::run_engine;

namespace {

struct Dumped {
  int64_t first = 0;  // position of the first row
  std::vector<float> rows;
};

// The test_repeat proposer's dump: records of (seq id, first position, float count, floats).
std::vector<Dumped> read_dump(const fs::path& file) {
  std::vector<Dumped> out;
  FILE* f = std::fopen(file.string().c_str(), "rb");
  if (f == nullptr) return out;
  int64_t header[3];
  while (std::fread(header, sizeof(header), 1, f) == 1) {
    Dumped d;
    d.first = header[1];
    d.rows.resize(static_cast<size_t>(header[2]));
    EXPECT_EQ(std::fread(d.rows.data(), sizeof(float), d.rows.size(), f), d.rows.size());
    out.push_back(std::move(d));
  }
  std::fclose(f);
  return out;
}

// The reference: one forward over `tokens` asking for `layers`: [T, layers, hidden].
std::vector<float> reference_aux(const fs::path& dir, const std::vector<int32_t>& tokens,
                                 const std::vector<int32_t>& layers) {
  auto weights = specd::model::LlamaWeights::load(
      std::shared_ptr<const specd::model::Checkpoint>(specd::model::Checkpoint::open(dir)), -1,
      specd::kernels::DType::kF32);
  specd::model::LlamaModel model(weights);
  specd::kv::KvCache kv(model.kv_shape(16, specd::kernels::DType::kF32), 64);
  kv.add_sequence(1);
  EXPECT_TRUE(kv.reserve(1, static_cast<int32_t>(tokens.size())));
  specd::model::ForwardBatch b;
  b.seqs.push_back({1, tokens, specd::model::LogitsMode::kLast});
  b.return_hidden = true;
  b.hidden_all = true;
  b.aux_layers = layers;
  specd::model::ForwardOutput out;
  model.forward(b, kv, out);
  return out.aux_hidden;
}

std::string plugin_paths() {
  return std::string("[") + SPECD_BINARY_DIR + "/test-plugins/good]";
}

TEST(SpecAuxHidden, EveryCommittedPositionArrivesOnceWithItsLayerStates) {
  const fs::path target = specd::spec_test::target_fixture(false, 0.004);
  const auto L =
      static_cast<int32_t>(specd::model::Checkpoint::open(target)->config().num_layers);  // the fixture's layer count
  const std::vector<int32_t> layers = {0, 1, L};
  const fs::path dump = specd::spec_test::work_dir() / "aux-dump.bin";
  auto requests = specd::spec_test::mixed_requests(2, 41);
  for (int r = 0; r < 2; ++r) {  // one request per engine: one sequence per dump
    fs::remove(dump);
    specd::Request req = requests[static_cast<size_t>(r)];
    req.sampling.max_tokens = 12;
    const auto cfg = specd::config::for_model_dir(
        target.string(), {{"plugins.paths", plugin_paths()},
                          {"speculative.num_speculative_tokens", "3"},
                          {"speculative.proposer.name", "test_repeat"},
                          {"speculative.proposer.aux_layers", "[0, 1, " + std::to_string(L) + "]"},
                          {"speculative.proposer.aux_dump", dump.string()},
                          {"speculative.verifier.name", "greedy"},
                          {"speculative.dynamic", "false"},
                          {"scheduler.max_num_batched_tokens", "8"},  // the prompt in chunks
                          {"kv_cache.memory_mib", "64"}});
    const std::vector<Generation> gen = run_engine(cfg, {req});
    ASSERT_TRUE(gen[0].error.empty()) << gen[0].error;
    std::vector<int32_t> tokens = req.prompt_ids;
    tokens.insert(tokens.end(), gen[0].tokens.begin(), gen[0].tokens.end());
    const std::vector<float> want = reference_aux(target, tokens, layers);
    const size_t per = want.size() / tokens.size();
    int64_t next = 0;  // positions arrive in order, each once
    for (const Dumped& d : read_dump(dump)) {
      ASSERT_EQ(d.first, next) << "request " << r;
      const auto n = static_cast<int64_t>(d.rows.size() / per);
      for (size_t i = 0; i < d.rows.size(); ++i) {
        const float w = want[static_cast<size_t>(d.first) * per + i];
        ASSERT_NEAR(d.rows[i], w, 1e-4f * (1.0f + std::fabs(w)))
            << "request " << r << " position " << d.first + i / per;
      }
      next += n;
    }
    // Every position but the last two (the final step's token and the one it emitted) came.
    EXPECT_GE(next, static_cast<int64_t>(tokens.size()) - 1 - 3) << "request " << r;
    EXPECT_GT(next, static_cast<int64_t>(req.prompt_ids.size())) << "decode positions came too";
  }
}

TEST(SpecAuxHidden, ALayerTheTargetLacksIsRefusedAtLoad) {
  const fs::path target = specd::spec_test::target_fixture(false, 0.02);
  const auto cfg = specd::config::for_model_dir(target.string(), {{"plugins.paths", plugin_paths()},
                                                                  {"speculative.proposer.name", "test_repeat"},
                                                                  {"speculative.proposer.aux_layers", "[0, 99]"},
                                                                  {"kv_cache.memory_mib", "64"}});
  try {
    specd::Engine engine(cfg);
    FAIL() << "expected a refusal";
  } catch (const specd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("asks for the hidden states of layer 99"), std::string::npos) << e.what();
  }
}

}  // namespace

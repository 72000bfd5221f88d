// Tensor parallelism's forward (label `distributed`): this binary runs under `mpirun -np 2`
// (tests/distributed/CMakeLists.txt). Every rank loads its shard of a fixture checkpoint and
// runs the same forwards over its group; rank 0 also runs the whole model (TP 1) and compares:
// every logits row within 1e-5 relative (max |a - b| / max |b|) for each fixture architecture
// (Llama 2 with GQA, Llama 3, Qwen2 with q/k/v biases and tied embeddings, Qwen3's q/k norms, a
// Llama with o_proj biases, tied embeddings, Mistral), the dtypes sharded at load, and GGUF
// files mapped in place. The ranks must make the same collective calls in the same order, so
// no test returns early on one rank only.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "convert.hpp"
#include "dist/session.hpp"
#include "e2e/model/runtime_test_util.hpp"
#include "specd/error.hpp"

namespace specd::model::test {
namespace {

namespace fs = std::filesystem;
using specd::gguf::TensorType;

dist::Session* g_session = nullptr;

dist::Communicator& world() {
  return g_session->world();
}

// `make` runs on rank 0 first (it writes files), then on the others (which find them written).
template <class Make>
fs::path on_rank0_first(Make make) {
  fs::path p;
  if (world().rank() == 0) p = make();
  world().barrier();
  if (world().rank() != 0) p = make();
  return p;
}

struct Case {
  std::string preset;
  std::string format;  // "safetensors" or a GGUF tensor type
  std::optional<DType> dtype;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string n = info.param.preset + "_" + info.param.format;
  if (info.param.dtype) n += std::string("_") + std::string(kernels::dtype_name(*info.param.dtype));
  for (char& ch : n) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return n;
}

std::shared_ptr<const Checkpoint> open_case(const Case& c) {
  const fs::path dir = on_rank0_first([&] { return fixture(c.preset); });
  if (c.format == "safetensors") return Checkpoint::open(dir);
  const fs::path file = on_rank0_first([&] {
    const fs::path out = fs::path(SPECD_TEST_WORK_DIR) / "distributed" / (c.preset + "-" + c.format + ".gguf");
    if (world().rank() == 0) {
      fs::create_directories(out.parent_path());
      specd::gguf::ConvertOptions o;
      o.type = specd::gguf::parse_tensor_type(c.format);
      specd::gguf::convert_checkpoint(dir, out, o);
    }
    return out;
  });
  return Checkpoint::open(file);
}

// Two sequences: prefills of 7 and 5 tokens in one call, then 4 tokens scored for the first
// (a speculative step's k+1 rows) next to a 1-token decode of the second. All logits rows.
std::vector<std::vector<float>> run(Runner& r, int32_t vocab) {
  const std::vector<int32_t> a = some_tokens(11, vocab, 1), b = some_tokens(6, vocab, 2);
  std::vector<std::vector<float>> rows;
  auto step = [&](std::span<const int32_t> ta, std::span<const int32_t> tb) {
    for (auto [seq, t] : {std::pair{kv::SeqId{1}, ta}, std::pair{kv::SeqId{2}, tb}}) {
      if (!r.kv->has_sequence(seq)) r.kv->add_sequence(seq);
      EXPECT_TRUE(r.kv->reserve(seq, static_cast<int32_t>(t.size())));
    }
    ForwardBatch batch;
    batch.seqs.push_back({1, ta, LogitsMode::kAll});
    batch.seqs.push_back({2, tb, LogitsMode::kAll});
    r.model->forward(batch, *r.kv, r.out);
    for (size_t s = 0; s < 2; ++s) {
      const auto part = r.rows(s);
      rows.insert(rows.end(), part.begin(), part.end());
    }
  };
  step(std::span(a).first(7), std::span(b).first(5));
  step(std::span(a).subspan(7), std::span(b).subspan(5));
  return rows;
}

class TensorParallelForward : public ::testing::TestWithParam<Case> {};

TEST_P(TensorParallelForward, LogitsEqualTp1) {
  const Case& c = GetParam();
  const std::shared_ptr<const Checkpoint> ckpt = open_case(c);
  const WeightPlacement placement = c.format == "safetensors" ? WeightPlacement::kCopy : WeightPlacement::kMap;
  const dist::Communicator& group = world();
  const TensorShard shard{group.rank(), group.size()};
  auto sharded = LlamaWeights::load(ckpt, -1, c.dtype, placement, shard);
  ASSERT_EQ(sharded->shard(), shard);
  const auto vocab = static_cast<int32_t>(ckpt->config().vocab_size);
  Runner tp(sharded, 4, 64, -1, DType::kF32, &world());
  const auto tp_rows = run(tp, vocab);
  if (group.rank() != 0) return;  // the collectives are done: only rank 0 compares

  auto whole = LlamaWeights::load(ckpt, -1, c.dtype, placement);
  Runner tp1(whole, 4, 64);
  const auto rows = run(tp1, vocab);
  ASSERT_EQ(tp_rows.size(), rows.size());
  EXPECT_LE(max_row_rel_error(tp_rows, rows), 1e-5);
  // Each rank holds about 1/N of what a decode step reads (norms are replicated).
  EXPECT_LT(static_cast<double>(sharded->decode_bytes(sharded->num_layers())),
            0.55 * static_cast<double>(whole->decode_bytes(whole->num_layers())));
  // Its KV cache holds only its KV heads.
  EXPECT_EQ(tp.model->kv_shape(16, DType::kF32).num_kv_heads * group.size(),
            tp1.model->kv_shape(16, DType::kF32).num_kv_heads);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, TensorParallelForward,
    ::testing::Values(Case{"tiny", "safetensors", DType::kF32}, Case{"tiny-llama3", "safetensors", DType::kF32},
                      Case{"tiny-qwen2", "safetensors", DType::kF32}, Case{"tiny-qwen3", "safetensors", DType::kF32},
                      Case{"tiny-llama-bias", "safetensors", DType::kF32},
                      Case{"tiny-tied", "safetensors", DType::kF32}, Case{"tiny-mistral", "safetensors", DType::kF32},
                      Case{"tiny", "safetensors", DType::kBF16}, Case{"tiny", "safetensors", DType::kQ8_0},
                      Case{"tiny", "safetensors", DType::kQ4_0}, Case{"tiny", "f32", std::nullopt},
                      Case{"tiny-qwen2", "q8_0", std::nullopt}, Case{"tiny-qwen3-moe", "safetensors", DType::kF32},
                      Case{"tiny-mixtral", "safetensors", DType::kQ8_0}, Case{"tiny-mixtral", "f32", std::nullopt},
                      Case{"tiny-phi3", "safetensors", DType::kQ8_0}, Case{"tiny-gemma2", "safetensors", DType::kF32},
                      Case{"tiny-gemma3", "f32", std::nullopt}),
    case_name);

// Rank r's value at element i (every rank can compute every rank's part).
float part_of(int rank, int64_t i) {
  return std::sin(0.37f * static_cast<float>(i) + static_cast<float>(rank)) * 1.7f;
}

TEST(MpiCommunicator, CollectivesOnSmallAndLargeMessages) {
  dist::Communicator& c = world();
  // Below and above the size where all_reduce_sum switches from one all-gather to all-to-all +
  // all-gather (2^16 floats gathered), with counts that do not divide by the ranks.
  for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{40001}, int64_t{100003}}) {
    std::vector<float> data(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) data[static_cast<size_t>(i)] = part_of(c.rank(), i);
    c.all_reduce_sum(data.data(), count);
    int64_t wrong = 0;
    for (int64_t i = 0; i < count; ++i) {
      float want = part_of(0, i);
      for (int r = 1; r < c.size(); ++r) want += part_of(r, i);  // rank order, as documented
      wrong += data[static_cast<size_t>(i)] != want;
    }
    EXPECT_EQ(wrong, 0) << "count " << count;

    std::vector<float> mine(static_cast<size_t>(count), static_cast<float>(c.rank() + 1));
    std::vector<float> all(static_cast<size_t>(count * c.size()), -1.0f);
    c.all_gather(mine.data(), all.data(), count);
    for (int r = 0; r < c.size(); ++r) EXPECT_EQ(all[static_cast<size_t>(r * count + count - 1)], r + 1.0f);
  }
  std::vector<int32_t> ids = {c.rank() == 0 ? 42 : 0, c.rank() == 0 ? -7 : 0};
  c.broadcast(ids.data(), ids.size() * sizeof(int32_t), 0);
  EXPECT_EQ(ids, (std::vector<int32_t>{42, -7}));
}

TEST(TensorParallelShapes, HeadsThatDoNotDivideAreRefusedNamingTheField) {
  // tiny: 4 attention heads, 2 KV heads (GQA).
  const std::shared_ptr<const Checkpoint> ckpt = open_case({"tiny", "safetensors", DType::kF32});
  try {
    LlamaWeights::load(ckpt, -1, DType::kF32, WeightPlacement::kCopy, {0, 4});
    ADD_FAILURE() << "4 ranks over 2 KV heads loaded";
  } catch (const specd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_key_value_heads = 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
  try {
    LlamaWeights::load(ckpt, -1, DType::kF32, WeightPlacement::kCopy, {0, 3});
    ADD_FAILURE() << "3 ranks over 4 heads loaded";
  } catch (const specd::Error& e) {
    EXPECT_NE(std::string(e.what()).find("num_attention_heads = 4"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace specd::model::test

int main(int argc, char** argv) {
  specd::dist::Session session(&argc, &argv);
  specd::model::test::g_session = &session;
  ::testing::InitGoogleTest(&argc, argv);
  if (!session.leader()) {  // one report: rank 0's
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  // A one-rank run (no mpirun) compares a one-rank "shard" with the whole model: it passes but
  // tests nothing distributed, so refuse it.
  if (session.size() < 2) {
    std::fprintf(stderr, "run this test under mpirun -np 2 (ctest does)\n");
    return 1;
  }
  const int status = RUN_ALL_TESTS();
  // Rank 0's session end is a control message (dist/session.hpp): take it like a follower.
  std::vector<std::byte> message;
  if (!session.leader()) {
    while (session.control().receive(message)) {
    }
  }
  return status;
}

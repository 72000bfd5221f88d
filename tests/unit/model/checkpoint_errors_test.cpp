// Broken checkpoints: every refusal is a specd::Error that names the file and the problem.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>

#include "model/checkpoint.hpp"
#include "model/weights.hpp"
#include "model_test_util.hpp"

namespace specd::model::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A safetensors file: 8-byte length (declared_len, or the header's true length), the header,
// then data_bytes zero bytes.
std::string safetensors_bytes(const std::string& header, size_t data_bytes, int64_t declared_len = -1) {
  uint64_t len = declared_len < 0 ? header.size() : static_cast<uint64_t>(declared_len);
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  return out + header + std::string(data_bytes, '\0');
}

// A model directory with the tiny fixture's config.json and the given weights file contents.
fs::path model_dir_with(const std::string& safetensors) {
  const fs::path tiny = fixture::write(fixture::Options{}, fixture_dir("tiny-f32"));
  const fs::path dir = scratch_dir();
  fs::copy_file(tiny / "config.json", dir / "config.json");
  write_file(dir / "model.safetensors", safetensors);
  return dir;
}

std::string tensor_header(const std::string& name, const std::string& dtype, const std::string& shape, uint64_t begin,
                          uint64_t end) {
  return "{\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}}";
}

void expect_open_error(const fs::path& dir, ErrorCode code, std::initializer_list<std::string> substrings) {
  expect_error([&] { Checkpoint::open(dir); }, code, substrings);
}

TEST(CheckpointErrors, FileShorterThanTheHeaderLength) {
  const fs::path dir = model_dir_with("abc");
  expect_open_error(dir, ErrorCode::kModelFormat, {(dir / "model.safetensors").string(), "truncated"});
}

TEST(CheckpointErrors, HeaderLengthPastEndOfFile) {
  const std::string header = tensor_header("model.norm.weight", "F32", "[4]", 0, 16);
  const fs::path dir = model_dir_with(safetensors_bytes(header, 16, 100000));
  expect_open_error(dir, ErrorCode::kModelFormat,
                    {"model.safetensors", "header length 100000 runs past the end of the file"});
}

TEST(CheckpointErrors, TruncatedHeader) {
  // The file ends in the middle of the JSON header.
  const std::string header = tensor_header("model.norm.weight", "F32", "[4]", 0, 16);
  const std::string full = safetensors_bytes(header, 0);
  const fs::path dir = model_dir_with(full.substr(0, full.size() - 10));
  expect_open_error(dir, ErrorCode::kModelFormat, {"model.safetensors", "runs past the end of the file"});
}

TEST(CheckpointErrors, InvalidHeaderJson) {
  const fs::path dir = model_dir_with(safetensors_bytes("{\"model.norm.weight\": {\"dtype\": ", 0));
  expect_open_error(dir, ErrorCode::kModelFormat, {"model.safetensors", "invalid safetensors header JSON"});
}

TEST(CheckpointErrors, HeaderNotAnObject) {
  const fs::path dir = model_dir_with(safetensors_bytes("[1, 2, 3]", 0));
  expect_open_error(dir, ErrorCode::kModelFormat, {"model.safetensors", "not a JSON object"});
}

TEST(CheckpointErrors, MalformedEntry) {
  const fs::path dir =
      model_dir_with(safetensors_bytes("{\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[4]}}", 0));
  expect_open_error(dir, ErrorCode::kModelFormat, {"model.safetensors", "model.norm.weight", "data_offsets"});
}

TEST(CheckpointErrors, OffsetsPastEndOfFile) {
  // Header promises 256 floats, the file holds 100 bytes of data: a truncated download.
  const std::string header = tensor_header("model.norm.weight", "F32", "[256]", 0, 1024);
  const fs::path dir = model_dir_with(safetensors_bytes(header, 100));
  expect_open_error(dir, ErrorCode::kModelFormat,
                    {"model.safetensors", "model.norm.weight", "[0, 1024]", "past the end of the file"});
}

TEST(CheckpointErrors, OffsetsMisSizedForDtypeAndShape) {
  const std::string header = tensor_header("model.norm.weight", "BF16", "[4, 4]", 0, 64);
  const fs::path dir = model_dir_with(safetensors_bytes(header, 64));
  expect_open_error(dir, ErrorCode::kModelFormat,
                    {"model.safetensors", "model.norm.weight", "span 64 bytes", "needs 32"});
}

TEST(CheckpointErrors, ReversedOffsets) {
  const std::string header = tensor_header("model.norm.weight", "F32", "[0]", 16, 8);
  const fs::path dir = model_dir_with(safetensors_bytes(header, 16));
  expect_open_error(dir, ErrorCode::kModelFormat, {"model.safetensors", "reversed"});
}

TEST(CheckpointErrors, OverlappingTensors) {
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})";
  const fs::path dir = model_dir_with(safetensors_bytes(header, 24));
  expect_open_error(dir, ErrorCode::kModelFormat, {"model.safetensors", "'a'", "'b'", "overlap"});
}

TEST(CheckpointErrors, UnsupportedDtype) {
  for (const char* dtype : {"I8", "F64"}) {
    const size_t size = std::string(dtype) == "I8" ? 4 : 32;
    const std::string header = tensor_header("model.layers.0.mlp.up_proj.weight", dtype, "[4]", 0, size);
    const fs::path dir = model_dir_with(safetensors_bytes(header, size));
    expect_open_error(dir, ErrorCode::kUnsupported,
                      {(dir / "model.safetensors").string(), "model.layers.0.mlp.up_proj.weight", dtype});
  }
}

TEST(CheckpointErrors, MissingTensorAndWrongShape) {
  const fs::path dir = scratch_dir();
  const fs::path tiny = fixture::write(fixture::Options{}, fixture_dir("tiny-f32"));
  fs::copy_file(tiny / "config.json", dir / "config.json");
  // The last layer the config declares is present (open() checks the layer count); the rest is not.
  fixture::write_safetensors(
      dir / "model.safetensors",
      {fixture::tensor_from_f32("model.norm.weight", DType::kF32, {32}, std::vector<float>(32, 1.0f)),
       fixture::tensor_from_f32("model.layers.1.input_layernorm.weight", DType::kF32, {2}, {1.0f, 1.0f})});
  const auto ckpt = Checkpoint::open(dir);
  expect_error(
      [&] {
        ckpt->require("model.embed_tokens.weight", {32000, 64});
      },
      ErrorCode::kModelFormat, {"missing tensor model.embed_tokens.weight", dir.string()});
  expect_error([&] { ckpt->require("model.norm.weight", {64}); }, ErrorCode::kModelFormat,
               {"model.norm.weight", "[32]", "expected [64]", (dir / "model.safetensors").string()});
  EXPECT_EQ(ckpt->find("model.embed_tokens.weight"), nullptr);
  std::vector<float> values(32);
  Checkpoint::to_f32(ckpt->require("model.norm.weight", {32}), values.data());
  EXPECT_EQ(values, std::vector<float>(32, 1.0f));
}

TEST(CheckpointErrors, MissingConfigJson) {
  const fs::path dir = scratch_dir();
  fixture::write_safetensors(dir / "model.safetensors", {});
  expect_open_error(dir, ErrorCode::kNotFound, {"missing config.json", dir.string()});
}

TEST(CheckpointErrors, MissingWeights) {
  const fs::path dir = model_dir_with("");
  fs::remove(dir / "model.safetensors");
  expect_open_error(dir, ErrorCode::kNotFound, {"model.safetensors", "model.safetensors.index.json", dir.string()});
  expect_open_error(dir / "nope", ErrorCode::kNotFound, {"nope", "does not exist"});
}

TEST(CheckpointErrors, UnsupportedArchitecture) {
  const fs::path dir = model_dir_with(safetensors_bytes("{}", 0));
  json config = json::parse(read_file(dir / "config.json"));
  config["architectures"] = {"GPT2LMHeadModel"};
  write_file(dir / "config.json", config.dump());
  expect_open_error(dir, ErrorCode::kUnsupported, {(dir / "config.json").string(), "GPT2LMHeadModel"});
}

TEST(CheckpointErrors, MissingConfigField) {
  const fs::path dir = model_dir_with(safetensors_bytes("{}", 0));
  json config = json::parse(read_file(dir / "config.json"));
  config.erase("hidden_size");
  write_file(dir / "config.json", config.dump());
  expect_open_error(dir, ErrorCode::kModelFormat, {(dir / "config.json").string(), "missing field 'hidden_size'"});
}

// ---- sharded checkpoints --------------------------------------------------------------------

fs::path sharded_dir() {
  fixture::Options options;
  options.shards = 2;
  const fs::path src = fixture::write(options, fixture_dir("tiny-sharded2"));
  const fs::path dir = scratch_dir();
  for (const auto& entry : fs::directory_iterator(src)) {
    if (entry.path().filename().string().front() != '.') fs::copy_file(entry.path(), dir / entry.path().filename());
  }
  return dir;
}

TEST(CheckpointErrors, IndexNamesAMissingShard) {
  const fs::path dir = sharded_dir();
  fs::remove(dir / "model-00002-of-00002.safetensors");
  expect_open_error(dir, ErrorCode::kNotFound,
                    {"model.safetensors.index.json", "model-00002-of-00002.safetensors", "does not exist"});
}

TEST(CheckpointErrors, IndexMapsATensorToTheWrongShard) {
  const fs::path dir = sharded_dir();
  json index = json::parse(read_file(dir / "model.safetensors.index.json"));
  index["weight_map"]["model.embed_tokens.weight"] = "model-00002-of-00002.safetensors";
  index["weight_map"]["model.ghost.weight"] = "model-00001-of-00002.safetensors";
  write_file(dir / "model.safetensors.index.json", index.dump());
  expect_open_error(dir, ErrorCode::kModelFormat, {"model.safetensors.index.json", "does not contain"});
}

TEST(CheckpointErrors, IndexShardOutsideTheModelDirectory) {
  const fs::path dir = sharded_dir();
  json index = json::parse(read_file(dir / "model.safetensors.index.json"));
  index["weight_map"]["model.norm.weight"] = "../elsewhere.safetensors";
  write_file(dir / "model.safetensors.index.json", index.dump());
  expect_open_error(dir, ErrorCode::kModelFormat, {"model.safetensors.index.json", "../elsewhere.safetensors"});
}

TEST(CheckpointErrors, InvalidIndexJson) {
  const fs::path dir = sharded_dir();
  write_file(dir / "model.safetensors.index.json", "{\"weight_map\": ");
  expect_open_error(dir, ErrorCode::kModelFormat, {"model.safetensors.index.json", "invalid JSON"});
}

TEST(CheckpointErrors, TensorInTwoShards) {
  const fs::path dir = sharded_dir();
  // Shard 2 gets a second copy of a tensor that shard 1 holds.
  const auto one = [] { return fixture::tensor_from_f32("model.embed_tokens.weight", DType::kF32, {2}, {1.0f, 2.0f}); };
  fixture::write_safetensors(dir / "model-00002-of-00002.safetensors", {one()});
  json index = json::parse(read_file(dir / "model.safetensors.index.json"));
  for (auto& [name, shard] : index["weight_map"].items()) shard = "model-00001-of-00002.safetensors";
  index["weight_map"]["model.embed_tokens.weight"] = "model-00002-of-00002.safetensors";
  write_file(dir / "model.safetensors.index.json", index.dump());
  expect_open_error(dir, ErrorCode::kModelFormat, {"model.embed_tokens.weight", "also in"});
}

TEST(CheckpointErrors, MtpModulesNotNumberedFromZero) {
  const fs::path dir = model_dir_with("");
  fixture::write_safetensors(dir / "model.safetensors",
                             {fixture::tensor_from_f32("mtp.1.enorm.weight", DType::kF32, {2}, {1.0f, 1.0f})});
  expect_open_error(dir, ErrorCode::kModelFormat, {"mtp", "0..0"});
}

}  // namespace
}  // namespace specd::model::test

namespace specd::model::test {
namespace {

// ---- mixtures of experts --------------------------------------------------------------------

fs::path moe_dir_with(const std::string& preset, const std::function<void(json&)>& edit) {
  fixture::Options o;
  o.preset = preset;
  const fs::path src = fixture::write(o, fixture_dir(preset + "-f32"));
  const fs::path dir = scratch_dir();
  for (const auto& entry : fs::directory_iterator(src))
    if (entry.path().filename().string().front() != '.') fs::copy_file(entry.path(), dir / entry.path().filename());
  json config = json::parse(read_file(dir / "config.json"));
  edit(config);
  write_file(dir / "config.json", config.dump());
  return dir;
}

TEST(CheckpointErrors, MoeFieldsOutOfRangeOrUnsupported) {
  expect_open_error(moe_dir_with("tiny-qwen3-moe", [](json& c) { c["num_experts_per_tok"] = 9; }),
                    ErrorCode::kModelFormat, {"config.json", "num_experts_per_tok 9 exceeds the 8 experts"});
  expect_open_error(moe_dir_with("tiny-qwen3-moe", [](json& c) { c["decoder_sparse_step"] = 2; }),
                    ErrorCode::kUnsupported, {"config.json", "decoder_sparse_step 2"});
  expect_open_error(moe_dir_with("tiny-qwen3-moe", [](json& c) { c["mlp_only_layers"] = {0}; }),
                    ErrorCode::kUnsupported, {"config.json", "mlp_only_layers"});
  expect_open_error(moe_dir_with("tiny-qwen3-moe", [](json& c) { c.erase("moe_intermediate_size"); }),
                    ErrorCode::kModelFormat, {"config.json", "missing field 'moe_intermediate_size'"});
}

TEST(CheckpointErrors, MoeExpertTensorsMissingOrMisShapedAreNamed) {
  // Five experts declared, four stored: the router has the wrong shape.
  const fs::path dir = moe_dir_with("tiny-mixtral", [](json& c) { c["num_local_experts"] = 5; });
  const std::shared_ptr<const Checkpoint> ckpt(Checkpoint::open(dir));
  expect_error([&] { LlamaWeights::load(ckpt, -1, DType::kF32); }, ErrorCode::kModelFormat,
               {"model.layers.0.block_sparse_moe.gate.weight", "expected [5, 64]"});
  // A wider expert than stored.
  const fs::path wide = moe_dir_with("tiny-qwen3-moe", [](json& c) { c["moe_intermediate_size"] = 64; });
  const std::shared_ptr<const Checkpoint> w(Checkpoint::open(wide));
  expect_error([&] { LlamaWeights::load(w, -1, DType::kF32); }, ErrorCode::kModelFormat,
               {"model.layers.0.mlp.experts.0.gate_proj.weight", "expected [64, 64]"});
}

}  // namespace
}  // namespace specd::model::test

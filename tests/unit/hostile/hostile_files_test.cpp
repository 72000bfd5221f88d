// Hostile files (issue 14): crafted config.json, generation_config.json, safetensors headers and
// indexes, tokenizer.json and FIFOs standing in for model files. Each is refused with a clear
// error that names the file (and the field) and stays short whatever the input holds; the test
// process surviving is the "no crash" half of every case.
#include <sys/stat.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/untrusted.hpp"
#include "fixture.hpp"
#include "hostile_util.hpp"
#include "model/checkpoint.hpp"
#include "model/safetensors.hpp"
#include "specd/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

std::string nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// A working tiny checkpoint to corrupt one file of.
fs::path tiny_copy(const fs::path& dir) {
  static const fs::path tiny = fixture::write(fixture::Options{}, fs::path(SPECD_TEST_WORK_DIR) / "hostile" / "tiny");
  for (const auto& e : fs::directory_iterator(tiny)) fs::copy_file(e.path(), dir / e.path().filename());
  return dir;
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

TEST(HostileJson, NestingLimitIsExactAndCountsOnlyStructure) {
  EXPECT_NO_THROW(parse_json(nested(kMaxJsonDepth)));
  EXPECT_THROW(parse_json(nested(kMaxJsonDepth + 1)), JsonError);
  const std::string deep_objects = [] {
    std::string s;
    for (int i = 0; i < 100000; ++i) s += "{\"a\":";
    return s + "1" + std::string(100000, '}');
  }();
  try {
    parse_json(deep_objects);
    FAIL() << "100000 nested objects were accepted";
  } catch (const JsonError& e) {
    expect_has(e.what(), {"nesting deeper than 64 levels", "byte 320"});
  }
  // Brackets inside strings (with escaped quotes) are text, not nesting.
  EXPECT_NO_THROW(parse_json("{\"s\": \"\\\"" + std::string(1000, '[') + "\"}"));
  // A long literal in a syntax error is clipped, and the error says where.
  try {
    parse_json("{\"a\": \"" + std::string(100000, 'x'));
    FAIL();
  } catch (const JsonError& e) {
    EXPECT_LT(std::string(e.what()).size(), 300u);
  }
  try {
    parse_json("{\"sampling\": {\"temperature\": 1e400}}");
    FAIL();
  } catch (const JsonError& e) {
    EXPECT_TRUE(e.number_overflow);
    EXPECT_EQ(e.path, "sampling.temperature");
  }
}

TEST(HostileModelFiles, DeepConfigJsonIsRefusedNamingTheFile) {
  const fs::path dir = tiny_copy(scratch());
  json cfg = read_json(dir / "config.json");
  write(dir / "config.json", cfg.dump().insert(1, "\"junk\": " + nested(100000) + ","));
  expect_has(error_of([&] { model::Checkpoint::open(dir); }), {"config.json", "nesting deeper than 64"});
}

TEST(HostileModelFiles, WrongTypedFieldIsNamedNotEchoed) {
  const fs::path dir = tiny_copy(scratch());
  json cfg = read_json(dir / "config.json");
  std::string text = cfg.dump();
  text.replace(text.find("\"hidden_act\":\"silu\""), 19, "\"hidden_act\":" + nested(60));
  write(dir / "config.json", text);
  expect_has(error_of([&] { model::Checkpoint::open(dir); }), {"config.json", "hidden_act", "an array"});
}

TEST(HostileModelFiles, HugeDeclaredSizesAreRefusedBeforeAllocation) {
  struct Case {
    const char* field;
    int64_t value;
    const char* expect;
  };
  for (const Case& c : {Case{"num_hidden_layers", int64_t{1} << 40, "num_hidden_layers"},
                        Case{"num_hidden_layers", 1000000, "num_hidden_layers is 1000000 but the weights"},
                        Case{"max_position_embeddings", int64_t{1} << 40, "max_position_embeddings"},
                        Case{"vocab_size", int64_t{1} << 33, "vocab_size"},
                        Case{"num_nextn_predict_layers", int64_t{1} << 40, "num_nextn_predict_layers"}}) {
    const fs::path dir = tiny_copy(scratch());
    json cfg = read_json(dir / "config.json");
    cfg[c.field] = c.value;
    write(dir / "config.json", cfg.dump());
    const std::string m = error_of([&] { model::Checkpoint::open(dir); });
    expect_has(m, {"config.json", c.expect});
    if (c.value > INT32_MAX) {
      EXPECT_NE(m.find(std::to_string(c.value)), std::string::npos) << m;
    }
  }
}

TEST(HostileModelFiles, DeepGenerationConfigAndIndexAreRefused) {
  const fs::path dir = tiny_copy(scratch());
  write(dir / "generation_config.json", "{\"eos_token_id\": " + nested(100000) + "}");
  expect_has(error_of([&] { model::Checkpoint::open(dir); }), {"generation_config.json", "nesting deeper"});
  fs::remove(dir / "generation_config.json");
  fs::rename(dir / "model.safetensors", dir / "model-00001-of-00001.safetensors");
  write(dir / "model.safetensors.index.json", "{\"weight_map\": " + nested(100000) + "}");
  expect_has(error_of([&] { model::Checkpoint::open(dir); }), {"model.safetensors.index.json", "nesting deeper"});
}

TEST(HostileModelFiles, FifoShardAndConfigAreRefusedWithoutBlocking) {
  const fs::path dir = tiny_copy(scratch());
  fs::rename(dir / "model.safetensors", dir / "model-00001-of-00001.safetensors");
  write(dir / "model.safetensors.index.json", "{\"weight_map\": {\"model.norm.weight\": \"fifo.safetensors\"}}");
  ASSERT_EQ(::mkfifo((dir / "fifo.safetensors").c_str(), 0600), 0);
  expect_has(error_of([&] { model::Checkpoint::open(dir); }), {"fifo.safetensors", "not a regular file"});
  fs::remove(dir / "generation_config.json");
  ASSERT_EQ(::mkfifo((dir / "generation_config.json").c_str(), 0600), 0);
  expect_has(error_of([&] { model::read_model_config(dir); }), {"generation_config.json", "not a regular file"});
}

// A safetensors file with `header` as its JSON header and `data` bytes of tensor data.
std::string safetensors(const std::string& header, size_t data = 0) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(data, '\0');
}

std::string parse_error(const std::string& file) {
  return error_of(
      [&] { model::parse_safetensors(reinterpret_cast<const std::byte*>(file.data()), file.size(), "x.safetensors"); });
}

TEST(HostileSafetensors, CraftedHeadersAreRefusedWithClearErrors) {
  const std::string ok = R"("t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";
  expect_has(parse_error(safetensors("{\"__metadata__\": {\"x\": " + nested(100000) + "}, " + ok + "}", 8)),
             {"x.safetensors", "nests deeper than 64", "__metadata__"});
  expect_has(parse_error(safetensors("{\"t\": {\"dtype\": \"F32\", \"junk\": " + nested(1000) +
                                         ", \"shape\": [2], \"data_offsets\": [0, 8]}}",
                                     8)),
             {"x.safetensors", "nests deeper than 64", "tensor 't'"});
  expect_has(parse_error(safetensors(
                 "{\"t\": {\"dtype\": \"F32\", \"shape\": " + nested(1000) + ", \"data_offsets\": [0, 8]}}", 8)),
             {"x.safetensors", "tensor 't'", "unexpected array"});
  std::string dims = "[";
  for (int i = 0; i < 100000; ++i) dims += "1,";
  dims += "1]";
  expect_has(
      parse_error(safetensors("{\"t\": {\"dtype\": \"F32\", \"shape\": " + dims + ", \"data_offsets\": [0, 4]}}", 4)),
      {"tensor 't'", "more than 16 dimensions"});
  expect_has(parse_error(safetensors("{\"t\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296, 4294967296], "
                                     "\"data_offsets\": [0, 4]}}",
                                     4)),
             {"tensor 't'", "too many elements"});
  expect_has(parse_error(safetensors("{" + ok + ", " + ok + "}", 8)), {"tensor 't' appears twice"});
  expect_has(parse_error(safetensors("[" + nested(10) + "]")), {"not a JSON object"});
  expect_has(parse_error(safetensors("{\"t\": " + nested(3) + "}")), {"tensor 't'"});
  expect_has(parse_error(safetensors("{\"__metadata__\": 5}")), {"__metadata__", "not an object"});
  expect_has(parse_error(safetensors("{\"t\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8, 9]}}", 8)),
             {"data_offsets", "two non-negative integers"});
  expect_has(parse_error(safetensors("{\"" + std::string(100000, 'n') + "\": 1}")), {"tensor 'nnnn", "..."});
  // A declared header length far beyond the file.
  std::string huge = safetensors("{}");
  huge[7] = '\x7f';
  expect_has(parse_error(huge), {"x.safetensors", "runs past the end of the file"});
  // The same header read whole still works (the SAX reader keeps file order and names).
  const std::string good = safetensors(
      "{\"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}, "
      "\"__metadata__\": {\"format\": \"pt\", \"nested\": {\"x\": [1, 2]}}, "
      "\"a\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 4]}}",
      8);
  const auto views = model::parse_safetensors(reinterpret_cast<const std::byte*>(good.data()), good.size(), "g");
  ASSERT_EQ(views.size(), 2u);
  EXPECT_EQ(views[0].name, "a");
  EXPECT_EQ(views[1].name, "b");
}

// ---- tokenizer.json ---------------------------------------------------------------------------

json byte_level() {
  json vocab = json::object();
  for (int b = 0; b < 26; ++b) vocab[std::string(1, static_cast<char>('a' + b))] = b;
  return json{{"version", "1.0"},
              {"added_tokens", json::array()},
              {"normalizer", nullptr},
              {"pre_tokenizer", nullptr},
              {"post_processor", nullptr},
              {"decoder", nullptr},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
}

std::string tokenizer_error(const std::string& text) {
  return error_of([&] { tokenizer::Tokenizer::from_json(text, "{}", "crafted/tokenizer.json"); });
}

TEST(HostileTokenizer, CraftedFilesAreRefusedWithClearErrors) {
  ASSERT_NO_THROW(tokenizer::Tokenizer::from_json(byte_level().dump()));
  std::string deep = byte_level().dump();
  deep.insert(1, "\"junk\": " + nested(100000) + ",");
  expect_has(tokenizer_error(deep), {"crafted/tokenizer.json", "nesting deeper than 64"});

  // Sequences inside Sequences: refused past 8 levels, for every component kind.
  for (const auto& [key, list] : {std::pair<const char*, const char*>{"normalizer", "normalizers"},
                                  {"pre_tokenizer", "pretokenizers"},
                                  {"decoder", "decoders"},
                                  {"post_processor", "processors"}}) {
    json part = json{{"type", "Sequence"}, {list, json::array()}};
    for (int i = 0; i < 9; ++i) part = json{{"type", "Sequence"}, {list, json::array({part})}};
    json t = byte_level();
    t[key] = part;
    expect_has(tokenizer_error(t.dump()), {"crafted/tokenizer.json", "Sequences nested more than 8 deep"});
  }

  json big_id = byte_level();
  big_id["model"]["vocab"]["zz"] = INT32_MAX;
  expect_has(tokenizer_error(big_id.dump()), {"crafted/tokenizer.json", "token id 2147483647", "unused"});
  json big_added = byte_level();
  big_added["added_tokens"] = json::array({{{"id", INT32_MAX}, {"content", "<x>"}, {"special", true}}});
  expect_has(tokenizer_error(big_added.dump()), {"token id 2147483647"});

  json wrong_type = byte_level();
  wrong_type["model"]["fuse_unk"] = nested(10);
  expect_has(tokenizer_error(wrong_type.dump()), {"crafted/tokenizer.json"});
  json long_type = byte_level();
  long_type["decoder"] = {{"type", std::string(100000, 'T')}};
  expect_has(tokenizer_error(long_type.dump()), {"unsupported decoder type 'TTTT", "..."});
}

TEST(HostileTokenizer, FifoTokenizerIsRefusedWithoutBlocking) {
  const fs::path dir = scratch();
  ASSERT_EQ(::mkfifo((dir / "tokenizer.json").c_str(), 0600), 0);
  expect_has(error_of([&] { tokenizer::Tokenizer::load(dir); }), {"tokenizer.json", "not a regular file"});
}

// ---- the CLI ------------------------------------------------------------------------------------

TEST(HostileCli, GenerateOnADeepConfigJsonFailsCleanly) {
  const fs::path dir = tiny_copy(scratch());
  write(dir / "config.json", "{\"a\": " + nested(200000) + "}");
  const std::string cmd = std::string(SPECD_CLI_PATH) + " generate --model " + dir.string() + " --prompt hi 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int status = ::pclose(p);
  ASSERT_TRUE(WIFEXITED(status)) << "specd died of a signal: " << out;
  EXPECT_NE(WEXITSTATUS(status), 0);
  expect_has(out, {"config.json", "nesting deeper than 64"});
}

}  // namespace
}  // namespace specd::test

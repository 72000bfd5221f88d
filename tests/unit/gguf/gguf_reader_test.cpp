// The GGUF container reader (core/src/model/gguf.hpp): every value type, nested arrays,
// tensor infos and alignment on a hand-assembled file, and a generated corpus of malformed
// files, each refused with an error naming the file, the field and the value. The bytes are
// parsed from an exactly sized heap buffer, so under the asan preset any read past the end is
// caught.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "gguf_bytes.hpp"
#include "model/gguf.hpp"
#include "specd/error.hpp"
#include "unit/model/model_test_util.hpp"

namespace specd::gguf::test {
namespace {

using model::gguf::File;
using model::gguf::Value;
using model::gguf::ValueType;
using model::test::expect_error;

constexpr const char* kName = "corpus.gguf";

std::string valid_metadata() {
  Bytes m;
  m.key("general.architecture", kStr).str("llama");
  m.key("general.alignment", kU32).u32(64);
  m.key("v.u8", kU8).raw<uint8_t>(200);
  m.key("v.i8", kI8).raw<int8_t>(-5);
  m.key("v.u16", kU16).raw<uint16_t>(60000);
  m.key("v.i16", kI16).raw<int16_t>(-300);
  m.key("v.u32", kU32).u32(4000000000u);
  m.key("v.i32", kI32).raw<int32_t>(-7);
  m.key("v.f32", kF32).raw<float>(1.5f);
  m.key("v.bool", kBool).raw<uint8_t>(1);
  m.key("v.u64", kU64).u64(uint64_t{1} << 40);
  m.key("v.i64", kI64).raw<int64_t>(-9);
  m.key("v.f64", kF64).raw<double>(2.25);
  m.key("list.u8", kArr).u32(kU8).u64(3).raw<uint8_t>(1).raw<uint8_t>(2).raw<uint8_t>(3);
  m.key("list.str", kArr).u32(kStr).u64(2).str("a").str("bc");
  m.key("nested", kArr).u32(kArr).u64(2);
  m.u32(kI32).u64(2).raw<int32_t>(-1).raw<int32_t>(2);
  m.u32(kStr).u64(1).str("x");
  return m.data;
}
constexpr uint64_t kValidKeys = 16;

const std::vector<TensorSpec> kValidTensors = {{"a", {4, 2}, kGgmlF32, 0}, {"b", {32}, kGgmlQ8_0, 64}};

std::string valid_file() {
  return assemble(3, 2, kValidKeys, valid_metadata(), kValidTensors, 64, 64 + 34);
}

std::shared_ptr<const File> parse(const std::string& bytes, std::vector<std::byte>& storage) {
  storage.resize(bytes.size());
  if (!bytes.empty()) std::memcpy(storage.data(), bytes.data(), bytes.size());
  return File::parse(storage.data(), storage.size(), kName);
}

void expect_refused(const std::string& bytes, std::initializer_list<std::string> substrings,
                    ErrorCode code = ErrorCode::kModelFormat) {
  std::vector<std::byte> storage;
  std::vector<std::string> all{std::string(kName) + ": "};
  all.insert(all.end(), substrings.begin(), substrings.end());
  try {
    parse(bytes, storage);
    ADD_FAILURE() << "accepted a malformed file; expected " << *substrings.begin();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& s : all)
      EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what() << " lacks " << s;
  }
}

TEST(GgufReader, ReadsEveryValueTypeNestedArraysAndTensors) {
  std::vector<std::byte> storage;
  const auto f = parse(valid_file(), storage);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->metadata().size(), kValidKeys);
  EXPECT_EQ(f->metadata().front().first, "general.architecture");
  EXPECT_EQ(f->require_string("general.architecture"), "llama");
  EXPECT_EQ(*f->integer("v.u8"), 200);
  EXPECT_EQ(*f->integer("v.i8"), -5);
  EXPECT_EQ(*f->integer("v.u16"), 60000);
  EXPECT_EQ(*f->integer("v.i16"), -300);
  EXPECT_EQ(*f->integer("v.u32"), 4000000000LL);
  EXPECT_EQ(*f->integer("v.i32"), -7);
  EXPECT_EQ(*f->integer("v.u64"), int64_t{1} << 40);
  EXPECT_EQ(*f->integer("v.i64"), -9);
  EXPECT_EQ(*f->real("v.f32"), 1.5);
  EXPECT_EQ(*f->real("v.f64"), 2.25);
  EXPECT_TRUE(*f->boolean("v.bool"));
  EXPECT_FALSE(f->integer("missing").has_value());
  const Value* u8s = f->array("list.u8", ValueType::kInt64);
  ASSERT_NE(u8s, nullptr);
  ASSERT_EQ(u8s->count, 3u);
  EXPECT_EQ(f->integer_at(*u8s, 2, "list.u8"), 3);
  const Value* strs = f->array("list.str", ValueType::kString);
  EXPECT_EQ(f->string_at(*strs, 1, "list.str"), "bc");
  const Value* nested = f->array("nested", ValueType::kArray);
  ASSERT_EQ(nested->count, 2u);
  const Value& ints = f->array_at(*nested, 0, "nested");
  EXPECT_EQ(ints.elem_type, ValueType::kInt32);
  EXPECT_EQ(f->integer_at(ints, 0, "nested"), -1);
  EXPECT_EQ(f->string_at(f->array_at(*nested, 1, "nested"), 0, "nested"), "x");
  EXPECT_EQ(f->describe(*f->find("v.f64")), "2.250000");
  EXPECT_EQ(f->describe(*nested), "[2 x array]");

  // Typed access refuses other types, naming the key.
  expect_error([&] { f->integer("general.architecture"); }, ErrorCode::kModelFormat,
               {kName, "'general.architecture' must be an integer, got string"});
  expect_error([&] { f->array("list.u8", ValueType::kString); }, ErrorCode::kModelFormat,
               {"'list.u8' must be an array of string, got array of u8"});
  expect_error([&] { f->string_at(*strs, 2, "list.str"); }, ErrorCode::kModelFormat, {"no string element 2"});

  ASSERT_EQ(f->tensors().size(), 2u);
  const auto* b = f->find_tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type, kGgmlQ8_0);
  EXPECT_EQ(b->nbytes, 34u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(b->data, storage.data() + f->data_offset() + 64);
  EXPECT_EQ(f->find_tensor("a")->nbytes, 32u);
  EXPECT_EQ(f->find_tensor("a")->numel(), 8u);
}

TEST(GgufReader, VersionTwoReadsAndTheMagicDecidesTheFormat) {
  std::vector<std::byte> storage;
  EXPECT_EQ(parse(assemble(2, 2, kValidKeys, valid_metadata(), kValidTensors, 64, 98), storage)->version(), 2u);

  const auto dir = model::test::scratch_dir();
  model::test::write_file(dir / "model.bin", valid_file());
  model::test::write_file(dir / "model.gguf", "GGML not really");
  EXPECT_TRUE(model::gguf::is_gguf_file(dir / "model.bin"));
  EXPECT_FALSE(model::gguf::is_gguf_file(dir / "model.gguf"));
  EXPECT_FALSE(model::gguf::is_gguf_file(dir));
  EXPECT_EQ(File::open(dir / "model.bin")->tensors().size(), 2u);
}

// One case per header field, each with its own bad value.
TEST(GgufReader, MalformedHeadersAreRefusedNamingFieldAndValue) {
  const std::string meta = valid_metadata();
  const auto& tensors = kValidTensors;
  expect_refused("", {"magic", "needs 4 bytes"});
  expect_refused("GGUX" + valid_file().substr(4), {"not a GGUF file"});
  expect_refused(assemble(1, 2, kValidKeys, meta, tensors, 64, 98), {"GGUF version 1 is not supported"});
  expect_refused(assemble(4, 2, kValidKeys, meta, tensors, 64, 98), {"GGUF version 4 is not supported"});
  expect_refused(assemble(0x03000000u, 2, kValidKeys, meta, tensors, 64, 98), {"big-endian GGUF"});
  expect_refused(assemble(3, uint64_t{1} << 40, kValidKeys, meta, tensors, 64, 98),
                 {"tensor count 1099511627776 cannot fit"});
  expect_refused(assemble(3, 2, ~uint64_t{0}, meta, tensors, 64, 98),
                 {"metadata count 18446744073709551615 cannot fit"});
  expect_refused(assemble(3, 0, kValidKeys + 1, meta, {}, 1, 0), {"metadata entry 16 key length", "needs 8 bytes"});

  // One entry and 32 bytes after it, so the count check passes and the entry itself is read.
  auto one_key = [&](const Bytes& entry, uint64_t count = 1) { return assemble(3, 0, count, entry.data, {}, 1, 32); };
  expect_refused(one_key(Bytes().u64(uint64_t{1} << 62)), {"metadata entry 0 key length 4611686018427387904 exceeds"});
  expect_refused(one_key(Bytes().u64(1000)), {"metadata entry 0 key length 1000", "runs past the end"});
  expect_refused(one_key(Bytes().key("k", 13).u32(0)), {"metadata key 'k' has unknown value type 13"});
  expect_refused(one_key(Bytes().key("k", kStr).u64(uint64_t{1} << 50)),
                 {"metadata key 'k' string length 1125899906842624"});
  expect_refused(one_key(Bytes().key("k", kArr).u32(kU32).u64(uint64_t{1} << 61)),
                 {"metadata key 'k' array length 2305843009213693952 (u32) cannot fit"});
  expect_refused(one_key(Bytes().key("k", kArr).u32(kStr).u64(uint64_t{1} << 40)),
                 {"array length 1099511627776 (string)"});
  expect_refused(one_key(Bytes().key("k", kArr).u32(kArr).u64(uint64_t{1} << 40)),
                 {"array length 1099511627776 (array)"});
  expect_refused(one_key(Bytes().key("k", kArr).u32(77).u64(1)),
                 {"metadata key 'k' is an array of unknown value type 77"});
  expect_refused(one_key(Bytes().key("k\x01", kU8).raw<uint8_t>(0).key("k\x01", kU8).raw<uint8_t>(1), 2),
                 {"metadata key 'k\\x01' appears twice"});
  {
    Bytes deep;  // arrays nested 9 deep, each of one array, the innermost empty
    deep.key("deep", kArr);
    for (int i = 0; i < 9; ++i) deep.u32(kArr).u64(1);
    deep.u32(kU8).u64(0);
    expect_refused(one_key(deep), {"metadata key 'deep': arrays nested deeper than 8 levels"});
  }
  {
    Bytes deep;  // a million levels announced in a tiny file: refused at level 9, no recursion
    deep.key("deep", kArr);
    for (int i = 0; i < 20; ++i) deep.u32(kArr).u64(1);
    expect_refused(one_key(deep), {"nested deeper than 8"});
  }

  auto with_alignment = [&](Bytes value_type_and_value) {
    Bytes m;
    m.str("general.alignment");
    m.data += value_type_and_value.data;
    return assemble(3, 0, 1, m.data, {}, 32, 0);
  };
  expect_refused(with_alignment(Bytes().u32(kU32).u32(0)), {"general.alignment 0 is not a power of two"});
  expect_refused(with_alignment(Bytes().u32(kU32).u32(48)), {"general.alignment 48 is not a power of two"});
  expect_refused(with_alignment(Bytes().u32(kStr).str("32")), {"general.alignment must be an integer, got string"});

  auto one_tensor = [&](const TensorSpec& t, size_t data = 64) { return assemble(3, 1, 0, "", {t}, 32, data); };
  expect_refused(one_tensor({"t", {}, kGgmlF32, 0}), {"tensor 't' has 0 dimensions (1 to 4 allowed)"});
  expect_refused(one_tensor({"t", {1, 1, 1, 1, 1}, kGgmlF32, 0}), {"tensor 't' has 5 dimensions"});
  expect_refused(one_tensor({"t", {uint64_t{1} << 62, 4}, kGgmlF32, 0}),
                 {"tensor 't' ne[1] = 4: the element count overflows"});
  expect_refused(one_tensor({"t", {uint64_t{1} << 62}, 28, 0}), {"its byte size overflows"});
  expect_refused(one_tensor({"t", {4}, 99, 0}), {"tensor 't' has unknown ggml type type 99 (id 99)"});
  expect_refused(one_tensor({"t", {32}, 4, 0}), {"tensor 't' has unknown ggml type Q4_2 (id 4)"});
  expect_refused(one_tensor({"t", {33}, kGgmlQ8_0, 0}),
                 {"tensor 't' has ne[0] = 33, not a multiple of the Q8_0 block of 32"});
  expect_refused(one_tensor({"t", {4}, kGgmlF32, 8}), {"tensor 't' offset 8 is not a multiple of the alignment 32"});
  expect_refused(one_tensor({"t", {64}, kGgmlF32, 0}),
                 {"tensor 't' (F32, 256 bytes at data offset 0) runs past the end"});
  expect_refused(one_tensor({"t", {4}, kGgmlF32, uint64_t{1} << 63}), {"at data offset 9223372036854775808"});
  expect_refused(assemble(3, 1, 0, "", {{"", {4}, kGgmlF32, 0}}, 32, 64), {"tensor info 0 has an empty name"});
  expect_refused(assemble(3, 2, 0, "", {{"t", {4}, kGgmlF32, 0}, {"t", {4}, kGgmlF32, 32}}, 32, 64),
                 {"tensor 't' appears twice"});
  expect_refused(assemble(3, 2, 0, "", {{"t", {16}, kGgmlF32, 0}, {"u", {4}, kGgmlF32, 32}}, 32, 64),
                 {"tensors 't' (data offset 0, 64 bytes) and 'u' (data offset 32) overlap"});
  {
    Bytes m;  // a bool byte other than 0 or 1 is refused when read
    m.key("flag", kBool).raw<uint8_t>(2);
    std::vector<std::byte> storage;
    const auto f = parse(assemble(3, 0, 1, m.data, {}, 32, 0), storage);
    expect_error([&] { f->boolean("flag"); }, ErrorCode::kModelFormat, {kName, "'flag' holds bool byte 2"});
  }
}

// Every truncation of a valid file, and seeded random corruptions of its header: each one is
// parsed or refused with a specd::Error; nothing else escapes and nothing reads out of bounds.
TEST(GgufReader, TruncatedAndCorruptedFilesNeverCrash) {
  const std::string good = valid_file();
  const size_t header_end = good.size() - 98;
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<std::byte> storage;
    try {
      parse(good.substr(0, n), storage);
      ADD_FAILURE() << "a file truncated to " << n << " bytes was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(kName), std::string::npos) << e.what();
    }
  }
  std::mt19937_64 rng(15);
  size_t refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bad = good;
    for (int k = 0; k < 1 + trial % 4; ++k) bad[rng() % header_end] = static_cast<char>(rng());
    std::vector<std::byte> storage;
    try {
      parse(bad, storage);
    } catch (const Error& e) {
      ++refused;
      EXPECT_TRUE(e.code() == ErrorCode::kModelFormat || e.code() == ErrorCode::kUnsupported) << e.what();
    }
  }
  EXPECT_GT(refused, 1000u);
}

}  // namespace
}  // namespace specd::gguf::test

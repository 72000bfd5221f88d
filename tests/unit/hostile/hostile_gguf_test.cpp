// Hostile GGUF files (issue 14, the format issue 15 added): whatever the header, metadata and
// tensor table announce, loading refuses with an error naming the file and the key or field,
// allocates no more than the file's size justifies, and never blocks on a FIFO. The byte-level
// corpus of malformed headers is in tests/unit/gguf/gguf_reader_test.cpp.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "hostile_util.hpp"
#include "model/checkpoint.hpp"
#include "specd/error.hpp"
#include "tokenizer/tokenizer.hpp"
#include "unit/gguf/gguf_bytes.hpp"

namespace specd::test {
namespace {

namespace fs = std::filesystem;
using gguf::test::assemble;
using gguf::test::Bytes;
using gguf::test::kArr;
using gguf::test::kStr;
using gguf::test::kU8;

fs::path write(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

// Arrays of arrays, each level announcing as many children as the bytes left could hold were
// they the only ones: before the reader counted what enclosing arrays still owe, every level
// reserved its slots (40 bytes each for 12 file bytes) and 8 levels of a 12 MB file asked for
// ~300 MB before the first child failed. Now the second level is refused by its length.
TEST(HostileGguf, NestedArrayCountsAreBoundedByTheWholeFile) {
  const fs::path dir = scratch();
  const size_t filler = 12u << 20;
  Bytes m;
  m.key("tokenizer.ggml.bomb", kArr);
  uint64_t left = filler;
  for (int level = 0; level < 8; ++level) {
    m.u32(kArr).u64(left / 12);
    left -= 12;
  }
  m.u32(kU8).u64(0);
  std::string bytes = assemble(3, 0, 1, m.data, {}, 1, 0);
  bytes.append(filler, '\0');
  const fs::path file = write(dir / "bomb.gguf", bytes);
  const std::string msg = error_of([&] { model::Checkpoint::open(file); });
  expect_has(msg, {file.string() + ": ", "metadata key 'tokenizer.ggml.bomb' array length",
                   "its enclosing arrays still need"});
  expect_has(error_of([&] { tokenizer::Tokenizer::load(file); }), {file.string() + ": ", "'tokenizer.ggml.bomb'"});
}

// A GGUF file is told apart by its magic; a FIFO named like one is neither opened for reading
// (which would block) nor taken for a model.
TEST(HostileGguf, FifoNamedLikeAGgufFileIsRefusedWithoutBlocking) {
  const fs::path fifo = scratch() / "model.gguf";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_has(error_of([&] { model::Checkpoint::open(fifo); }), {fifo.string()});
  expect_has(error_of([&] { tokenizer::Tokenizer::load(fifo); }), {"model.gguf", "not a regular file"});
}

// A string array whose elements claim more than the file holds, and a token list of a million
// empty strings announced in a few bytes: refused by length before any allocation.
TEST(HostileGguf, HugeTokenListsAreRefusedByLength) {
  const fs::path dir = scratch();
  Bytes m;
  m.key("tokenizer.ggml.model", kStr).str("gpt2");
  m.key("tokenizer.ggml.tokens", kArr).u32(kStr).u64(uint64_t{1} << 40);
  const fs::path file = write(dir / "tokens.gguf", assemble(3, 0, 2, m.data, {}, 1, 64));
  expect_has(error_of([&] { tokenizer::Tokenizer::load(file); }),
             {file.string() + ": ", "'tokenizer.ggml.tokens' array length 1099511627776 (string) cannot fit"});
}

}  // namespace
}  // namespace specd::test

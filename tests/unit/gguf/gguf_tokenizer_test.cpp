// Tokenizers read from GGUF metadata equal the tokenizer.json they were written from, on the
// oracle corpus (tests/data/tokenizer/corpus.jsonl), for Llama 2 (SentencePiece, "llama"),
// Llama 3 and Qwen 3 (byte-level BPE, "gpt2"); the pre-tokenizer variants; the refusals.
#include <gtest/gtest.h>

#include "convert.hpp"
#include "fixture.hpp"
#include "gguf_writer.hpp"
#include "server/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"
#include "unit/model/model_test_util.hpp"
#include "unit/tokenizer/oracle_util.hpp"

namespace specd::gguf::test {
namespace {

namespace fs = std::filesystem;
using model::test::expect_error;
using model::test::scratch_dir;
using tokenizer::EncodeOptions;
using tokenizer::Tokenizer;

// The fixture directories gguf_writer_test uses too.
fs::path fixture_dir_of(const std::string& preset) {
  return model::test::fixture_dir(preset == "tiny" ? "tiny-f32" : preset + "-f32-gguf");
}

// A GGUF holding only the vocabulary of `preset`'s tokenizer (no tensors).
fs::path vocab_gguf(const std::string& preset, const fs::path& out) {
  fixture::Options o;
  o.preset = preset;
  const fs::path dir = fixture::write(o, fixture_dir_of(preset));
  Writer w;
  w.set_string("general.architecture", "llama");
  add_vocab(w, dir, fixture::find_preset(preset).config.vocab_size);
  w.write(out);
  return out;
}

class GgufTokenizer : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufTokenizer, EqualsTokenizerJsonOnTheOracleCorpus) {
  if (const auto missing = tokenizer::testing::real_tokenizers_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const std::string preset = GetParam();
  const fs::path file = vocab_gguf(preset, scratch_dir() / "vocab.bin");
  const auto json_tok = Tokenizer::load(fixture_dir_of(preset));
  const auto gguf_tok = Tokenizer::load(file);
  EXPECT_EQ(gguf_tok->source(), file);
  EXPECT_EQ(gguf_tok->vocab_size(), json_tok->vocab_size());
  EXPECT_EQ(gguf_tok->bos_id(), json_tok->bos_id());
  EXPECT_EQ(gguf_tok->eos_id(), json_tok->eos_id());
  EXPECT_EQ(gguf_tok->chat_template_config().templates, json_tok->chat_template_config().templates);
  for (int32_t id = 0; id < json_tok->vocab_size(); ++id) {
    ASSERT_EQ(gguf_tok->is_special(id), json_tok->is_special(id)) << id;
    if (json_tok->is_special(id) || id % 97 == 0) {
      ASSERT_EQ(gguf_tok->id_to_token(id), json_tok->id_to_token(id)) << id;
    }
  }
  const std::vector<std::string> corpus = tokenizer::testing::read_corpus();
  ASSERT_GE(corpus.size(), 300u);
  size_t mismatches = 0;
  for (const std::string& text : corpus) {
    for (bool add : {true, false}) {
      for (bool parse : {true, false}) {
        const EncodeOptions opts{.add_special_tokens = add, .parse_special = parse};
        const std::vector<int32_t> want = json_tok->encode(text, opts);
        const std::vector<int32_t> got = gguf_tok->encode(text, opts);
        if (got != want && ++mismatches <= 5) {
          ADD_FAILURE() << preset << ": encode(" << tokenizer::testing::escaped(text) << ", add " << add << ", parse "
                        << parse << ")\n  gguf: " << tokenizer::testing::join_ids(got)
                        << "\n  json: " << tokenizer::testing::join_ids(want);
        }
        for (bool skip : {false, true}) {
          if (gguf_tok->decode(want, skip) != json_tok->decode(want, skip) && ++mismatches <= 5)
            ADD_FAILURE() << preset << ": decode differs for " << tokenizer::testing::escaped(text);
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, GgufTokenizer,
                         ::testing::Values("tiny", "tiny-llama3", "tiny-qwen2", "tiny-gemma2"), [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

// GPT-2's byte -> printable character table (the byte-level BPE alphabet).
std::string byte_char(int b) {
  int cp = b;
  if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))) {
    int n = 0;
    for (int x = 0; x < b; ++x)
      if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) ++n;
    cp = 256 + n;
  }
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 63));
  }
  return out;
}

// A byte-level vocabulary: the 256 byte tokens, then "12", "123", "1234", "12345" made by
// merges, and a control token; `pre` is written as tokenizer.ggml.pre (none when empty).
fs::path byte_level_gguf(const fs::path& file, const std::string& pre, const std::string& model = "gpt2") {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", model);
  if (!pre.empty()) w.set_string("tokenizer.ggml.pre", pre);
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_char(b));
  for (const char* t : {"12", "123", "1234", "12345", "<|bos|>"}) tokens.push_back(t);
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;
  w.set_strings("tokenizer.ggml.tokens", tokens);
  w.set_i32s("tokenizer.ggml.token_type", types);
  w.set_strings("tokenizer.ggml.merges", {"1 2", "12 3", "123 4", "1234 5"});
  w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(tokens.size() - 1));
  w.set_string("tokenizer.chat_template", "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}");
  w.write(file);
  return file;
}

TEST(GgufTokenizerVariants, PreTokenizersSplitAsTheirModelsDo) {
  const fs::path dir = scratch_dir();
  const int32_t k12 = 256, k123 = 257, k12345 = 259;
  const std::string text = "Hi 12345 e\xCC\x81!";  // "e" + combining acute: NFC makes it U+00E9
  struct Case {
    std::string pre;
    int32_t digits_token;  // the number's first token, or -1 for single digits
    bool nfc;
    bool adds_bos;
  };
  const Case cases[] = {{"default", k123, false, false},        {"llama3", k123, false, true},
                        {"llama-bpe", k123, false, true},       {"qwen2", -1, true, false},
                        {"deepseek-llm", k12345, false, false}, {"deepseek-coder", -1, false, false},
                        {"gpt-2", k12345, false, false},        {"", k123, false, false}};
  for (const Case& c : cases) {
    const auto tok = Tokenizer::load(byte_level_gguf(dir / (c.pre + ".gguf"), c.pre));
    const std::vector<int32_t> ids = tok->encode(text);
    EXPECT_EQ(tok->decode(ids, true), c.nfc ? "Hi 12345 \xC3\xA9!" : text) << c.pre;
    EXPECT_EQ(!ids.empty() && ids.front() == 260, c.adds_bos) << c.pre;
    const bool has12 = std::find(ids.begin(), ids.end(), k12) != ids.end();
    if (c.digits_token < 0) {
      EXPECT_FALSE(has12 || std::find(ids.begin(), ids.end(), k123) != ids.end())
          << c.pre << ": digits must stay single";
    } else {
      EXPECT_NE(std::find(ids.begin(), ids.end(), c.digits_token), ids.end())
          << c.pre << " " << testing::PrintToString(ids);
    }
    EXPECT_TRUE(tok->is_special(260));
    ASSERT_EQ(tok->chat_template_config().templates.size(), 1u);
    // The file's own template renders the prompt (not a built-in fallback).
    const server::ChatPrompter prompter(*tok, "auto", "auto");
    jinja::ChatInput input;
    input.messages = jinja::from_json(nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}}));
    input.add_generation_prompt = true;
    EXPECT_EQ(prompter.render(input), "<|im_start|>hi") << c.pre;
  }
  expect_error([&] { Tokenizer::load(byte_level_gguf(dir / "x.gguf", "tekken9")); }, ErrorCode::kUnsupported,
               {"x.gguf: tokenizer.ggml.pre 'tekken9' is not a pre-tokenizer specd knows (default, llama3"});
  expect_error([&] { Tokenizer::load(byte_level_gguf(dir / "y.gguf", "", "bert")); }, ErrorCode::kUnsupported,
               {"y.gguf: tokenizer.ggml.model 'bert' is not supported"});
}

// A SentencePiece vocabulary of the tokens z, zz, ..., z x n (scores rising with the length), a
// ladder per letter of `letters`.
fs::path ladder_gguf(const fs::path& file, int n, const std::string& letters = "z") {
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "llama");
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  for (const char letter : letters) {
    for (int len = 1; len <= n; ++len) {
      tokens.push_back(std::string(static_cast<size_t>(len), letter));
      scores.push_back(static_cast<float>(len));
      types.push_back(1);
    }
  }
  w.set_strings("tokenizer.ggml.tokens", tokens);
  w.set_f32s("tokenizer.ggml.scores", scores);
  w.set_i32s("tokenizer.ggml.token_type", types);
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_u32("tokenizer.ggml.eos_token_id", 2);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  w.write(file);
  return file;
}

// Hostile vocabularies (issue 41): every token a prefix of the next, whose merges (every cut of
// every token) grow with the square of the lengths. Up to the 1024-byte bound the tokenizer is
// built (the merges are id triples, not strings) and encodes; a longer token is refused, naming
// its index.
TEST(GgufTokenizerVariants, ALadderOfLongTokensBuildsAndATokenPastTheBoundIsRefused) {
  const fs::path dir = scratch_dir();
  const auto tok = Tokenizer::load(ladder_gguf(dir / "ladder.gguf", 1024));
  const std::string text(3000, 'z');
  EncodeOptions bare;
  bare.add_special_tokens = false;
  const std::vector<int32_t> ids = tok->encode(text, bare);
  EXPECT_EQ(tok->decode(ids, true), text);
  EXPECT_LE(ids.size(), 8u) << "long tokens are used: " << testing::PrintToString(ids);
  expect_error([&] { Tokenizer::load(ladder_gguf(dir / "long.gguf", 1025)); }, ErrorCode::kModelFormat,
               {"long.gguf", "tokenizer.ggml.tokens[1027] is 1025 bytes long", "1024"});
}

// Vocabularies past what real ones reach are refused before the tokenizer is built (a million
// tokens took 550 MB, 23 ladders to 1024 bytes 870 MB): five ladders have 2.6M splits, more than
// the 2M merges accepted; 2^19 + 1 tokens are more than the 2^19 accepted.
TEST(GgufTokenizerVariants, TooManyMergesOrTokensAreRefusedByCount) {
  const fs::path dir = scratch_dir();
  expect_error([&] { Tokenizer::load(ladder_gguf(dir / "ladders.gguf", 1024, "vwxyz")); }, ErrorCode::kModelFormat,
               {"ladders.gguf", "split into two tokens in 2618880 ways", "2097152 merges are refused"});
  EXPECT_NO_THROW(Tokenizer::load(ladder_gguf(dir / "four.gguf", 700, "wxyz")));
  Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("tokenizer.ggml.model", "llama");
  std::vector<std::string> tokens(size_t{1} << 19, "t");
  tokens.push_back("u");
  w.set_strings("tokenizer.ggml.tokens", tokens);
  w.write(dir / "many.gguf");
  expect_error([&] { Tokenizer::load(dir / "many.gguf"); }, ErrorCode::kModelFormat,
               {"many.gguf", "tokenizer.ggml.tokens holds 524289 tokens; more than 524288 are refused"});
}

}  // namespace
}  // namespace specd::gguf::test

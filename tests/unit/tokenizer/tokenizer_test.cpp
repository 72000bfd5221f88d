// Tokenizer behaviour on crafted tokenizer.json files: added-token flags, special-token
// parsing, load errors for unsupported features, long inputs, regex translation, and the API
// facts of the real tokenizers.
#include "tokenizer/tokenizer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "specd/error.hpp"
#include "tokenizer/components.hpp"
#include "unit/tokenizer/crafted.hpp"
#include "unit/tokenizer/oracle_util.hpp"

namespace specd::tokenizer {
namespace {

using Ids = std::vector<int32_t>;

Ids bytes_of(const std::string& s) {
  Ids out;
  for (const char c : s) out.push_back(static_cast<unsigned char>(c));
  return out;
}

std::unique_ptr<Tokenizer> flags_tokenizer() {
  auto json = testing::byte_level_tokenizer_json();
  json["normalizer"] = {{"type", "Lowercase"}};
  auto added = [](int id, const char* content, bool special, bool normalized) {
    return nlohmann::json{{"id", id},        {"content", content}, {"special", special},  {"normalized", normalized},
                          {"lstrip", false}, {"rstrip", false},    {"single_word", false}};
  };
  json["added_tokens"] = nlohmann::json::array({added(300, "<special>", true, false), added(301, "[L]", false, false),
                                                added(302, "[R]", false, false), added(303, "word", false, false),
                                                added(304, "NORM", false, true)});
  json["added_tokens"][1]["lstrip"] = true;
  json["added_tokens"][2]["rstrip"] = true;
  json["added_tokens"][3]["single_word"] = true;
  return Tokenizer::load(testing::write_tokenizer("flags", json));
}

TEST(AddedTokens, LstripSwallowsWhitespaceBefore) {
  const auto tok = flags_tokenizer();
  EXPECT_EQ(tok->encode("x [L]y"), (Ids{'x', 301, 'y'}));
  EXPECT_EQ(tok->encode("x \t [L]"), (Ids{'x', 301}));
}

TEST(AddedTokens, RstripSwallowsWhitespaceAfter) {
  const auto tok = flags_tokenizer();
  EXPECT_EQ(tok->encode("x[R]  y"), (Ids{'x', 302, 'y'}));
  // Without the flag the spaces stay ordinary text.
  EXPECT_EQ(tok->encode("x [R]"), (Ids{'x', ' ', 302}));
}

TEST(AddedTokens, SingleWordMatchesOnlyWholeWords) {
  const auto tok = flags_tokenizer();
  Ids want = bytes_of("swordfish ");
  want.push_back(303);
  EXPECT_EQ(tok->encode("swordfish word"), want);
  EXPECT_EQ(tok->encode("word."), (Ids{303, '.'}));
}

TEST(AddedTokens, NormalizedTokensMatchAfterNormalization) {
  const auto tok = flags_tokenizer();
  EXPECT_EQ(tok->encode("NORM"), (Ids{304}));
  EXPECT_EQ(tok->encode("norm"), (Ids{304}));
  EXPECT_EQ(tok->encode("Normal"), (Ids{304, 'a', 'l'}));
}

TEST(AddedTokens, SpecialTextIsParsedOnlyOnRequest) {
  const auto tok = flags_tokenizer();
  EXPECT_EQ(tok->encode("a<special>b", {.add_special_tokens = true, .parse_special = true}), (Ids{'a', 300, 'b'}));
  // Not parsed: the text is tokenized like any other (and lowercased by the normalizer).
  EXPECT_EQ(tok->encode("a<special>b"), bytes_of("a<special>b"));
  // Non-special added tokens are always recognised.
  EXPECT_EQ(tok->encode("[L]"), (Ids{301}));
}

TEST(AddedTokens, DecodeAndSkipSpecial) {
  const auto tok = flags_tokenizer();
  EXPECT_TRUE(tok->is_special(300));
  EXPECT_FALSE(tok->is_special(301));
  EXPECT_FALSE(tok->is_special('x'));
  EXPECT_EQ(tok->decode(Ids{'x', 300, 'y'}), "x<special>y");
  EXPECT_EQ(tok->decode(Ids{'x', 300, 'y'}, true), "xy");
  EXPECT_EQ(tok->decode(Ids{'x', 301, 'y'}, true), "x[L]y");
  EXPECT_EQ(tok->vocab_size(), 305);
  EXPECT_EQ(tok->token_to_id("<special>"), 300);
  EXPECT_EQ(tok->token_to_id("aaaa"), 257);
  EXPECT_EQ(tok->token_to_id("nope"), std::nullopt);
  EXPECT_EQ(tok->id_to_token(256), "aa");
  // Ids with no token (between the vocab and the added tokens) are skipped by decode.
  EXPECT_EQ(tok->decode(Ids{'a', 280, 'b'}), "ab");
}

TEST(Tokenizer, IdToTokenRejectsUnknownIds) {
  const auto tok = flags_tokenizer();
  for (const int32_t id : {-1, 280, 305, 1 << 30}) {
    try {
      tok->id_to_token(id);
      FAIL() << "no error for id " << id;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(std::to_string(id)), std::string::npos) << e.what();
    }
  }
}

TEST(Tokenizer, TemplateAddsBosAndEos) {
  auto json = testing::byte_level_tokenizer_json();
  json["added_tokens"] = {{{"id", 300}, {"content", "<bos>"}, {"special", true}},
                          {{"id", 301}, {"content", "<eos>"}, {"special", true}}};
  json["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<bos>", {{"id", "<bos>"}, {"ids", {300}}, {"tokens", {"<bos>"}}}}}}};
  const auto tok = Tokenizer::load(testing::write_tokenizer("template", json));
  EXPECT_EQ(tok->encode("ab"), (Ids{300, 'a', 'b'}));
  EXPECT_EQ(tok->encode("ab", {.add_special_tokens = false}), (Ids{'a', 'b'}));
  EXPECT_EQ(tok->bos_id(), 300);
  EXPECT_EQ(tok->eos_id(), std::nullopt);

  // tokenizer_config.json's add_bos_token / add_eos_token override the template.
  const auto over = Tokenizer::load(testing::write_tokenizer(
      "template_override", json,
      nlohmann::json{
          {"add_bos_token", false}, {"add_eos_token", true}, {"bos_token", "<bos>"}, {"eos_token", "<eos>"}}));
  EXPECT_EQ(over->encode("ab"), (Ids{'a', 'b', 301}));
  EXPECT_EQ(over->eos_id(), 301);
}

TEST(Tokenizer, HundredKilobyteSingleWord) {
  const auto tok = Tokenizer::load(testing::write_tokenizer("long", testing::byte_level_tokenizer_json()));
  const std::string word(100'000, 'a');
  const Ids ids = tok->encode(word);
  EXPECT_EQ(ids, Ids(25'000, 257));
  EXPECT_EQ(tok->decode(ids), word);
}

TEST(Tokenizer, HundredKilobyteSingleWordOnRealTokenizers) {
  if (const auto missing = testing::real_tokenizers_missing(); !missing.empty()) GTEST_SKIP() << missing;
  // Letters without spaces: one pre-token for every tokenizer, merged by BPE as a whole.
  std::string word;
  uint32_t state = 12345;
  while (word.size() < 100'000) {
    state = state * 1664525u + 1013904223u;
    word += static_cast<char>('a' + (state >> 24) % 26);
  }
  for (const char* name : testing::kRealTokenizers) {
    const auto tok = Tokenizer::load(testing::real_tokenizer_dir(name));
    const Ids ids = tok->encode(word, {.add_special_tokens = false});
    EXPECT_GT(ids.size(), 10'000u) << name;
    EXPECT_EQ(tok->decode(ids), word) << name;
  }
}

// EncodeOptions::max_tokens: a text with exactly the limit encodes as without one; one more
// token is TokenLimitExceeded, also for a 16 MB word, which is refused before its symbols are
// built (the server's prompt and /tokenize limit).
TEST(Tokenizer, MaxTokensIsExactAndRefusesAHugeWordUpFront) {
  std::vector<std::unique_ptr<Tokenizer>> toks;
  toks.push_back(Tokenizer::load(testing::write_tokenizer("limit", testing::byte_level_tokenizer_json())));
  if (testing::real_tokenizers_missing().empty())
    for (const char* name : testing::kRealTokenizers)
      toks.push_back(Tokenizer::load(testing::real_tokenizer_dir(name)));
  const std::string text = "The quick brown fox jumps over the lazy dog, twice: 12345 <s> \xC3\xA9t\xC3\xA9!";
  for (const auto& tok : toks) {
    const Ids full = tok->encode(text);
    ASSERT_GT(full.size(), 3u);
    EncodeOptions at{.max_tokens = static_cast<int64_t>(full.size())};
    EXPECT_EQ(tok->encode(text, at), full) << tok->source();
    EncodeOptions under{.max_tokens = static_cast<int64_t>(full.size()) - 1};
    EXPECT_THROW(tok->encode(text, under), TokenLimitExceeded) << tok->source();
    std::string words;
    for (int i = 0; i < 1'000'000; ++i) words += "x ";
    EXPECT_THROW(tok->encode(words, {.max_tokens = 1000}), TokenLimitExceeded) << tok->source();
    const std::string huge(16u << 20, 'x');
    try {
      tok->encode(huge, {.max_tokens = 1000});
      ADD_FAILURE() << tok->source() << ": a 16 MB word within 1000 tokens";
    } catch (const TokenLimitExceeded& e) {
      EXPECT_EQ(e.limit(), 1000);
      EXPECT_NE(std::string(e.what()).find("more than 1000 tokens"), std::string::npos) << e.what();
    }
  }
}

TEST(Tokenizer, InvalidUtf8InputIsReplaced) {
  const auto tok = Tokenizer::load(testing::write_tokenizer("utf8", testing::byte_level_tokenizer_json()));
  EXPECT_EQ(tok->decode(tok->encode("a\xff"
                                    "b")),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(Tokenizer, RealTokenizerFacts) {
  if (const auto missing = testing::real_tokenizers_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const auto llama2 = Tokenizer::load(testing::real_tokenizer_dir("llama2") / "tokenizer.json");
  EXPECT_EQ(llama2->vocab_size(), 32000);
  EXPECT_EQ(llama2->bos_id(), 1);
  EXPECT_EQ(llama2->eos_id(), 2);
  EXPECT_EQ(llama2->encode("Hello").front(), 1);
  EXPECT_EQ(llama2->encode("Hello", {.add_special_tokens = false}).front(), llama2->token_to_id("\u2581Hello"));

  const auto llama3 = Tokenizer::load(testing::real_tokenizer_dir("llama3"));
  EXPECT_EQ(llama3->vocab_size(), 128256);
  EXPECT_EQ(llama3->bos_id(), 128000);
  EXPECT_EQ(llama3->eos_id(), 128001);

  const auto qwen3 = Tokenizer::load(testing::real_tokenizer_dir("qwen3"));
  EXPECT_EQ(qwen3->vocab_size(), 151669);
  EXPECT_EQ(qwen3->bos_id(), std::nullopt);
  EXPECT_EQ(qwen3->eos_id(), 151645);
  EXPECT_EQ(qwen3->token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(qwen3->id_to_token(151644), "<|im_start|>");
  EXPECT_TRUE(qwen3->is_special(151644));
  EXPECT_FALSE(qwen3->is_special(9707));
  // The server default: special-token text in user input is ordinary text.
  EXPECT_NE(qwen3->encode("<|im_start|>"), (Ids{151644}));
  EXPECT_EQ(qwen3->encode("<|im_start|>", {.parse_special = true}), (Ids{151644}));
}

TEST(Tokenizer, ConcurrentEncodeAndDecode) {
  if (const auto missing = testing::real_tokenizers_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const auto tok = Tokenizer::load(testing::real_tokenizer_dir("llama3"));
  const auto corpus = testing::read_corpus();
  std::vector<Ids> want;
  for (const auto& text : corpus) want.push_back(tok->encode(text));
  std::atomic<size_t> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t round = 0; round < 3; ++round)
        for (size_t i = static_cast<size_t>(t); i < corpus.size(); i += 2) {
          if (tok->encode(corpus[i]) != want[i]) ++wrong;
          if (tok->decode(want[i]) != tok->decode(want[i])) ++wrong;
        }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0u);
}

// ---- load errors ----------------------------------------------------------------------------

void expect_load_error(const std::string& name, const nlohmann::json& json, ErrorCode code,
                       const std::vector<std::string>& words) {
  const auto dir = testing::write_tokenizer(name, json);
  try {
    Tokenizer::load(dir);
    FAIL() << name << ": loaded without error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find((dir / "tokenizer.json").string()), std::string::npos)
        << "message does not name the file: " << what;
    for (const auto& w : words) EXPECT_NE(what.find(w), std::string::npos) << "message lacks '" << w << "': " << what;
  }
}

TEST(LoadErrors, UnsupportedComponentsNameFileAndFeature) {
  auto json = testing::byte_level_tokenizer_json();
  auto model = json;
  model["model"]["type"] = "WordPiece";
  expect_load_error("err_model", model, ErrorCode::kUnsupported, {"model type", "WordPiece"});
  auto norm = json;
  norm["normalizer"] = {{"type", "BertNormalizer"}};
  expect_load_error("err_norm", norm, ErrorCode::kUnsupported, {"normalizer", "BertNormalizer"});
  auto nested = json;
  nested["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Precompiled"}}}}};
  expect_load_error("err_norm_nested", nested, ErrorCode::kUnsupported, {"normalizer", "Precompiled"});
  auto pre = json;
  pre["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_load_error("err_pre", pre, ErrorCode::kUnsupported, {"pre_tokenizer", "Whitespace"});
  auto dec = json;
  dec["decoder"] = {{"type", "CTC"}};
  expect_load_error("err_dec", dec, ErrorCode::kUnsupported, {"decoder", "CTC"});
  auto post = json;
  post["post_processor"] = {{"type", "BertProcessing"}};
  expect_load_error("err_post", post, ErrorCode::kUnsupported, {"post_processor", "BertProcessing"});
  auto regex = json;
  regex["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\R+"}}}, {"behavior", "Isolated"}};
  expect_load_error("err_regex", regex, ErrorCode::kUnsupported, {"regex", "\\R"});
  auto posix = json;
  posix["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "[[:alpha:]]+"}}}, {"behavior", "Isolated"}};
  expect_load_error("err_posix", posix, ErrorCode::kUnsupported, {"regex", "POSIX"});
  auto behavior = json;
  behavior["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Sideways"}};
  expect_load_error("err_behavior", behavior, ErrorCode::kUnsupported, {"behavior", "Sideways"});
  auto fused_replace = json;
  fused_replace["decoder"] = {
      {"type", "Sequence"},
      {"decoders", {{{"type", "Fuse"}}, {{"type", "Replace"}, {"pattern", {{"String", "ab"}}}, {"content", "c"}}}}};
  expect_load_error("err_fused_replace", fused_replace, ErrorCode::kUnsupported, {"Replace after Fuse"});
}

TEST(LoadErrors, MalformedFiles) {
  auto json = testing::byte_level_tokenizer_json();
  auto merge = json;
  merge["model"]["merges"] = {"a zz"};
  expect_load_error("err_merge", merge, ErrorCode::kModelFormat, {"merge", "zz", "not in the vocab"});
  auto no_model = json;
  no_model.erase("model");
  expect_load_error("err_no_model", no_model, ErrorCode::kModelFormat, {"model"});

  const auto dir = testing::write_tokenizer("err_json", std::string("{\"model\": [1, 2"));
  try {
    Tokenizer::load(dir / "tokenizer.json");
    FAIL() << "broken JSON loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kModelFormat);
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
  try {
    Tokenizer::load(dir / "missing");
    FAIL() << "missing path loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
}

// ---- pre-tokenizers (the official SplitDelimiterBehavior semantics) -------------------------

std::vector<std::string> pre_tokenize(const nlohmann::json& config, const std::string& text, bool at_origin = true) {
  const auto pre = detail::make_pre_tokenizer(config, "test.json");
  std::vector<detail::PreToken> pieces{{text, at_origin}};
  pre->split(pieces);
  std::vector<std::string> out;
  for (const auto& p : pieces) out.push_back(p.text);
  return out;
}

using Strings = std::vector<std::string>;

TEST(PreTokenizer, SplitBehaviors) {
  auto split = [](const char* behavior, bool invert = false) {
    return nlohmann::json{
        {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", behavior}, {"invert", invert}};
  };
  EXPECT_EQ(pre_tokenize(split("Removed"), "a b  c"), (Strings{"a", "b", "c"}));
  EXPECT_EQ(pre_tokenize(split("Isolated"), "a b  c"), (Strings{"a", " ", "b", " ", " ", "c"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithPrevious"), "a b  c"), (Strings{"a ", "b ", " ", "c"}));
  EXPECT_EQ(pre_tokenize(split("MergedWithNext"), "a b  c"), (Strings{"a", " b", " ", " c"}));
  EXPECT_EQ(pre_tokenize(split("Contiguous"), "a b  c"), (Strings{"a", " ", "b", "  ", "c"}));
  // invert: the matches are kept and the text between them is the delimiter.
  EXPECT_EQ(pre_tokenize(split("Removed", true), "a b  c"), (Strings{" ", " ", " "}));
}

TEST(PreTokenizer, DigitsAndMetaspace) {
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", true}}, "ab123c"),
            (Strings{"ab", "1", "2", "3", "c"}));
  EXPECT_EQ(pre_tokenize({{"type", "Digits"}, {"individual_digits", false}}, "ab123c4"),
            (Strings{"ab", "123", "c", "4"}));
  const nlohmann::json first = {
      {"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", true}};
  EXPECT_EQ(pre_tokenize(first, "Hello  world"), (Strings{"\u2581Hello", "\u2581", "\u2581world"}));
  EXPECT_EQ(pre_tokenize(first, "Hello", false), (Strings{"Hello"}));
  const nlohmann::json never = {{"type", "Metaspace"}, {"prepend_scheme", "never"}, {"split", false}};
  EXPECT_EQ(pre_tokenize(never, "a b"), (Strings{"a\u2581b"}));
}

TEST(Decoder, MetaspaceStripAndReplaceChains) {
  auto decode = [](const nlohmann::json& config, Strings tokens) {
    const auto decoder = detail::make_decoder(config, "test.json");
    decoder->decode_chain(tokens, nullptr);
    std::string out;
    for (const auto& t : tokens) out += t;
    return out;
  };
  EXPECT_EQ(decode({{"type", "Metaspace"}, {"replacement", "\u2581"}}, {"\u2581Hello", "\u2581world"}), "Hello world");
  EXPECT_EQ(decode({{"type", "Metaspace"}, {"prepend_scheme", "never"}}, {"\u2581Hi"}), " Hi");
  const nlohmann::json llama = {{"type", "Sequence"},
                                {"decoders",
                                 {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                                  {{"type", "ByteFallback"}},
                                  {{"type", "Fuse"}},
                                  {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  EXPECT_EQ(decode(llama, {"\u2581\u2581a", "<0xE4>", "<0xBD>", "<0xA0>", "\u2581b"}), " a\u4f60 b");
  EXPECT_EQ(decode(llama, {"<0xE4>", "<0xBD>", "x"}), "\ufffdx");
  EXPECT_EQ(decode({{"type", "Strip"}, {"content", "x"}, {"start", 2}, {"stop", 1}}, {"xxxaxx", "xa"}), "xaxa");
}

// ---- Oniguruma translation ------------------------------------------------------------------

std::vector<std::string> matches(const std::string& pattern, const std::string& text) {
  const auto regex = detail::Regex::from_oniguruma(pattern, "test");
  std::vector<std::pair<size_t, size_t>> spans;
  regex->find_all(text, spans);
  std::vector<std::string> out;
  for (const auto& [b, e] : spans) out.push_back(text.substr(b, e - b));
  return out;
}

TEST(Regex, OnigurumaSemantics) {
  // (?i:...) folds ASCII only: not the long s or the Kelvin sign.
  EXPECT_EQ(matches("(?i:'s|'re)", "'s 'S 'rE '\u017f '\u212a"), (std::vector<std::string>{"'s", "'S", "'rE"}));
  // \s is White_Space: U+0085 yes, U+FEFF no.
  EXPECT_EQ(matches("\\s+", "a\u0085b\ufeffc d"), (std::vector<std::string>{"\u0085", " "}));
  EXPECT_EQ(matches("[^\\s\\p{L}]+", "ab 12!? x"), (std::vector<std::string>{"12!?"}));
  // X{n,m}+ repeats X{n,m} (not possessive); {,n} is {0,n}.
  EXPECT_EQ(matches("\\p{N}{1,3}+", "12345678 9"), (std::vector<std::string>{"12345678", "9"}));
  EXPECT_EQ(matches("ba{,2}", "baaa b"), (std::vector<std::string>{"baa", "b"}));
  // '.' excludes only \n; ^ and $ see \n only.
  EXPECT_EQ(matches("^.+$", "ab\r\ncd"), (std::vector<std::string>{"ab\r", "cd"}));
  // \d is any decimal digit.
  EXPECT_EQ(matches("\\d+", "12\u0661\u0662x"), (std::vector<std::string>{"12\u0661\u0662"}));
  // Empty matches advance by one character, as matchAll does.
  EXPECT_EQ(matches("x*", "\u00e9x").size(), 3u);
}

TEST(Regex, RealWorldSplitPatternsCompile) {
  // Split patterns of widely used tokenizers (GPT-4o / o200k style, DeepSeek, Qwen 2.5,
  // Llama 3, GPT-2) must translate and compile.
  const char* patterns[] = {
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'"
      "ll|'d)?|"
      "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'"
      "ll|'d)?|"
      "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      "\\p{N}{1,3}",
      "[\\p{Han}\\p{Hiragana}\\p{Katakana}]+",
      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
      "?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+",
      " ?[^(\\s|[.,!?\\u2026\\u3002\\uff0c\\u3001\\u0964\\u06d4\\u060c])]+",
  };
  for (const char* p : patterns) EXPECT_NO_THROW(detail::Regex::from_oniguruma(p, "test")) << p;
  // A nested class is a union member: BLOOM's [^(\s|[.,])] excludes ( ) | space . ,
  EXPECT_EQ(matches("[^(\\s|[.,])]+", "a,b (c)|d"), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(matches(patterns[2], "abc\u6f22\u5b57\u3072\u3089"),
            (std::vector<std::string>{"\u6f22\u5b57\u3072\u3089"}));
}

}  // namespace
}  // namespace specd::tokenizer

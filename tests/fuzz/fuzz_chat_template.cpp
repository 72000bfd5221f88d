// libFuzzer target: a Jinja chat template as a model file or server.chat_template brings it,
// compiled and rendered with a fixed conversation (two messages, one tool). Anything but a
// TemplateError or a specd::Error (a refused template) is a finding: a crash, a sanitizer
// report, a hang past the render limits or another exception. Time and memory are measured
// too: scripts/fuzz.sh runs this target with libFuzzer's -timeout=2 and -rss_limit_mb=512, so a
// template that works or allocates past its render budget (budget.hpp) before stopping is a
// finding as well.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include "specd/error.hpp"
#include "template/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace specd::jinja;
  static const ChatInput input = [] {
    ChatInput in;
    in.messages =
        from_json(nlohmann::json::parse(R"([{"role":"system","content":"be brief"},{"role":"user","content":"hi"}])"));
    in.tools = from_json(
        nlohmann::json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}])"));
    in.now = std::chrono::system_clock::time_point{};
    return in;
  }();
  // Small limits keep each input fast; the limits themselves are what is under test.
  RenderLimits limits;
  limits.max_output_bytes = 1 << 16;
  limits.max_steps = 20000;
  limits.max_work = uint64_t{16} << 20;  // bytes and elements built, comparisons made
  limits.timeout = std::chrono::milliseconds(500);
  specd::tokenizer::ChatTemplateConfig config;
  config.special_tokens = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  config.origin = "fuzz";
  try {
    const ChatTemplates t =
        ChatTemplates::from_source(std::string(reinterpret_cast<const char*>(data), size), config, "fuzz");
    (void)t.render(input, limits);
  } catch (const TemplateError&) {
  } catch (const specd::Error&) {
  }
  return 0;
}

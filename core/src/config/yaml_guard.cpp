#include "config/yaml_guard.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <sstream>
#include <unordered_map>
#include <vector>

#include "common/untrusted.hpp"
#include "specd/error.hpp"

namespace specd::config {

namespace {

// Errors reported before giving up (a generated file can hold thousands of duplicates).
constexpr size_t kMaxErrors = 20;

class Guard final : public YAML::EventHandler {
 public:
  explicit Guard(const std::string& source) : source_(source) {}

  void OnDocumentStart(const YAML::Mark& m) override {
    if (++documents_ > 1) {
      fatal(m, "a second YAML document ('---'); a config file holds exactly one");
    }
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override {
    static const std::string kEmpty;
    node(m, &kEmpty, false);
  }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override {
    error(m, "YAML aliases (*name) are not supported in config files; write the value out");
    node(m, nullptr, false);
  }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string& value) override {
    node(m, &value, false);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(m, false);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(m, true);
  }
  void OnMapEnd() override { close(); }

  void finish() const {
    if (!errors_.empty()) throw Error(ErrorCode::kConfig, joined());
  }

 private:
  struct Frame {
    bool map;
    bool expect_key = true;
    std::unordered_map<std::string, int> key_lines;  // map keys seen -> line
  };

  // key_text: the node's text when it is a scalar (nullptr: an alias, not checked as a key).
  void node(const YAML::Mark& m, const std::string* key_text, bool container) {
    if (++nodes_ > kMaxYamlNodes) {
      fatal(m, "more than " + std::to_string(kMaxYamlNodes) + " YAML nodes; config files are small");
    }
    if (!stack_.empty() && stack_.back().map && stack_.back().expect_key) {
      if (container) {
        error(m, "a map key must be a plain scalar, not a map or a sequence");
      } else if (key_text != nullptr) {
        check_key(stack_.back(), m, *key_text);
      }
    }
    if (!container) advance();
  }
  void check_key(Frame& f, const YAML::Mark& m, const std::string& key) {
    const int line = m.line + 1;
    if (key == "<<") {
      error(m, "merge keys (<<) are not supported in config files; write the keys out");
      return;
    }
    auto [it, inserted] = f.key_lines.emplace(key, line);
    if (!inserted) {
      error(m, "duplicate key '" + clip(key) + "' (first at line " + std::to_string(it->second) + ")");
    }
  }
  void open(const YAML::Mark& m, bool map) {
    node(m, nullptr, true);
    if (static_cast<int>(stack_.size()) >= kMaxYamlDepth) {
      fatal(m, "nesting deeper than " + std::to_string(kMaxYamlDepth) + " levels");
    }
    stack_.push_back(Frame{map, true, {}});
  }
  void close() {
    stack_.pop_back();
    advance();
  }
  // A node ended: in a map, keys and values alternate.
  void advance() {
    if (!stack_.empty() && stack_.back().map) stack_.back().expect_key = !stack_.back().expect_key;
  }

  void error(const YAML::Mark& m, const std::string& message) {
    errors_.push_back(source_ + ":" + std::to_string(m.line + 1) + ": " + message);
    if (errors_.size() >= kMaxErrors) {
      errors_.push_back(source_ + ": (stopped after " + std::to_string(kMaxErrors) + " errors)");
      throw Error(ErrorCode::kConfig, joined());
    }
  }
  [[noreturn]] void fatal(const YAML::Mark& m, const std::string& message) {
    errors_.push_back(source_ + ":" + std::to_string(m.line + 1) + ": " + message);
    throw Error(ErrorCode::kConfig, joined());
  }
  std::string joined() const {
    std::string all;
    for (const auto& e : errors_) all += (all.empty() ? "" : "\n") + e;
    return all;
  }

  const std::string& source_;
  std::vector<Frame> stack_;
  std::vector<std::string> errors_;
  int documents_ = 0;
  size_t nodes_ = 0;
};

}  // namespace

YAML::Node load_yaml_checked(const std::string& text, const std::string& source) {
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    Guard guard(source);
    while (parser.HandleNextDocument(guard)) {
    }
    guard.finish();
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw Error(ErrorCode::kConfig, source + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
}

}  // namespace specd::config

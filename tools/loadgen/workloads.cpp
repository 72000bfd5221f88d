#include "workloads.hpp"

#include <random>

namespace specd::loadgen {
namespace {

const char* const kNouns[] = {"value", "item", "count", "total", "index", "result", "buffer", "record",
                              "node",  "path", "name",  "score", "limit", "offset", "token",  "weight"};
const char* const kVerbs[] = {"load", "parse", "update", "merge",  "scale", "check", "build", "find",
                              "sort", "split", "apply",  "reduce", "emit",  "store", "fetch", "clean"};

std::string pick(std::mt19937_64& rng, const char* const* words, size_t n) {
  return words[rng() % n];
}

std::string function_name(std::mt19937_64& rng) {
  return pick(rng, kVerbs, std::size(kVerbs)) + "_" + pick(rng, kNouns, std::size(kNouns));
}

std::string function_body(std::mt19937_64& rng, const std::string& name, const std::string& callee) {
  const std::string a = pick(rng, kNouns, std::size(kNouns)), b = pick(rng, kNouns, std::size(kNouns));
  std::string s = "def " + name + "(" + a + "s, " + b + "):\n";
  s += "    result = []\n";
  s += "    for " + a + " in " + a + "s:\n";
  s += "        if " + a + " > " + b + ":\n";
  s += "            result.append(" + (callee.empty() ? a : callee + "(" + a + ")") + ")\n";
  s += "        else:\n";
  s += "            result.append(" + a + " + " + b + ")\n";
  s += "    return result\n\n";
  return s;
}

// Replaces every occurrence of `from` in `text` by `to`.
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// The first function's name in a python_file.
std::string first_function(const std::string& file) {
  const size_t at = file.find("def ");
  return at == std::string::npos ? std::string() : file.substr(at + 4, file.find('(', at) - at - 4);
}

// At most `n` characters of `text`, from its end, starting at a line.
std::string tail(const std::string& text, size_t n) {
  if (text.size() <= n) return text;
  const size_t from = text.find('\n', text.size() - n);
  return from == std::string::npos ? text.substr(text.size() - n) : text.substr(from + 1);
}

}  // namespace

bool parse_workload(const std::string& text, Workload* out) {
  if (text == "plain")
    *out = Workload::kPlain;
  else if (text == "agent")
    *out = Workload::kAgent;
  else if (text == "edit")
    *out = Workload::kEdit;
  else
    return false;
  return true;
}

std::string python_file(uint64_t seed, size_t max_chars) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  std::string file;
  std::string previous;
  for (int f = 0; f < 8; ++f) {
    const std::string name = function_name(rng);
    const std::string body = function_body(rng, name, previous);
    if (!file.empty() && file.size() + body.size() > max_chars) break;
    file += body;
    previous = name;
  }
  return file;
}

AgentSession::AgentSession(uint64_t seed, size_t prompt_chars) : seed_(seed), prompt_chars_(prompt_chars) {
  // Sessions share a pool of four files, as agents working on one repository do.
  file_ = python_file(seed % 4, prompt_chars / 2);
}

std::string AgentSession::next_prompt(const std::string& last_output) {
  std::string turn;
  if (turn_ == 0) {
    turn =
        "You are a coding agent. Fix the failing test in utils.py.\n"
        "Tool call: read_file(\"utils.py\")\nTool result:\n" +
        file_ + "Assistant:";
  } else {
    // The agent's last answer, then a test run that quotes it back together with the file.
    const std::string quoted = last_output.substr(0, last_output.find('\n', last_output.size() / 2));
    turn = last_output + "\nTool call: run_tests(\"utils.py\")\nTool result:\nFAILED in " + first_function(file_) +
           ":\n" + quoted + "\n" + file_.substr(0, file_.size() / 3) + "Assistant:";
  }
  ++turn_;
  history_ += turn;
  history_ = tail(history_, prompt_chars_);
  return history_;
}

std::string edit_prompt(uint64_t index, size_t prompt_chars, int pool) {
  const uint64_t which = index % static_cast<uint64_t>(pool);
  const std::string file = python_file(100 + which, prompt_chars / 2);
  const std::string from = first_function(file);
  const std::string to = from + "_v2";
  const std::string renamed = replace_all(file, from, to);
  return file + "\n# The same file with " + from + " renamed to " + to + ":\n\n" +
         renamed.substr(0, renamed.find('\n', renamed.size() / 3) + 1);
}

std::string PromptSource::next(int index, const std::string& last_output) {
  if (workload_ == Workload::kEdit) return edit_prompt(static_cast<uint64_t>(index), prompt_chars_);
  if (workload_ == Workload::kPlain) return "Load test request " + std::to_string(index) + ": once upon a time";
  const bool fresh = !session_ || turn_ == turns_;
  if (fresh) {
    session_.emplace(static_cast<uint64_t>(worker_) * 1000 + static_cast<uint64_t>(sessions_++), prompt_chars_);
    turn_ = 0;
  }
  ++turn_;
  return session_->next_prompt(fresh ? std::string() : last_output);
}

}  // namespace specd::loadgen

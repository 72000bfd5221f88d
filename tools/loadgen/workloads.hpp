// Prompts for specd-loadgen's workloads (--workload plain|agent|edit). Everything is generated
// from a seed: no data files.
//
//   plain  "Load test request <i>: once upon a time": prompts that share nothing.
//   agent  sessions of --turns turns. A session reads a file from a shared pool (the tool result
//          quotes it), and every later turn quotes back spans of the session's earlier outputs
//          and a test run's result over the same file: prompt = the session's history (trimmed
//          from the front to --prompt-chars) + "Tool call ... Tool result: ..." + "Assistant:".
//          Sessions draw from the same few files and tool results, as agents on one repository do.
//   edit   "rewrite this file with one function renamed": the file, an instruction, and the first
//          third of the renamed file; the model's continuation is the rest of it. Files and
//          renames come from a shared pool, so requests repeat each other's edits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace specd::loadgen {

enum class Workload { kPlain, kAgent, kEdit };

// "plain" | "agent" | "edit"; false for anything else.
bool parse_workload(const std::string& text, Workload* out);

// A synthetic Python source file, deterministic in `seed`: a few functions with loops,
// conditions and calls between them; at most about `max_chars` characters.
std::string python_file(uint64_t seed, size_t max_chars);

// One agent session: the prompt of each turn from the outputs of the turns before it.
class AgentSession {
 public:
  AgentSession(uint64_t seed, size_t prompt_chars);
  // The prompt of the next turn; `last_output` is the previous turn's completion text ("" for
  // the first).
  std::string next_prompt(const std::string& last_output);

 private:
  uint64_t seed_;
  size_t prompt_chars_;
  int turn_ = 0;
  std::string file_;
  std::string history_;
};

// The prompt of edit request `index` (files and renames repeat with period `pool`).
std::string edit_prompt(uint64_t index, size_t prompt_chars, int pool = 6);

// The prompts of one closed-loop worker: agent sessions of `turns` turns (a new session after
// each), edit requests, or plain ones.
class PromptSource {
 public:
  PromptSource(Workload workload, int worker, int turns, size_t prompt_chars)
      : workload_(workload), worker_(worker), turns_(turns), prompt_chars_(prompt_chars) {}
  // The prompt of request `index`; `last_output`: the completion text of this worker's previous
  // request.
  std::string next(int index, const std::string& last_output);

 private:
  Workload workload_;
  int worker_, turns_;
  size_t prompt_chars_;
  std::optional<AgentSession> session_;
  int sessions_ = 0, turn_ = 0;
};

}  // namespace specd::loadgen

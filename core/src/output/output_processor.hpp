// The output processor: what a request sees of the tokens the engine commits. It turns the
// tokens the scheduler appended for a sequence (one choice of a request) into a RequestOutput:
// incremental detokenization (special tokens skipped or kept), stop strings (held back while they
// could still complete; excluded from the text unless include_stop_str_in_output), tool calls
// parsed from the text (tool_calls.hpp), log-probabilities of generated and prompt tokens from the
// target's logits, where each token's text ends (for one stream event per token), the finish
// reason, and the counters (tokens, speculative drafts and acceptances, per draft position). The
// scheduler decides the token-level stops (stop token ids, max_tokens, context length); a stop
// string is decided here and may end a request in the middle of a step's accepted run.
//
// Sequences are keyed by the engine's sequence id (sched::SeqId); outputs carry the request's id
// and the choice index. Used from the engine's step thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "output/tool_calls.hpp"
#include "sampling/stop.hpp"
#include "sched/step_batch.hpp"
#include "specd/request.hpp"
#include "specd/spec_metrics.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::output {

// A step's speculative outcome for one request that proposed: k_i, drafts made, drafts accepted.
struct SpecStep {
  int32_t k = 0;
  int32_t drafted = 0;
  int32_t accepted = 0;
};

// What one row committed for a sequence this step.
struct Committed {
  std::span<const int32_t> appended;                // the tokens, in order
  FinishReason token_finish = FinishReason::kNone;  // the scheduler's verdict on the last one
  const SpecStep* spec = nullptr;                   // the step's outcome when the sequence proposed
  const float* logits = nullptr;                    // [appended, vocab] raw target logits, row i for token i
  // token_finish kStop because the structured-output constraint is complete (the last token is
  // text, not a stop token).
  bool grammar_complete = false;
};

class OutputProcessor {
 public:
  // The tokenizer must outlive the processor; vocab_size is the logits' row length.
  OutputProcessor(const tokenizer::Tokenizer& tok, int64_t vocab_size) : tok_(tok), vocab_(vocab_size) {}

  // Sequence `seq` (choice `index` of `request`) entered the engine: its text continues after
  // `prompt`, its stop strings are armed. arm: its A/B arm (RequestOutput::arm of every output),
  // -1 = none.
  void add(sched::SeqId seq, RequestId request, int32_t index, std::span<const int32_t> prompt,
           const SamplingParams& params, ToolCallFormat tool_calls, int32_t arm = -1);
  bool contains(sched::SeqId seq) const { return requests_.contains(seq); }
  // Sequences added and not yet finished, failed or aborted.
  size_t num_requests() const { return requests_.size(); }

  // A prefill chunk of `seq` ran through the target: with prompt_logprobs, the log-probabilities
  // of tokens [start + 1, start + n] of `tokens` from `logits` [n, vocab] join the next output
  // (positions already reported, as after a preemption, are not reported again).
  void prompt_chunk(sched::SeqId seq, std::span<const int32_t> tokens, int32_t start, int32_t n, const float* logits);
  // The first n prompt tokens of `seq` came from the prefix cache (reported as num_cached_tokens).
  void cached(sched::SeqId seq, int32_t n);

  // The tokens appended for `seq` this step (see Committed). token_finish kStop (a stop token id)
  // keeps its text out. A stop string may finish the sequence earlier; the output then reports only
  // the tokens up to the one that completed it. A finished sequence is forgotten.
  RequestOutput process(sched::SeqId seq, const Committed& c);

  // The final output of a sequence that ends without further tokens: failed with a message, or
  // aborted. Its counters are reported with it and it is forgotten.
  RequestOutput fail(sched::SeqId seq, const std::string& message);
  RequestOutput abort(sched::SeqId seq);
  // The final output of a request refused before it got a sequence (Engine::add_request).
  static RequestOutput refuse(RequestId request, const std::string& message, int32_t num_prompt);

 private:
  struct Request {
    RequestId request = 0;
    int32_t index = 0;
    std::unique_ptr<tokenizer::IncrementalDetokenizer> detok;
    sampling::StopStringMatcher stops;
    std::unique_ptr<ToolCallParser> tools;
    int32_t logprobs = -1;
    int32_t prompt_logprobs = -1;
    int32_t prompt_reported = 1;  // prompt positions below this have their logprobs reported
    std::vector<TokenLogprobs> pending_prompt;
    int32_t num_prompt = 0;
    int32_t num_cached = 0;
    int32_t num_generated = 0;
    int32_t arm = -1;
    spec::SpecMetrics spec;  // this sequence's speculative counters
  };
  void fill_counters(const Request& r, RequestOutput& out) const;
  void emit(Request& r, const std::string& text, bool end, RequestOutput& out) const;
  void finish_text(Request& r, FinishReason& finish, bool stop_string, RequestOutput& out) const;
  TokenLogprobs token_logprobs(const float* logits, int32_t token, int32_t top_n);
  RequestOutput ended(sched::SeqId seq, FinishReason reason);

  const tokenizer::Tokenizer& tok_;
  int64_t vocab_;
  std::unordered_map<sched::SeqId, Request> requests_;
  std::vector<float> logprob_row_;  // [vocab] scratch
  std::vector<int32_t> top_ids_;
};

}  // namespace specd::output

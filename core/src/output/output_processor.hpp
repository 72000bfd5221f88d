// The output processor: what a request sees of the tokens the engine commits. It turns the
// tokens the scheduler appended for a request into a RequestOutput: incremental detokenization,
// stop strings (held back while they could still complete, excluded from the text), the finish
// reason, and the request's counters (tokens, speculative drafts and acceptances). The scheduler
// decides the token-level stops (stop token ids, max_tokens, context length); a stop string is
// decided here and may end a request in the middle of a step's accepted run.
//
// Requests are keyed by the caller's RequestId. Used from the engine's step thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>

#include "sampling/stop.hpp"
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

class OutputProcessor {
 public:
  // The tokenizer must outlive the processor.
  explicit OutputProcessor(const tokenizer::Tokenizer& tok) : tok_(tok) {}

  // A request entered the engine: its text continues after `prompt`, its stop strings are armed.
  // arm: its A/B arm (RequestOutput::arm of every output), -1 = none.
  void add(RequestId id, std::span<const int32_t> prompt, const SamplingParams& params, int32_t arm = -1);
  bool contains(RequestId id) const { return requests_.contains(id); }
  // Requests added and not yet finished, failed or aborted.
  size_t num_requests() const { return requests_.size(); }

  // The tokens appended for request `id` this step, in order. token_finish is the scheduler's
  // verdict on the last of them: kStop (a stop token id: its text is not output), kLength, or
  // kNone. A stop string may finish the request earlier; the output then reports only the tokens
  // up to the one that completed it. spec: this step's outcome when the request proposed. A
  // finished request is forgotten.
  RequestOutput process(RequestId id, std::span<const int32_t> appended, FinishReason token_finish,
                        const SpecStep* spec = nullptr);

  // The final output of a request that ends without further tokens: failed with a message, or
  // aborted. A known request's counters are reported with it and the request is forgotten;
  // num_prompt is reported for a request that never got as far as add().
  RequestOutput fail(RequestId id, const std::string& message, int32_t num_prompt = 0);
  RequestOutput abort(RequestId id);

 private:
  struct Request {
    std::unique_ptr<tokenizer::IncrementalDetokenizer> detok;
    sampling::StopStringMatcher stops;
    int32_t num_prompt = 0;
    int32_t num_generated = 0;
    int32_t arm = -1;
    spec::SpecMetrics spec;  // this request's speculative counters
  };
  void fill_counters(const Request& r, RequestOutput& out) const;
  void finish_text(Request& r, FinishReason& finish, bool stop_string, std::string& text) const;

  const tokenizer::Tokenizer& tok_;
  std::unordered_map<RequestId, Request> requests_;
};

}  // namespace specd::output

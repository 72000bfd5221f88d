#include "output/output_processor.hpp"

#include "specd/error.hpp"
#include "specd/kernels/softmax.hpp"
#include "specd/kernels/top_k_top_p.hpp"

namespace specd::output {

void OutputProcessor::add(sched::SeqId seq, RequestId request, int32_t index, std::span<const int32_t> prompt,
                          const SamplingParams& params, ToolCallFormat tool_calls, int32_t arm) {
  Request& r = requests_[seq];
  r.request = request;
  r.index = index;
  r.arm = arm;
  r.detok = std::make_unique<tokenizer::IncrementalDetokenizer>(tok_, params.skip_special_tokens, prompt);
  r.stops = sampling::StopStringMatcher(params.stop, params.include_stop_str_in_output);
  r.tools = std::make_unique<ToolCallParser>(tool_calls);
  r.logprobs = params.logprobs;
  r.prompt_logprobs = params.prompt_logprobs;
  r.num_prompt = static_cast<int32_t>(prompt.size());
}

TokenLogprobs OutputProcessor::token_logprobs(const float* logits, int32_t token, int32_t top_n) {
  logprob_row_.resize(static_cast<size_t>(vocab_));
  kernels::log_softmax(kernels::Device::kCpu, logits, logprob_row_.data(), 1, vocab_);
  TokenLogprobs t{token, logprob_row_[static_cast<size_t>(token)], {}};
  if (top_n > 0) {
    top_ids_.resize(static_cast<size_t>(top_n));
    kernels::top_k_indices(kernels::Device::kCpu, logprob_row_.data(), vocab_, top_n, top_ids_.data());
    for (int32_t id : top_ids_) t.top.push_back({id, logprob_row_[static_cast<size_t>(id)]});
  }
  return t;
}

void OutputProcessor::prompt_chunk(sched::SeqId seq, std::span<const int32_t> tokens, int32_t start, int32_t n,
                                   const float* logits) {
  auto it = requests_.find(seq);
  if (it == requests_.end() || it->second.prompt_logprobs < 0 || logits == nullptr) return;
  Request& r = it->second;
  // Row j predicts token start + j + 1; only prompt tokens, each once.
  for (int32_t j = 0; j < n; ++j) {
    const int32_t pos = start + j + 1;
    if (pos < r.prompt_reported || pos >= r.num_prompt) continue;
    r.pending_prompt.push_back(token_logprobs(logits + static_cast<size_t>(j) * static_cast<size_t>(vocab_),
                                              tokens[static_cast<size_t>(pos)], r.prompt_logprobs));
    r.prompt_reported = pos + 1;
  }
}

void OutputProcessor::cached(sched::SeqId seq, int32_t n) {
  if (auto it = requests_.find(seq); it != requests_.end()) it->second.num_cached = n;
}

void OutputProcessor::fill_counters(const Request& r, RequestOutput& out) const {
  out.id = r.request;
  out.index = r.index;
  out.num_prompt_tokens = r.num_prompt;
  out.num_cached_tokens = r.num_cached;
  out.num_generated_tokens = r.num_generated;
  out.num_draft_tokens = static_cast<int32_t>(r.spec.draft_tokens);
  out.num_accepted_tokens = static_cast<int32_t>(r.spec.accepted_tokens);
  out.num_spec_steps = static_cast<int32_t>(r.spec.num_drafts);
  out.arm = r.arm;
  if (out.finish_reason != FinishReason::kNone) {
    out.drafted_at.assign(r.spec.drafted_at.begin(), r.spec.drafted_at.end());
    out.accepted_at.assign(r.spec.accepted_at.begin(), r.spec.accepted_at.end());
  }
}

// Final text through the tool-call parser; `end` flushes what the parser holds.
void OutputProcessor::emit(Request& r, const std::string& text, bool end, RequestOutput& out) const {
  ToolCallParser::Result res = r.tools->push(text);
  if (end) {
    ToolCallParser::Result tail = r.tools->finish();
    res.content += tail.content;
    for (ToolCall& c : tail.calls) res.calls.push_back(std::move(c));
  }
  out.text_delta += res.content;
  for (ToolCall& c : res.calls) out.tool_calls.push_back(std::move(c));
}

// End of stream: releases text the detokenizer and the stop matcher were holding back, unless
// a stop string ended the stream (then the rest is dropped).
void OutputProcessor::finish_text(Request& r, FinishReason& finish, bool stop_string, RequestOutput& out) const {
  std::string text;
  if (!stop_string) {
    const auto tail = r.stops.push(r.detok->flush());
    text = tail.text;
    if (tail.stopped) {
      finish = FinishReason::kStop;
    } else {
      text += r.stops.flush();
    }
  }
  emit(r, text, true, out);
}

RequestOutput OutputProcessor::process(sched::SeqId seq, const Committed& c) {
  Request& r = requests_.at(seq);
  RequestOutput out;
  out.prompt_logprobs = std::move(r.pending_prompt);
  r.pending_prompt.clear();
  FinishReason finish = FinishReason::kNone;
  const std::span<const int32_t> appended = c.appended;
  for (size_t i = 0; i < appended.size() && finish == FinishReason::kNone; ++i) {
    const int32_t token = appended[i];
    const bool last = i + 1 == appended.size();
    out.new_token_ids.push_back(token);
    ++r.num_generated;
    if (r.logprobs >= 0 && c.logits != nullptr)
      out.logprobs.push_back(token_logprobs(c.logits + i * static_cast<size_t>(vocab_), token, r.logprobs));
    bool stop_string = false;
    if (last && c.token_finish == FinishReason::kStop && !c.grammar_complete) {
      finish = FinishReason::kStop;  // a stop token: as in vLLM, its text is not output
    } else {
      auto pushed = r.stops.push(r.detok->push({&token, 1}));
      stop_string = pushed.stopped;
      if (stop_string) finish = FinishReason::kStop;
      emit(r, pushed.text, false, out);
    }
    if (finish == FinishReason::kNone && last) finish = c.token_finish;
    if (finish != FinishReason::kNone) finish_text(r, finish, stop_string, out);
    out.token_text_ends.push_back(static_cast<uint32_t>(out.text_delta.size()));
  }
  if (appended.empty() && c.token_finish != FinishReason::kNone) {
    finish = c.token_finish;  // nothing generated (max_tokens 0)
    finish_text(r, finish, false, out);
  }
  if (c.spec != nullptr)
    r.spec.record(c.spec->k, c.spec->drafted, c.spec->accepted, static_cast<int32_t>(out.new_token_ids.size()));
  out.finish_reason = finish;
  out.finished = finish != FinishReason::kNone;
  fill_counters(r, out);
  if (out.finished) requests_.erase(seq);
  return out;
}

RequestOutput OutputProcessor::ended(sched::SeqId seq, FinishReason reason) {
  RequestOutput out;
  out.finished = true;
  out.finish_reason = reason;
  auto it = requests_.find(seq);
  SPECD_CHECK(it != requests_.end(), ErrorCode::kInternal, "output: sequence " + std::to_string(seq) + " is unknown");
  fill_counters(it->second, out);
  requests_.erase(it);
  return out;
}

RequestOutput OutputProcessor::fail(sched::SeqId seq, const std::string& message) {
  RequestOutput out = ended(seq, FinishReason::kError);
  out.error = message;
  return out;
}

RequestOutput OutputProcessor::abort(sched::SeqId seq) {
  return ended(seq, FinishReason::kAbort);
}

RequestOutput OutputProcessor::refuse(RequestId request, const std::string& message, int32_t num_prompt) {
  RequestOutput out;
  out.id = request;
  out.finished = true;
  out.finish_reason = FinishReason::kError;
  out.error = message;
  out.num_prompt_tokens = num_prompt;
  return out;
}

}  // namespace specd::output

#include "output/output_processor.hpp"

namespace specd::output {

void OutputProcessor::add(RequestId id, std::span<const int32_t> prompt, const SamplingParams& params,
                          int32_t arm) {
  Request& r = requests_[id];
  r.arm = arm;
  r.detok = std::make_unique<tokenizer::IncrementalDetokenizer>(tok_, true, prompt);
  r.stops = sampling::StopStringMatcher(params.stop);
  r.num_prompt = static_cast<int32_t>(prompt.size());
}

void OutputProcessor::fill_counters(const Request& r, RequestOutput& out) const {
  out.num_prompt_tokens = r.num_prompt;
  out.num_generated_tokens = r.num_generated;
  out.num_draft_tokens = static_cast<int32_t>(r.spec.draft_tokens);
  out.num_accepted_tokens = static_cast<int32_t>(r.spec.accepted_tokens);
  out.num_spec_steps = static_cast<int32_t>(r.spec.num_drafts);
  out.arm = r.arm;
}

// End of stream: releases text the detokenizer and the stop matcher were holding back, unless
// a stop string ended the stream (then the rest is dropped).
void OutputProcessor::finish_text(Request& r, FinishReason& finish, bool stop_string, std::string& text) const {
  if (stop_string) return;
  const auto tail = r.stops.push(r.detok->flush());
  text += tail.text;
  if (tail.stopped) {
    finish = FinishReason::kStop;
  } else {
    text += r.stops.flush();
  }
}

RequestOutput OutputProcessor::process(RequestId id, std::span<const int32_t> appended, FinishReason token_finish,
                                       const SpecStep* spec) {
  Request& r = requests_.at(id);
  RequestOutput out;
  out.id = id;
  FinishReason finish = FinishReason::kNone;
  for (size_t i = 0; i < appended.size() && finish == FinishReason::kNone; ++i) {
    const int32_t token = appended[i];
    const bool last = i + 1 == appended.size();
    out.new_token_ids.push_back(token);
    ++r.num_generated;
    bool stop_string = false;
    if (last && token_finish == FinishReason::kStop) {
      finish = FinishReason::kStop;  // a stop token: as in vLLM, its text is not output
    } else {
      const auto pushed = r.stops.push(r.detok->push({&token, 1}));
      out.text_delta += pushed.text;
      stop_string = pushed.stopped;
      if (stop_string) finish = FinishReason::kStop;
    }
    if (finish == FinishReason::kNone && last) finish = token_finish;
    if (finish != FinishReason::kNone) finish_text(r, finish, stop_string, out.text_delta);
  }
  if (spec != nullptr)
    r.spec.record(spec->k, spec->drafted, spec->accepted, static_cast<int32_t>(out.new_token_ids.size()));
  out.finish_reason = finish;
  out.finished = finish != FinishReason::kNone;
  fill_counters(r, out);
  if (out.finished) requests_.erase(id);
  return out;
}

RequestOutput OutputProcessor::fail(RequestId id, const std::string& message, int32_t num_prompt) {
  RequestOutput out;
  out.id = id;
  out.finished = true;
  out.finish_reason = FinishReason::kError;
  out.error = message;
  out.num_prompt_tokens = num_prompt;
  if (auto it = requests_.find(id); it != requests_.end()) {
    out.num_prompt_tokens = it->second.num_prompt;
    out.arm = it->second.arm;
    requests_.erase(it);
  }
  return out;
}

RequestOutput OutputProcessor::abort(RequestId id) {
  RequestOutput out;
  out.id = id;
  out.finished = true;
  out.finish_reason = FinishReason::kAbort;
  if (auto it = requests_.find(id); it != requests_.end()) {
    fill_counters(it->second, out);
    requests_.erase(it);
  }
  return out;
}

}  // namespace specd::output

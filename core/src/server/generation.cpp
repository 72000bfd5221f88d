#include "server/generation.hpp"

#include <deque>
#include <memory>
#include <optional>
#include <utility>

namespace specd::server {

using nlohmann::json;

namespace {

// The engine request for a parsed API request (speculative options and the arm validated).
Request to_engine_request(const GenerationRequest& g) {
  Request r;
  r.prompt_ids = g.prompt_ids;
  r.sampling = g.sampling;
  r.n = g.n;
  r.tool_calls = g.tool_calls;
  r.structured = g.structured;
  if (g.speculative.enabled) r.speculative.enabled = *g.speculative.enabled;
  r.speculative.num_speculative_tokens = g.speculative.num_speculative_tokens;
  r.speculative.dynamic = g.speculative.dynamic;
  r.speculative.arm = g.speculative.arm;
  r.speculative.user = g.user;
  r.speculative.tenant = g.tenant;
  return r;
}

// Waits for the next output; nullopt once the client has gone away. The ServingEngine guarantees
// every stream ends (stop() aborts).
std::optional<RequestOutput> next_output(RequestStream& stream, const http::Exchange& ex) {
  for (;;) {
    if (ex.client_gone()) return std::nullopt;
    if (auto out = stream.next(Clock::now() + std::chrono::milliseconds(200))) return out;
  }
}

// A choice that failed or was aborted fails the request (its other choices are cancelled).
bool failed(const RequestOutput& out) {
  return out.finish_reason == FinishReason::kError || out.finish_reason == FinishReason::kAbort;
}

ApiError engine_failure(const RequestOutput& out) {
  if (out.finish_reason == FinishReason::kAbort) {
    return ApiError(503, "the request was aborted: the server is shutting down", "server_error", "", "aborted");
  }
  return ApiError(500, "generation failed: " + out.error, "server_error", "", "engine_error");
}

// One prompt in flight: its stream, and a cancel on the way out unless it finished.
struct InFlight {
  ServingEngine& engine;
  RequestId id = 0;
  std::shared_ptr<RequestStream> stream;
  std::unique_ptr<ResponseBuilder> builder;  // once its first output is known (it names the arm)
  std::string arm;
  InFlight(ServingEngine& e, RequestId i, std::shared_ptr<RequestStream> s) : engine(e), id(i), stream(std::move(s)) {}
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  ~InFlight() {
    if (!stream->finished()) engine.cancel(id);
  }
};

class Generation {
 public:
  Generation(const GenerationContext& ctx, const std::vector<GenerationRequest>& requests, http::Exchange& ex)
      : ctx_(ctx), requests_(requests), ex_(ex) {}

  void run() {
    submit_all();
    // The first output of the first prompt decides the status line and the X-Specd-Arm header.
    std::optional<RequestOutput> first = first_output(0);
    if (!first) return;  // the client is gone
    if (requests_.front().stream) {
      stream(std::move(*first));
    } else {
      respond(std::move(*first));
    }
  }

 private:
  void submit_all() {
    for (const GenerationRequest& g : requests_) {
      Submission sub = ctx_.engine.submit(to_engine_request(g));
      if (sub.status == SubmitStatus::kQueueFull) {
        throw ApiError(429,
                       "the server is busy: the request queue is full (scheduler.max_queue = " +
                           std::to_string(ctx_.cfg.scheduler.max_queue) + "); retry later",
                       "rate_limit_error", "", "queue_full");
      }
      if (sub.status == SubmitStatus::kStopped)
        throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
      prompts_.emplace_back(ctx_.engine, sub.id, std::move(sub.stream));
    }
  }

  // Prompt p's first output, with its builder made; nullopt when the client is gone. Throws the
  // engine's failure.
  std::optional<RequestOutput> first_output(size_t p) {
    InFlight& f = prompts_[p];
    std::optional<RequestOutput> out = next_output(*f.stream, ex_);
    if (!out) return std::nullopt;
    if (failed(*out)) throw engine_failure(*out);
    const std::vector<std::string>& arms = ctx_.limits.arms;
    f.arm = out->arm >= 0 && static_cast<size_t>(out->arm) < arms.size() ? arms[static_cast<size_t>(out->arm)] : "";
    const GenerationRequest& g = requests_[p];
    const ResponseOptions options{ctx_.cfg.server.stream_token_by_token, !arms.empty(), f.arm,
                                  static_cast<int32_t>(p) * g.n};  // arms: the engine speculates
    f.builder = std::make_unique<ResponseBuilder>(g, ctx_.meta, ctx_.tok, options);
    return out;
  }

  http::Headers arm_header(http::Headers headers) const {
    if (!prompts_.front().arm.empty()) headers.emplace_back("X-Specd-Arm", prompts_.front().arm);
    return headers;
  }

  void respond(RequestOutput first) {
    std::vector<json> responses;
    for (size_t p = 0; p < prompts_.size(); ++p) {
      std::optional<RequestOutput> out = p == 0 ? std::move(first) : first_output(p);
      InFlight& f = prompts_[p];
      for (;;) {
        if (!out) return;
        if (failed(*out)) throw engine_failure(*out);
        f.builder->add(*out);
        if (out->finished) break;
        out = next_output(*f.stream, ex_);
      }
      responses.push_back(f.builder->response());
    }
    const json body = responses.size() == 1 ? std::move(responses.front()) : merge_responses(responses);
    ex_.reply(http::Response{200, "application/json", dump(body), arm_header({})});
  }

  // Server-sent events: each prompt's chunks in turn, then the usage chunk when asked for, then
  // [DONE]. Returns when the stream ended or the client went away.
  void stream(RequestOutput first) {
    if (!ex_.begin_stream(200, "text/event-stream",
                          arm_header({{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}})))
      return;
    for (size_t p = 0; p < prompts_.size(); ++p) {
      std::optional<RequestOutput> out;
      if (p == 0) {
        out = std::move(first);
      } else {
        try {
          out = first_output(p);
        } catch (const ApiError& e) {
          end_with_error(e);
          return;
        }
      }
      if (!out || !stream_prompt(prompts_[p], std::move(*out))) return;
    }
    std::string data;
    if (requests_.front().include_usage) {
      json chunk = prompts_.front().builder->usage_chunk();
      if (prompts_.size() > 1) {
        std::vector<json> usages;
        for (const InFlight& f : prompts_) usages.push_back(f.builder->usage_chunk()["usage"]);
        chunk["usage"] = merge_usage(usages);
      }
      data += sse(chunk);
    }
    data += "data: [DONE]\n\n";
    if (ex_.write(std::move(data))) ex_.end_stream();
  }

  // One prompt's chunks until it finishes; false when the stream ended early (client gone, or an
  // error event sent).
  bool stream_prompt(InFlight& f, RequestOutput first) {
    std::vector<RequestOutput> outs;
    outs.push_back(std::move(first));
    std::vector<json> chunks;
    for (;;) {
      std::string data;
      bool finished = false;
      for (const RequestOutput& out : outs) {
        if (failed(out)) {
          end_with_error(engine_failure(out), std::move(data));
          return false;
        }
        chunks.clear();
        f.builder->stream(out, chunks);
        for (const json& c : chunks) data += sse(c);
        if ((finished = out.finished)) break;
      }
      if (!data.empty() && !ex_.write(std::move(data))) {
        ctx_.log.debug("stream ended early (client gone); cancelling");
        return false;
      }
      if (finished) return true;
      std::optional<RequestOutput> out = next_output(*f.stream, ex_);
      if (!out) return false;
      outs.clear();
      outs.push_back(std::move(*out));
      for (RequestOutput& more : f.stream->drain()) outs.push_back(std::move(more));
    }
  }

  void end_with_error(const ApiError& e, std::string data = {}) {
    data += sse(error_body(e));
    data += "data: [DONE]\n\n";
    if (ex_.write(std::move(data))) ex_.end_stream();
  }

  const GenerationContext& ctx_;
  const std::vector<GenerationRequest>& requests_;
  http::Exchange& ex_;
  std::deque<InFlight> prompts_;
};

}  // namespace

std::string sse(const json& j) {
  return "data: " + dump(j) + "\n\n";
}

void serve_generation(const GenerationContext& ctx, const std::vector<GenerationRequest>& requests,
                      http::Exchange& ex) {
  Generation(ctx, requests, ex).run();
}

}  // namespace specd::server

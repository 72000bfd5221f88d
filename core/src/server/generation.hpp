// Serving one completion or chat completion request (docs/server.md): the parsed requests go to
// the ServingEngine (one per prompt: a completion may carry a list of prompts), and their outputs
// come back as one JSON response or one server-sent-event stream. Prompt i's choices are numbered
// from i * n; a stream sends each prompt's chunks in prompt order (the engine runs them together),
// then one usage chunk for all (stream_options.include_usage), then [DONE]. A client that goes
// away, or a prompt that fails, cancels every prompt still running.
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"
#include "server/http_transport.hpp"
#include "server/openai_api.hpp"
#include "server/openai_response.hpp"
#include "specd/log.hpp"
#include "specd/serving_engine.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::server {

struct GenerationContext {
  ServingEngine& engine;
  const tokenizer::Tokenizer& tok;
  const ApiLimits& limits;
  const config::EngineConfig& cfg;
  ResponseMeta meta;
  log::Logger& log;
};

// Serves the requests (parsed and arm-resolved, at least one). Throws ApiError for what happens
// before the response starts (429 queue full, 503 stopping, a failure of the first output); after
// that, errors become an error event in the stream.
void serve_generation(const GenerationContext& ctx, const std::vector<GenerationRequest>& requests, http::Exchange& ex);

// "data: <json>\n\n".
std::string sse(const nlohmann::json& j);

}  // namespace specd::server

// The OpenAI-compatible HTTP server (docs/server.md): routes, authentication, generation and
// metrics over the HTTP transport (http_transport.hpp); this header is cheap to include.
//
//   server::HttpServer http(cfg);
//   int port = http.bind();          // listening now; /health answers 503 until load()
//   http.start();
//   http.load(std::make_unique<Engine>(cfg));
//   ...                               // wait for SIGTERM
//   http.shutdown(std::chrono::seconds(cfg.server.shutdown_timeout_s));
//
// Threading: every member may be called from any thread; shutdown() blocks until the listener
// and every request handler have finished.
//
// Slow or hostile clients hold no thread: connections are asynchronous, bounded by
// server.max_connections, and every phase of a request has a deadline (server.*_timeout_s).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "specd/engine.hpp"

namespace specd::config {
struct EngineConfig;
}

namespace specd::server {

class MetricsRegistry;

class HttpServer {
 public:
  // Reads server.* from the config (host, port, keys, limits, chat template, queue size).
  // Throws specd::Error on an unknown chat template.
  explicit HttpServer(const config::EngineConfig& config);
  ~HttpServer();  // shutdown(0) if it was not called
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds server.host:server.port (port 0 = an ephemeral port) and returns the bound port.
  // Throws specd::Error when the address cannot be bound.
  int bind();
  // Serves on a background thread. Generation endpoints and /health answer 503 until load().
  void start();
  // Hands over the loaded engine, whose tokenizer the server validates prompts with; from now
  // on /health is 200.
  void load(std::unique_ptr<Engine> engine);

  // Graceful stop: /health turns 503 and new generation requests are refused with 503, idle
  // connections are closed, the requests already admitted may finish until `timeout` has
  // passed, the rest are aborted (streams end with an error event), then every connection still
  // open is closed (at most 1 s later) and the listener stops. Idempotent.
  void shutdown(std::chrono::milliseconds timeout);

  // The metrics behind GET /metrics; add families here (e.g. speculative decoding counters).
  MetricsRegistry& metrics();
  const std::string& model_name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace specd::server

// specd serve (--config FILE | --model DIR) [--set key=value]... [--host H] [--port P]
// Runs the OpenAI-compatible server (docs/server.md). Prints "listening on http://HOST:PORT" on
// stderr as soon as the port is bound (port 0 = ephemeral), loads the model (/health answers
// 503 until then), and on SIGINT/SIGTERM drains in-flight requests for up to
// server.shutdown_timeout_s, aborts the rest and exits 0.
#include <pthread.h>
#include <signal.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "cli/model_flags.hpp"
#include "config/config.hpp"
#include "server/http_server.hpp"
#include "specd/engine.hpp"
#include "specd/log.hpp"

namespace specd::cli {
namespace {

struct ServeOptions {
  ModelFlags model;
  std::string host;
  int port = -1;
};

void run_serve(const ServeOptions& o) {
  // Signals are taken by sigwait() below; block them before any thread exists so that every
  // thread inherits the mask. A client that disconnects must not kill the process.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  ModelFlags flags = o.model;  // --host / --port are overrides applied after --set
  if (!o.host.empty()) flags.sets.push_back("server.host=" + o.host);
  if (o.port >= 0) flags.sets.push_back("server.port=" + std::to_string(o.port));
  const config::EngineConfig cfg = load_engine_config(flags);
  log::Logger& log = log::get("server");

  server::HttpServer http(cfg);
  const int port = http.bind();
  http.start();
  std::fprintf(stderr, "listening on http://%s:%d\n", cfg.server.host.c_str(), port);
  std::fflush(stderr);

  const auto t0 = std::chrono::steady_clock::now();
  try {
    http.load(std::make_unique<Engine>(cfg));
  } catch (...) {
    http.shutdown(std::chrono::milliseconds(0));
    throw;
  }
  log.info("model loaded in {:.2f} s; ready",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());

  int sig = 0;
  while (sigwait(&signals, &sig) != 0) {
  }
  log.info("received {}; finishing in-flight requests (up to {} s)", sig == SIGINT ? "SIGINT" : "SIGTERM",
           cfg.server.shutdown_timeout_s);
  http.shutdown(std::chrono::seconds(cfg.server.shutdown_timeout_s));
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto opts = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve", "Run the OpenAI-compatible HTTP server");
  add_model_flags(*cmd, opts->model);
  cmd->add_option("--host", opts->host, "Listen address (overrides server.host)");
  cmd->add_option("--port", opts->port, "Listen port, 0 = ephemeral (overrides server.port)")
      ->check(CLI::Range(0, 65535));
  cmd->callback([opts] { run_serve(*opts); });
}

}  // namespace specd::cli

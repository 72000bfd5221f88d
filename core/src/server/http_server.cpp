#include "server/http_server.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <optional>
#include <random>

#include "common/hash.hpp"
#include "config/config.hpp"
#include "server/chat_template.hpp"
#include "server/engine_exporter.hpp"
#include "server/generation.hpp"
#include "server/http_transport.hpp"
#include "server/metrics.hpp"
#include "server/openai_api.hpp"
#include "server/openai_response.hpp"
#include "server/spec_exporter.hpp"
#include "server/tokenize_api.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"
#include "specd/sdk/abi.h"
#include "specd/serving_engine.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::server {

using nlohmann::json;

namespace {

std::string default_model_name(const config::EngineConfig& cfg) {
  if (!cfg.server.model_name.empty()) return cfg.server.model_name;
  std::filesystem::path p = std::filesystem::path(cfg.model.path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().empty() ? std::string("specd") : p.filename().string();
}

// Compares in time independent of where the strings differ.
bool equal_constant_time(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

void send_json(http::Exchange& ex, int status, const json& body) {
  ex.reply(http::Response{status, "application/json", dump(body), {}});
}

http::Response error_response(const ApiError& e) {
  http::Headers headers;
  if (e.status == 401) headers.emplace_back("WWW-Authenticate", "Bearer");
  return http::Response{e.status, "application/json", dump(error_body(e)), std::move(headers)};
}

void send_error(http::Exchange& ex, const ApiError& e) {
  ex.reply(error_response(e));
}

// Known endpoints by name, so the http metric's label set stays bounded.
std::string endpoint_label(const std::string& path) {
  static const char* kKnown[] = {
      "/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics", "/version",
      "/tokenize",       "/detokenize"};
  for (const char* k : kKnown) {
    if (path == k) return k;
  }
  return "other";
}

}  // namespace

// After the engine stopped, how long responses may still be written before every connection is
// closed (so shutdown takes at most server.shutdown_timeout_s plus this).
constexpr auto kFlushTime = std::chrono::seconds(1);

// What exists once the model is loaded; handlers hold a shared_ptr so it outlives them.
struct Loaded {
  const tokenizer::Tokenizer* tok = nullptr;  // the engine's (the ServingEngine owns the Engine)
  std::unique_ptr<ServingEngine> engine;
  std::unique_ptr<ChatPrompter> prompter;
  ApiLimits limits;
};

struct HttpServer::Impl {
  config::EngineConfig cfg;
  std::string model_name;
  std::string fingerprint;  // system_fingerprint(cfg)
  std::vector<std::string> api_keys;
  log::Logger& log = log::get("server");
  std::unique_ptr<http::Transport> transport;
  int port = -1;
  int64_t started_at = static_cast<int64_t>(std::time(nullptr));

  std::mutex mu;
  std::shared_ptr<Loaded> loaded;  // null until load()
  std::atomic<bool> draining{false};
  bool shut_down = false;
  std::mutex shutdown_mu;

  std::atomic<uint64_t> next_response_id{0};
  uint64_t id_salt = std::random_device{}();

  MetricsRegistry metrics;
  Family<Counter>* requests_total = nullptr;
  Family<Counter>* http_requests_total = nullptr;
  Histogram* latency = nullptr;
  Histogram* queue_time = nullptr;
  Histogram* ttft = nullptr;
  Histogram* tpot = nullptr;
  Counter* prompt_tokens = nullptr;
  Counter* generation_tokens = nullptr;
  Counter* engine_steps = nullptr;
  Gauge* queue_depth = nullptr;
  Gauge* running = nullptr;
  Gauge* ready = nullptr;
  // Speculative decoding: engine-wide, per A/B arm and per shadow arm (series exist only when on).
  SpecExporter spec{metrics};
  EngineExporter engine_series{metrics};  // KV cache, prefix cache, preemptions, step time

  explicit Impl(const config::EngineConfig& c);
  void register_metrics();
  void routes();
  std::shared_ptr<Loaded> get_loaded() {
    std::lock_guard lock(mu);
    return loaded;
  }
  void check_auth(const http::Request& req) const;
  std::string tenant_of(const http::Request& req, const std::string& user) const;
  void generate(const http::Request& req, http::Exchange ex, bool chat);
  void on_finished(const RequestTrace& t);
  std::string response_id(bool chat) {
    const uint64_t n = next_response_id.fetch_add(1) + 1;
    return fmt::format("{}-{:016x}{:08x}", chat ? "chatcmpl" : "cmpl", id_salt, n);
  }
};

HttpServer::Impl::Impl(const config::EngineConfig& c)
    : cfg(c), model_name(default_model_name(c)), fingerprint(system_fingerprint(c)) {
  // Validate the template setting before anything binds.
  if (cfg.server.chat_template != "auto" && !std::filesystem::is_regular_file(cfg.server.chat_template)) {
    throw Error(ErrorCode::kInvalidArgument, "server.chat_template: expected auto or a Jinja template file, got '" +
                                                 cfg.server.chat_template + "' (no such file)");
  }
  api_keys = cfg.server.api_keys;
  if (!cfg.server.api_key_env.empty()) {
    const char* key = std::getenv(cfg.server.api_key_env.c_str());
    if (key != nullptr && *key != '\0') {
      api_keys.emplace_back(key);
    } else {
      log.warn("server.api_key_env names {}, which is not set; it adds no key", cfg.server.api_key_env);
    }
  }
  register_metrics();
  routes();
}

void HttpServer::Impl::register_metrics() {
  requests_total =
      &metrics.counter("specd_requests_total", "Finished generation requests by finish reason.", {"finish_reason"});
  for (const char* r : {"stop", "length", "error", "abort"}) requests_total->with({r});
  http_requests_total = &metrics.counter("specd_http_requests_total", "HTTP responses by endpoint and status code.",
                                         {"endpoint", "code"});
  latency = &metrics
                 .histogram("specd_request_latency_seconds", "Time from arrival to the last token.",
                            latency_buckets_seconds())
                 .with({});
  queue_time = &metrics
                    .histogram("specd_request_queue_time_seconds", "Time a request waited before entering the engine.",
                               latency_buckets_seconds())
                    .with({});
  ttft = &metrics
              .histogram("specd_time_to_first_token_seconds", "Time from arrival to the first generated token.",
                         latency_buckets_seconds())
              .with({});
  tpot =
      &metrics
           .histogram("specd_time_per_output_token_seconds",
                      "Mean time between output tokens after the first, per request.", token_latency_buckets_seconds())
           .with({});
  prompt_tokens = &metrics.counter("specd_prompt_tokens_total", "Prompt tokens of finished requests.").with({});
  generation_tokens = &metrics.counter("specd_generation_tokens_total", "Generated tokens.").with({});
  engine_steps = &metrics.counter("specd_engine_steps_total", "Engine steps run.").with({});
  queue_depth = &metrics.gauge("specd_queue_depth", "Requests waiting to enter the engine.").with({});
  running = &metrics.gauge("specd_running_sequences", "Requests inside the engine (prefilling or decoding).").with({});
  ready = &metrics.gauge("specd_model_ready", "1 once the model is loaded and the server accepts requests.").with({});
  metrics.add_collect_hook([this] {
    std::shared_ptr<Loaded> l = get_loaded();
    if (!l) return;
    const ServingEngineStats s = l->engine->stats();
    queue_depth->set(static_cast<double>(s.num_waiting));
    running->set(static_cast<double>(s.num_running));
    ready->set(draining ? 0.0 : 1.0);
    engine_series.collect(s.engine, s.steps);
    spec.collect(s.spec, s.arms);
  });
}

void HttpServer::Impl::on_finished(const RequestTrace& t) {
  requests_total->with({std::string(finish_reason_name(t.finish_reason))}).inc();
  prompt_tokens->inc(t.num_prompt_tokens);
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  latency->observe(seconds(t.finished - t.submitted));
  queue_time->observe(seconds(t.started - t.submitted));
  if (t.first_token) {
    ttft->observe(seconds(*t.first_token - t.submitted));
    if (t.num_generated_tokens > 1) tpot->observe(seconds(t.finished - *t.first_token) / (t.num_generated_tokens - 1));
  }
}

// Whose text a request is (SpeculativeOptions::tenant): its API key (when the server checks keys)
// and its `user`; "" (shared with nobody) when it has neither. The key itself is not kept.
std::string HttpServer::Impl::tenant_of(const http::Request& req, const std::string& user) const {
  std::string tenant;
  if (!api_keys.empty()) {
    const std::string& header = req.header("authorization");
    tenant += "key:" + std::to_string(fnv1a64(header));
  }
  if (!user.empty()) {
    if (!tenant.empty()) tenant += '/';
    tenant += "user:";
    tenant += user;
  }
  return tenant;
}

void HttpServer::Impl::check_auth(const http::Request& req) const {
  if (api_keys.empty()) return;
  const std::string& header = req.header("authorization");
  static const std::string kBearer = "Bearer ";
  if (header.empty()) {
    throw ApiError(401, "missing API key: send 'Authorization: Bearer <key>'", "authentication_error", "",
                   "invalid_api_key");
  }
  bool ok = false;
  if (header.compare(0, kBearer.size(), kBearer) == 0) {
    const std::string key = header.substr(kBearer.size());
    for (const std::string& k : api_keys) ok = equal_constant_time(key, k) || ok;
  }
  if (!ok) throw ApiError(401, "invalid API key", "authentication_error", "", "invalid_api_key");
}

namespace {

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

}  // namespace

void HttpServer::Impl::routes() {
  http::Options opt;
  const config::ServerConfig& sc = cfg.server;
  opt.limits.max_body_bytes = static_cast<uint64_t>(sc.max_body_bytes);
  opt.limits.idle_timeout = millis(sc.idle_timeout_s);
  opt.limits.header_timeout = millis(sc.header_timeout_s);
  opt.limits.body_timeout = millis(sc.body_timeout_s);
  opt.limits.write_timeout = millis(sc.write_timeout_s);
  opt.limits.max_connections = static_cast<size_t>(sc.max_connections);
  opt.cors_allow_origins = sc.cors_allow_origins;
  // A generation request holds a worker while it waits for tokens: as many as the engine can
  // run or queue (bounded), the rest wait for a worker.
  opt.worker_threads = std::clamp<size_t>(
      static_cast<size_t>(cfg.scheduler.max_num_seqs) + static_cast<size_t>(cfg.scheduler.max_queue) + 8, 16, 256);
  opt.max_pending_work = static_cast<size_t>(std::max(1, cfg.scheduler.max_queue));
  opt.error_response = [](int status, const std::string& message, const std::string& code) {
    return error_response(
        ApiError(status, message, status >= 500 ? "server_error" : "invalid_request_error", "", code));
  };
  opt.on_response = [this](const http::Request& req, int status) {
    http_requests_total->with({endpoint_label(req.path), std::to_string(status)}).inc();
    log.debug("{} {} -> {}", req.method, req.path, status);
  };
  transport = std::make_unique<http::Transport>(std::move(opt), log);

  transport->route("GET", "/health", http::Dispatch::kInline, [this](const http::Request&, http::Exchange ex) {
    if (draining) {
      send_json(ex, 503, json{{"status", "shutting_down"}});
    } else if (!get_loaded()) {
      send_json(ex, 503, json{{"status", "loading"}});
    } else {
      send_json(ex, 200, json{{"status", "ok"}});
    }
  });
  transport->route("GET", "/metrics", http::Dispatch::kInline, [this](const http::Request&, http::Exchange ex) {
    ex.reply(http::Response{200, "text/plain; version=0.0.4; charset=utf-8", metrics.render(), {}});
  });
  auto model_object = [this] {
    json model = {{"id", model_name}, {"object", "model"}, {"created", started_at}, {"owned_by", "specd"}};
    if (auto l = get_loaded()) model["max_model_len"] = l->limits.max_model_len;
    return model;
  };
  auto models = [this, model_object](bool one) {
    return [this, model_object, one](const http::Request& req, http::Exchange ex) {
      try {
        check_auth(req);
      } catch (const ApiError& e) {
        return send_error(ex, e);
      }
      send_json(ex, 200, one ? model_object() : json{{"object", "list"}, {"data", json::array({model_object()})}});
    };
  };
  transport->route("GET", "/v1/models", http::Dispatch::kInline, models(false));
  // The one model this server serves, by its id (OpenAI's retrieve-model call); another id is a 404.
  transport->route("GET", "/v1/models/" + model_name, http::Dispatch::kInline, models(true));
  transport->route("GET", "/version", http::Dispatch::kInline, [](const http::Request&, http::Exchange ex) {
    send_json(ex, 200,
              json{{"version", SPECD_VERSION},
                   {"plugin_abi", std::to_string(SPECD_ABI_MAJOR) + "." + std::to_string(SPECD_ABI_MINOR)}});
  });

  // POST /tokenize and /detokenize with the served model's tokenizer (tokenize_api.hpp).
  auto tokens = [this](bool encode) {
    return [this, encode](const http::Request& req, http::Exchange ex) {
      try {
        check_auth(req);
        std::shared_ptr<Loaded> l = get_loaded();
        if (!l) throw ApiError(503, "the model is still loading", "server_error", "", "not_ready");
        const nlohmann::ordered_json body = parse_body(req.body);
        send_json(ex, 200,
                  encode ? tokenize_response(body, l->limits, *l->tok, *l->prompter)
                         : detokenize_response(body, l->limits, *l->tok));
      } catch (const ApiError& e) {
        send_error(ex, e);
      }
    };
  };
  transport->route("POST", "/tokenize", http::Dispatch::kWorker, tokens(true));
  transport->route("POST", "/detokenize", http::Dispatch::kWorker, tokens(false));

  auto generation = [this](bool chat) {
    return [this, chat](const http::Request& req, http::Exchange ex) {
      try {
        generate(req, ex, chat);
      } catch (const ApiError& e) {
        if (e.status >= 500) log.warn("{} {}: {}", req.method, req.path, e.what());
        send_error(ex, e);
      }
    };
  };
  transport->route("POST", "/v1/completions", http::Dispatch::kWorker, generation(false));
  transport->route("POST", "/v1/chat/completions", http::Dispatch::kWorker, generation(true));
}

void HttpServer::Impl::generate(const http::Request& req, http::Exchange ex, bool chat) {
  check_auth(req);
  std::shared_ptr<Loaded> l = get_loaded();
  if (draining) throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
  if (!l) throw ApiError(503, "the model is still loading", "server_error", "", "not_ready");

  const nlohmann::ordered_json body = parse_body(req.body);
  std::vector<GenerationRequest> requests;
  if (chat) {
    requests.push_back(parse_chat_request(body, l->limits, *l->tok, *l->prompter));
  } else {
    requests = parse_completion_requests(body, l->limits, *l->tok);
  }
  const std::string tenant = tenant_of(req, requests.empty() ? std::string() : requests.front().user);
  for (GenerationRequest& g : requests) {
    resolve_arm(g, req.header("x-specd-arm"), l->limits);
    g.tenant = tenant;
  }
  const GenerationContext ctx{
      *l->engine,
      *l->tok,
      l->limits,
      cfg,
      ResponseMeta{response_id(chat), static_cast<int64_t>(std::time(nullptr)), model_name, fingerprint},
      log};
  serve_generation(ctx, requests, ex);
}

HttpServer::HttpServer(const config::EngineConfig& config) : impl_(std::make_unique<Impl>(config)) {}

HttpServer::~HttpServer() {
  shutdown(std::chrono::milliseconds(0));
}

int HttpServer::bind() {
  Impl& m = *impl_;
  m.port = m.transport->bind(m.cfg.server.host, m.cfg.server.port);
  return m.port;
}

void HttpServer::start() {
  Impl& m = *impl_;
  SPECD_CHECK(m.port > 0, ErrorCode::kInvalidArgument, "HttpServer::start() before bind()");
  m.transport->start();
}

void HttpServer::load(std::unique_ptr<Engine> engine) {
  Impl& m = *impl_;
  auto l = std::make_shared<Loaded>();
  l->tok = &engine->tokenizer();
  l->prompter = std::make_unique<ChatPrompter>(*l->tok, m.cfg.server.chat_template, m.cfg.server.tool_call_parser);
  const EngineInfo& info = engine->info();
  l->limits.model_name = m.model_name;
  l->limits.max_model_len = info.max_model_len;
  const int64_t context_limit = std::max<int64_t>(1, info.max_model_len - 1);  // room for one token
  l->limits.max_prompt_tokens = static_cast<int32_t>(
      m.cfg.server.max_prompt_tokens > 0 ? std::min<int64_t>(m.cfg.server.max_prompt_tokens, context_limit)
                                         : context_limit);
  l->limits.max_tokens_limit = m.cfg.server.max_tokens_limit;
  l->limits.allow_unsupported_tools = m.cfg.server.allow_unsupported_tools;
  l->limits.template_timeout_ms = m.cfg.server.template_timeout_ms;
  l->limits.cancel_renders = &m.draining;
  l->limits.vocab_size = info.vocab_size;
  l->limits.defaults = {info.default_temperature,        info.default_top_p, info.default_min_p,
                        info.default_repetition_penalty, info.default_top_k, info.default_max_tokens};
  m.engine_series.set_engine(info);
  for (const ArmInfo& a : info.arms) l->limits.arms.push_back(a.name);
  m.spec.set_engine(info);  // before `loaded` is published: the collect hook reads it after get_loaded()

  ServingEngineOptions opts;
  opts.max_queue = static_cast<size_t>(std::max(0, m.cfg.scheduler.max_queue));
  opts.max_running = static_cast<size_t>(std::max(1, m.cfg.scheduler.max_num_seqs));
  opts.on_finished = [&m](const RequestTrace& t) { m.on_finished(t); };
  opts.on_step = [&m](size_t new_tokens) {
    m.engine_steps->inc();
    m.generation_tokens->inc(static_cast<double>(new_tokens));
  };
  l->engine = std::make_unique<ServingEngine>(std::move(engine), std::move(opts));
  m.log.info("serving model '{}' (chat template {}, context {}, prompt limit {} tokens)", m.model_name,
             l->prompter->description(), l->limits.max_model_len, l->limits.max_prompt_tokens);
  std::lock_guard lock(m.mu);
  m.loaded = std::move(l);
}

void HttpServer::shutdown(std::chrono::milliseconds timeout) {
  Impl& m = *impl_;
  std::lock_guard stop_lock(m.shutdown_mu);
  if (m.shut_down) return;
  m.shut_down = true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  m.draining = true;
  m.transport->drain();
  if (std::shared_ptr<Loaded> l = m.get_loaded()) {
    l->engine->stop(timeout);  // every stream has its finished output now
  }
  // The handlers write what the engine produced (aborted streams end with an error event);
  // a client that does not read it is cut off kFlushTime after the deadline at the latest.
  m.transport->shutdown(std::max(deadline, std::chrono::steady_clock::now()) + kFlushTime);
  m.log.info("server stopped");
}

MetricsRegistry& HttpServer::metrics() {
  return impl_->metrics;
}
const std::string& HttpServer::model_name() const {
  return impl_->model_name;
}

}  // namespace specd::server

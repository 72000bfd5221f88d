// The HTTP/1.1 transport under the OpenAI server (Boost.Beast over Asio; Beast stays inside
// http_transport.cpp). It knows nothing about the API: it reads requests within limits, routes
// them by method and path to handlers, and writes whole or streamed (chunked) responses.
//
// Limits hold by construction, whatever a client sends or fails to send:
//   - a request body is refused with 413 once it passes max_body_bytes, before it is buffered,
//     for Content-Length and chunked bodies alike; a header beyond max_header_bytes gets 431;
//   - every phase has a deadline: the first byte of a request (idle), the rest of its header,
//     its body, and each write of the response; a connection past one is closed;
//   - connections are asynchronous (no thread waits on a slow client), and at most
//     max_connections are open: a new one evicts the connection that has waited longest without
//     a request in progress, or, when every connection is busy, is admitted for inline routes
//     only (/health and /metrics stay answerable);
//   - shutdown() closes what is still open at its deadline.
//
// Threading: inline handlers run on an I/O thread and must not block; worker handlers run on a
// pool of worker threads and may block (Exchange::begin_stream and write block until the bytes
// are written). Every Exchange member may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specd::log {
class Logger;
}

namespace specd::server::http {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Limits {
  uint64_t max_body_bytes = 1 << 20;
  uint32_t max_header_bytes = 16 << 10;             // request line and header fields
  std::chrono::milliseconds idle_timeout{60000};    // waiting for the first byte of a request
  std::chrono::milliseconds header_timeout{10000};  // first byte to the end of the header
  std::chrono::milliseconds body_timeout{30000};    // end of the header to the end of the body
  std::chrono::milliseconds write_timeout{30000};   // each write of a response
  size_t max_connections = 1024;
};

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query
  std::string body;
  Headers headers;  // names in lower case
  // The value of header `name` (lower case), "" when absent.
  const std::string& header(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  Headers headers;
};

// The reply channel of one request: exactly one reply(), or begin_stream() + write()... +
// end_stream(). A request whose every Exchange copy is gone without a reply gets a 500.
class Exchange {
 public:
  struct State;
  explicit Exchange(std::shared_ptr<State> state) : state_(std::move(state)) {}

  void reply(Response response);
  // Streamed response (chunked). begin_stream and write block until the bytes are written (at
  // most write_timeout; never call them on an I/O thread) and return false once the client is
  // gone: the handler should stop producing. end_stream does not block.
  bool begin_stream(int status, const std::string& content_type, const Headers& headers);
  bool write(std::string data);
  void end_stream();
  // The client closed its side (noticed while the request is in progress) or the connection was
  // closed by shutdown: whatever is still computed for it is wasted.
  bool client_gone() const;

 private:
  std::shared_ptr<State> state_;
};

class Session;  // one connection (http_transport.cpp)

enum class Dispatch {
  kInline,  // cheap, non-blocking: runs on the I/O thread; also served on over-limit connections
  kWorker,  // may block (generation): runs on the worker pool
};
using Handler = std::function<void(const Request&, Exchange)>;

struct Options {
  Limits limits;
  size_t io_threads = 2;
  size_t worker_threads = 16;
  size_t max_pending_work = 1024;  // worker requests waiting for a thread; beyond, 503
  // The body of an error the transport answers itself (400, 404, 405, 413, 431, 500, 503).
  std::function<Response(int status, const std::string& message, const std::string& code)> error_response;
  // Called once per response with its status (when its head is sent), from an I/O thread.
  std::function<void(const Request&, int status)> on_response;
  // Origins whose browsers may call the server ("*": any); empty: no CORS headers, and OPTIONS
  // is a 405 like any method without a route.
  std::vector<std::string> cors_allow_origins;
};

class Transport {
 public:
  Transport(Options options, log::Logger& log);
  ~Transport();  // shutdown(now) if it was not called
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Before start(). A path with several methods gets one route per method.
  void route(const std::string& method, const std::string& path, Dispatch dispatch, Handler handler);
  // Binds and listens; returns the bound port (port 0 = ephemeral). Throws specd::Error.
  int bind(const std::string& host, int port);
  void start();
  // Starts a graceful stop: connections without a request in progress are closed, and every
  // response from now on closes its connection. New connections are still accepted (so that
  // /health can say the server is stopping) until shutdown().
  void drain();
  // Stops accepting, waits until `deadline` for responses in progress, closes every connection
  // still open, and joins all threads. Idempotent.
  void shutdown(std::chrono::steady_clock::time_point deadline);

 private:
  friend class Session;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace specd::server::http

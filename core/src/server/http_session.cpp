#include "server/http_session.hpp"

#include <malloc.h>
#include <sys/socket.h>

#include <cerrno>

namespace specd::server::http {

namespace {

// After an error response to a request whose body was not read (413 from the header alone), the
// rest of the body is read and dropped for a while before closing: closing with unread data sends
// a reset, which destroys the response before a client that writes its whole body first reads it.
// Bounded in time; the byte bound only stops a client that streams faster than any real upload.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr uint64_t kLingerBytes = uint64_t{1} << 30;
// Requests with a body at least this large return the heap they built to the system when done.
constexpr size_t kTrimAfterBodyBytes = size_t{1} << 20;

std::string str(beast::string_view s) {
  return std::string(s.data(), s.size());
}

std::string lower(beast::string_view s) {
  std::string out = str(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

void Session::read_request() {
  if (!open()) return;
  parser_.emplace();
  parser_->header_limit(t_.opt.limits.max_header_bytes);
  parser_->body_limit(t_.opt.limits.max_body_bytes);
  request_ = Request{};
  origin_.clear();
  set_phase(Phase::kIdle);
  if (buffer_.size() > 0) return read_header();  // a pipelined request is already here
  stream_.expires_after(t_.opt.limits.idle_timeout);
  stream_.async_read_some(buffer_.prepare(kReadChunk),
                          [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_first_bytes(ec, n); });
}

void Session::on_first_bytes(beast::error_code ec, size_t n) {
  if (ec) return close();  // idle timeout, the client closed, or shutdown
  buffer_.commit(n);
  read_header();
}

void Session::read_header() {
  set_phase(Phase::kHeader);
  stream_.expires_after(t_.opt.limits.header_timeout);
  bhttp::async_read_header(stream_, buffer_, *parser_,
                           [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
}

void Session::on_header(beast::error_code ec) {
  if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
    return fail(431, "the request header is larger than " + std::to_string(t_.opt.limits.max_header_bytes) + " bytes",
                "header_too_large");
  }
  if (ec == bhttp::error::body_limit) return fail(413, body_limit_message(), "request_too_large");
  if (ec == beast::error::timeout || ec == bhttp::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::operation_aborted || !open()) {
    return close();
  }
  if (ec) return fail(400, "malformed HTTP request: " + ec.message(), "bad_request");
  const auto& msg = parser_->get();
  request_.method = str(msg.method_string());
  const beast::string_view target = msg.target();
  request_.path = str(target.substr(0, target.find('?')));
  if (beast::iequals(msg[bhttp::field::expect], "100-continue") && !parser_->is_done()) {
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    stream_.expires_after(t_.opt.limits.write_timeout);
    net::async_write(stream_, net::buffer(kContinue), [self = shared_from_this()](beast::error_code wec, size_t) {
      if (wec) return self->close();
      self->read_body();
    });
    return;
  }
  read_body();
}

void Session::read_body() {
  if (parser_->is_done()) return dispatch();
  set_phase(Phase::kBody);
  stream_.expires_after(t_.opt.limits.body_timeout);
  bhttp::async_read(stream_, buffer_, *parser_,
                    [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
}

void Session::on_body(beast::error_code ec) {
  if (ec == bhttp::error::body_limit) return fail(413, body_limit_message(), "request_too_large");
  if (ec == beast::error::timeout || ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
      ec == net::error::eof || ec == net::error::operation_aborted || !open()) {
    return close();
  }
  if (ec) return fail(400, "malformed HTTP request body: " + ec.message(), "bad_request");
  dispatch();
}

void Session::dispatch() {
  set_phase(Phase::kBusy);
  ++gen_;
  auto& msg = parser_->get();
  keep_alive_ = msg.keep_alive() && !control_only_ && !t_.draining;
  request_.body = std::move(msg.body());
  for (const auto& field : msg) request_.headers.emplace_back(lower(field.name_string()), str(field.value()));
  origin_ = request_.header("origin");  // request_ moves to the handler; CORS needs it for the answer

  const auto by_path = t_.routes.find(request_.path);
  if (by_path == t_.routes.end()) {
    return fail(404, "no route for " + request_.method + " " + request_.path, "not_found");
  }
  const auto route = by_path->second.find(request_.method);
  if (route == by_path->second.end() && request_.method == "OPTIONS" && !t_.opt.cors_allow_origins.empty()) {
    // A CORS preflight: the path's methods and the headers the browser asks to send.
    std::string allow = "OPTIONS";
    for (const auto& [method, r] : by_path->second) allow += ", " + method;
    const std::string& asked = request_.header("access-control-request-headers");
    return write_and_close(Response{204, "", "", {}},
                           {{"Access-Control-Allow-Methods", allow},
                            {"Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked},
                            {"Access-Control-Max-Age", "600"}});
  }
  if (route == by_path->second.end()) {
    std::string allow;
    for (const auto& [method, r] : by_path->second) allow += (allow.empty() ? "" : ", ") + method;
    return fail(405, request_.method + " is not allowed on " + request_.path + " (allowed: " + allow + ")",
                "method_not_allowed", {{"Allow", allow}});
  }
  if (control_only_ && route->second.dispatch == Dispatch::kWorker) {
    return fail(503,
                "too many connections (server.max_connections = " + std::to_string(t_.opt.limits.max_connections) +
                    "); retry later",
                "too_many_connections");
  }

  auto st = std::make_shared<Exchange::State>();
  st->session = shared_from_this();
  st->request = std::move(request_);
  request_.method = st->request.method;
  request_.path = st->request.path;
  current_ = st;
  watch_disconnect();
  // Routes do not change after start(): the handler outlives the request.
  auto run = [&log = t_.log, st, handler = &route->second.handler] {
    const bool large = st->request.body.size() >= kTrimAfterBodyBytes;
    try {
      (*handler)(st->request, Exchange(st));
    } catch (const std::exception& e) {
      log.error("{} {} failed: {}", st->request.method, st->request.path, e.what());
    }  // no reply yet: ~State answers 500
    // What a large request built (its parsed JSON, a long prompt's pieces: small blocks that the
    // allocator keeps) goes back to the system, so that the next one starts from the idle
    // footprint (100k messages after 60k unknown field names: 223 MB against 60 idle).
    if (large) malloc_trim(0);
  };
  if (route->second.dispatch == Dispatch::kInline) return run();
  if (!t_.submit([run] { run(); })) {
    st->responded = true;  // answered here instead
    current_.reset();
    fail(503, "the server is busy: every request worker is taken; retry later", "server_busy");
  }
}

// While a request is in progress nothing is read from the socket; a readable socket with no
// data means the client closed it.
void Session::watch_disconnect() {
  stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), gen = gen_](beast::error_code ec) {
    if (ec || gen != self->gen_ || self->phase_ != Phase::kBusy) return;
    char c;
    const ssize_t n = ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      if (auto st = self->current_.lock()) st->gone = true;
    } else if (n < 0) {
      self->watch_disconnect();
    }  // n > 0: the client sent more (pipelining): it is there
  });
}

void Session::send_whole(const std::shared_ptr<Exchange::State>& st, Response r) {
  if (!open() || current_.lock() != st) return st->write_finished(false);
  whole_.emplace(static_cast<bhttp::status>(r.status), 11);
  whole_->set(bhttp::field::content_type, r.content_type);
  for (const auto& [k, v] : r.headers) whole_->set(k, v);
  cors_headers(*whole_);
  whole_->keep_alive(keep_alive_);
  whole_->body() = std::move(r.body);
  whole_->prepare_payload();
  respond(r.status);
  stream_.expires_after(t_.opt.limits.write_timeout);
  bhttp::async_write(stream_, *whole_, [self = shared_from_this(), st](beast::error_code ec, size_t) {
    self->whole_.reset();
    st->write_finished(!ec);
    self->finish(!ec);
  });
}

void Session::send_head(const std::shared_ptr<Exchange::State>& st, int status, const std::string& content_type,
                        const Headers& headers) {
  if (!open() || current_.lock() != st) return st->write_finished(false);
  head_.emplace(static_cast<bhttp::status>(status), 11);
  head_->set(bhttp::field::content_type, content_type);
  for (const auto& [k, v] : headers) head_->set(k, v);
  cors_headers(*head_);
  head_->keep_alive(keep_alive_);
  head_->chunked(true);
  head_sr_.emplace(*head_);
  respond(status);
  stream_.expires_after(t_.opt.limits.write_timeout);
  bhttp::async_write_header(stream_, *head_sr_, [self = shared_from_this(), st](beast::error_code ec, size_t) {
    st->write_finished(!ec);
    if (ec) self->close();
  });
}

void Session::send_chunk(const std::shared_ptr<Exchange::State>& st, std::string data) {
  if (!open() || current_.lock() != st) return st->write_finished(false);
  chunk_ = std::move(data);
  stream_.expires_after(t_.opt.limits.write_timeout);
  net::async_write(stream_, bhttp::make_chunk(net::buffer(chunk_)),
                   [self = shared_from_this(), st](beast::error_code ec, size_t) {
                     st->write_finished(!ec);
                     if (ec) self->close();
                   });
}

void Session::send_last(const std::shared_ptr<Exchange::State>& st) {
  if (!open() || current_.lock() != st) return;
  stream_.expires_after(t_.opt.limits.write_timeout);
  net::async_write(stream_, bhttp::make_chunk_last(), [self = shared_from_this()](beast::error_code ec, size_t) {
    self->head_sr_.reset();
    self->head_.reset();
    self->finish(!ec);
  });
}

void Session::abandoned() {
  if (!open() || phase_ != Phase::kBusy) return;
  t_.log.error("{} {}: the handler sent no response", request_.method, request_.path);
  current_.reset();
  fail(500, "internal server error: no response was produced", "internal_error");
}

// The response is written: next request on this connection, or close.
void Session::finish(bool ok) {
  ++gen_;
  current_.reset();
  beast::error_code ignored;
  stream_.socket().cancel(ignored);  // the disconnect watch
  if (!ok || !keep_alive_ || t_.draining) return close();
  read_request();
}

// An error answered by the transport itself; the connection closes after it.
void Session::fail(int status, const std::string& message, const std::string& code, const Headers& extra) {
  write_and_close(t_.error(status, message, code), extra);
}

// A response the transport writes itself (an error, a CORS preflight), then an orderly close.
void Session::write_and_close(const Response& r, const Headers& extra) {
  if (!open()) return;
  set_phase(Phase::kBusy);
  keep_alive_ = false;
  whole_.emplace(static_cast<bhttp::status>(r.status), 11);
  if (!r.content_type.empty()) whole_->set(bhttp::field::content_type, r.content_type);
  for (const auto& [k, v] : r.headers) whole_->set(k, v);
  for (const auto& [k, v] : extra) whole_->set(k, v);
  cors_headers(*whole_);
  whole_->keep_alive(false);
  whole_->body() = r.body;
  whole_->prepare_payload();
  respond(r.status);
  stream_.expires_after(t_.opt.limits.write_timeout);
  bhttp::async_write(stream_, *whole_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->whole_.reset();
    if (ec) return self->close();
    self->linger();
  });
}

// Access-Control-Allow-Origin for a request whose Origin the server allows (docs/server.md "CORS").
template <class Fields>
void Session::cors_headers(Fields& h) const {
  const std::vector<std::string>& allowed = t_.opt.cors_allow_origins;
  if (allowed.empty()) return;
  const std::string& origin = origin_;
  if (origin.empty()) return;
  if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) {
    h.set(bhttp::field::access_control_allow_origin, "*");
  } else if (std::find(allowed.begin(), allowed.end(), origin) != allowed.end()) {
    h.set(bhttp::field::access_control_allow_origin, origin);
    h.set(bhttp::field::vary, "Origin");
  }
}

void Session::linger() {
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  linger_until_ = Clock::now() + kLingerTime;
  lingered_ = 0;
  buffer_.clear();
  struct Drop {
    std::shared_ptr<Session> self;
    void operator()(beast::error_code ec = {}, size_t n = 0) {
      self->lingered_ += n;
      self->buffer_.clear();
      if (ec || self->lingered_ > kLingerBytes || !self->open()) return self->close();
      self->stream_.expires_at(self->linger_until_);
      self->stream_.async_read_some(self->buffer_.prepare(kReadChunk), std::move(*this));
    }
  };
  Drop{shared_from_this()}();
}

void Session::close() {
  if (!open()) return;
  set_phase(Phase::kClosed);
  {
    // A closing connection no longer counts against max_connections (it may linger in
    // handlers a little longer).
    std::lock_guard lock(t_.reg_mu);
    if (counted_) --t_.counted;
    counted_ = false;
  }
  if (auto st = current_.lock()) st->gone = true;
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
}

// ---- Exchange ----------------------------------------------------------------------------------

Exchange::State::~State() {
  if (!responded && !gone) {
    session->post([s = session] { s->abandoned(); });
  } else if (!responded || (streaming && !ended)) {
    // The client left, or a stream was left unfinished (nobody else can complete it): close.
    session->post([s = session] { s->close(); });
  }
}

void Exchange::reply(Response response) {
  State& s = *state_;
  {
    std::lock_guard lock(s.mu);
    if (s.responded) return;
    s.responded = true;
    ++s.writes_started;
  }
  s.session->post([st = state_, r = std::move(response)]() mutable { st->session->send_whole(st, std::move(r)); });
}

bool Exchange::begin_stream(int status, const std::string& content_type, const Headers& headers) {
  State& s = *state_;
  uint64_t ticket = 0;
  {
    std::lock_guard lock(s.mu);
    if (s.responded) return false;
    s.responded = true;
    s.streaming = true;
    ticket = ++s.writes_started;
  }
  s.session->post(
      [st = state_, status, content_type, headers] { st->session->send_head(st, status, content_type, headers); });
  return s.wait_write(ticket, s.session->write_bound());
}

bool Exchange::write(std::string data) {
  State& s = *state_;
  uint64_t ticket = 0;
  {
    std::lock_guard lock(s.mu);
    if (!s.streaming || s.write_failed || s.gone) return false;
    ticket = ++s.writes_started;
  }
  s.session->post([st = state_, d = std::move(data)]() mutable { st->session->send_chunk(st, std::move(d)); });
  return s.wait_write(ticket, s.session->write_bound());
}

void Exchange::end_stream() {
  State& s = *state_;
  {
    std::lock_guard lock(s.mu);
    if (!s.streaming || s.ended) return;
    s.ended = true;
  }
  s.session->post([st = state_] { st->session->send_last(st); });
}

bool Exchange::client_gone() const {
  return state_->gone;
}

}  // namespace specd::server::http

#include "server/http_transport.hpp"

#include <sys/resource.h>
#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "specd/error.hpp"
#include "specd/log.hpp"

namespace specd::server::http {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kReadChunk = 16 << 10;
// Connections admitted above max_connections, for inline routes only, when none can be evicted.
constexpr size_t kControlReserve = 16;
// After an error response to a request whose body was not read, the rest of the body is read and
// dropped for a while before closing: closing with unread data sends a reset, which can destroy
// the response before the client reads it.
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr uint64_t kLingerBytes = 16 << 20;
constexpr int kBacklog = 1024;

const std::string kNoValue;

enum class Phase { kIdle, kHeader, kBody, kBusy, kClosed };

std::string str(beast::string_view s) { return std::string(s.data(), s.size()); }

std::string lower(beast::string_view s) {
  std::string out = str(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const std::string& Request::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return kNoValue;
}



struct Route {
  Dispatch dispatch;
  Handler handler;
};

// ---- Exchange state --------------------------------------------------------------------------

struct Exchange::State {
  std::shared_ptr<Session> session;
  Request request;
  std::mutex mu;
  std::condition_variable cv;
  bool responded = false;  // reply() or begin_stream() was called
  bool streaming = false;
  bool ended = false;      // end_stream() was called
  uint64_t writes_started = 0;
  uint64_t writes_done = 0;
  bool write_failed = false;
  std::atomic<bool> gone{false};

  ~State();
  // Called on the session's strand when a write finished.
  void write_finished(bool ok) {
    {
      std::lock_guard lock(mu);
      ++writes_done;
      write_failed = write_failed || !ok;
    }
    cv.notify_all();
  }
  // Waits for write number `ticket`; bounded in case the I/O threads are gone.
  bool wait_write(uint64_t ticket, std::chrono::milliseconds bound) {
    std::unique_lock lock(mu);
    const bool done = cv.wait_for(lock, bound, [&] { return writes_done >= ticket; });
    return done && !write_failed;
  }
};

// ---- Transport state --------------------------------------------------------------------------

struct Transport::Impl {
  Impl(Options o, log::Logger& l) : opt(std::move(o)), log(l) {}

  Options opt;
  log::Logger& log;
  std::map<std::string, std::map<std::string, Route>> routes;  // path -> method -> route
  std::atomic<bool> draining{false};
  std::atomic<bool> stopped{false};  // the I/O threads are gone: nothing may be posted
  bool shut_down = false;
  std::mutex shutdown_mu;

  // Open sessions. `counted` is how many count against max_connections (an evicted session
  // stops counting at once, though it closes asynchronously).
  mutable std::mutex reg_mu;
  std::unordered_map<uint64_t, std::weak_ptr<Session>> sessions;
  uint64_t next_id = 0;
  size_t counted = 0;
  size_t control_only = 0;

  // Worker pool.
  std::mutex work_mu;
  std::condition_variable work_cv;
  std::deque<std::function<void()>> work;
  bool work_stop = false;
  std::vector<std::thread> workers;

  std::vector<std::thread> io_threads;
  // Declared last: destroyed first, so abandoned handlers release their sessions while the
  // registry above still exists.
  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> guard;
  tcp::acceptor acceptor{net::make_strand(ioc)};
  net::steady_timer accept_retry{acceptor.get_executor()};

  Response error(int status, const std::string& message, const std::string& code) const {
    return opt.error_response(status, message, code);
  }
  bool submit(std::function<void()> task) {
    {
      std::lock_guard lock(work_mu);
      if (work_stop || work.size() >= opt.max_pending_work) return false;
      work.push_back(std::move(task));
    }
    work_cv.notify_one();
    return true;
  }
  void worker_loop();
  void accept();
  void admit(tcp::socket socket);
  bool evict_one_locked();
  template <typename Pred>
  void close_sessions(Pred pred);
  size_t busy_sessions() const;
};

// ---- Session -----------------------------------------------------------------------------------

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Transport::Impl& t, tcp::socket socket, uint64_t id, bool control_only)
      : t_(t), stream_(std::move(socket)), buffer_(t.opt.limits.max_header_bytes + 4 * kReadChunk), id_(id),
        control_only_(control_only) {
    set_phase(Phase::kIdle);
  }
  ~Session() {
    std::lock_guard lock(t_.reg_mu);
    t_.sessions.erase(id_);
    if (counted_) --t_.counted;
    if (control_only_) --t_.control_only;
  }

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_request(); });
  }
  // From any thread.
  void close_soon() {
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->close(); });
  }
  Phase phase() const { return phase_.load(); }
  Clock::rep phase_since() const { return since_.load(); }
  bool counted_ = true;  // guarded by Transport::Impl::reg_mu

  // Exchange operations, each posted to the strand by the Exchange.
  void post(std::function<void()> f) {
    if (!t_.stopped) net::post(stream_.get_executor(), std::move(f));
  }
  // How long a blocked writer waits at most (the write itself times out before).
  std::chrono::milliseconds write_bound() const { return t_.opt.limits.write_timeout + std::chrono::seconds(5); }
  void close();
  void send_whole(const std::shared_ptr<Exchange::State>& st, Response r);
  void send_head(const std::shared_ptr<Exchange::State>& st, int status, const std::string& content_type,
                 const Headers& headers);
  void send_chunk(const std::shared_ptr<Exchange::State>& st, std::string data);
  void send_last(const std::shared_ptr<Exchange::State>& st);
  void abandoned();  // the handler dropped its Exchange without a response

 private:
  void set_phase(Phase p) {
    phase_ = p;
    since_ = Clock::now().time_since_epoch().count();
  }
  bool open() const { return phase_ != Phase::kClosed; }

  void read_request();
  void on_first_bytes(beast::error_code ec, size_t n);
  void read_header();
  void on_header(beast::error_code ec);
  void read_body();
  void on_body(beast::error_code ec);
  void dispatch();
  void watch_disconnect();
  void finish(bool ok);
  void fail(int status, const std::string& message, const std::string& code);
  void linger();
  void respond(int status) {
    if (t_.opt.on_response) t_.opt.on_response(request_, status);
  }
  std::string body_limit_message() const {
    return "the request body is larger than server.max_body_bytes = " +
           std::to_string(t_.opt.limits.max_body_bytes) + " bytes";
  }

  Transport::Impl& t_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Request request_;  // method and path of the request in progress (for on_response)
  bool keep_alive_ = false;
  uint64_t gen_ = 0;  // requests started; tells a stale disconnect watch from the current one
  std::weak_ptr<Exchange::State> current_;
  // Kept alive until their write completes.
  std::optional<bhttp::response<bhttp::string_body>> whole_;
  std::optional<bhttp::response<bhttp::empty_body>> head_;
  std::optional<bhttp::response_serializer<bhttp::empty_body>> head_sr_;
  std::string chunk_;
  uint64_t lingered_ = 0;
  Clock::time_point linger_until_;
  const uint64_t id_;
  const bool control_only_;
  std::atomic<Phase> phase_{Phase::kIdle};
  std::atomic<Clock::rep> since_{0};
};

void Session::read_request() {
  if (!open()) return;
  parser_.emplace();
  parser_->header_limit(t_.opt.limits.max_header_bytes);
  parser_->body_limit(t_.opt.limits.max_body_bytes);
  request_ = Request{};
  set_phase(Phase::kIdle);
  if (buffer_.size() > 0) return read_header();  // a pipelined request is already here
  stream_.expires_after(t_.opt.limits.idle_timeout);
  stream_.async_read_some(buffer_.prepare(kReadChunk), [self = shared_from_this()](beast::error_code ec, size_t n) {
    self->on_first_bytes(ec, n);
  });
}

void Session::on_first_bytes(beast::error_code ec, size_t n) {
  if (ec) return close();  // idle timeout, the client closed, or shutdown
  buffer_.commit(n);
  read_header();
}

void Session::read_header() {
  set_phase(Phase::kHeader);
  stream_.expires_after(t_.opt.limits.header_timeout);
  bhttp::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->on_header(ec);
  });
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
  bhttp::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->on_body(ec);
  });
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

  const auto by_path = t_.routes.find(request_.path);
  if (by_path == t_.routes.end()) {
    return fail(404, "no route for " + request_.method + " " + request_.path, "not_found");
  }
  const auto route = by_path->second.find(request_.method);
  if (route == by_path->second.end()) {
    std::string allow;
    for (const auto& [method, r] : by_path->second) allow += (allow.empty() ? "" : ", ") + method;
    return fail(405, request_.method + " is not allowed on " + request_.path + " (allowed: " + allow + ")",
                "method_not_allowed");
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
    try {
      (*handler)(st->request, Exchange(st));
    } catch (const std::exception& e) {
      log.error("{} {} failed: {}", st->request.method, st->request.path, e.what());
    }  // no reply yet: ~State answers 500
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
void Session::fail(int status, const std::string& message, const std::string& code) {
  if (!open()) return;
  set_phase(Phase::kBusy);
  keep_alive_ = false;
  const Response r = t_.error(status, message, code);
  whole_.emplace(static_cast<bhttp::status>(status), 11);
  whole_->set(bhttp::field::content_type, r.content_type);
  for (const auto& [k, v] : r.headers) whole_->set(k, v);
  whole_->keep_alive(false);
  whole_->body() = r.body;
  whole_->prepare_payload();
  respond(status);
  stream_.expires_after(t_.opt.limits.write_timeout);
  bhttp::async_write(stream_, *whole_, [self = shared_from_this()](beast::error_code ec, size_t) {
    self->whole_.reset();
    if (ec) return self->close();
    self->linger();
  });
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
  if (auto st = current_.lock()) st->gone = true;
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
}

// ---- Exchange ----------------------------------------------------------------------------------

Exchange::State::~State() {
  if (!responded) {
    session->post([s = session] { s->abandoned(); });
  } else if (streaming && !ended) {
    session->post([s = session] { s->close(); });  // a stream cannot be completed by anyone else
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
  s.session->post([st = state_, status, content_type, headers] { st->session->send_head(st, status, content_type, headers); });
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

bool Exchange::client_gone() const { return state_->gone; }

// ---- Transport ---------------------------------------------------------------------------------

void Transport::Impl::worker_loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(work_mu);
      work_cv.wait(lock, [&] { return work_stop || !work.empty(); });
      if (work.empty()) return;
      task = std::move(work.front());
      work.pop_front();
    }
    task();
  }
}

void Transport::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors (or a transient error): retry shortly rather than spin.
      log.warn("accept failed: {}", ec.message());
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](beast::error_code wec) {
        if (!wec) accept();
      });
      return;
    }
    admit(std::move(socket));
    accept();
  });
}

void Transport::Impl::admit(tcp::socket socket) {
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(reg_mu);
    bool control = false;
    if (counted >= opt.limits.max_connections && !evict_one_locked()) {
      if (control_only >= kControlReserve) {
        socket.close(ignored);
        return;
      }
      control = true;
    }
    session = std::make_shared<Session>(*this, std::move(socket), ++next_id, control);
    sessions.emplace(next_id, session);
    if (control) {
      session->counted_ = false;
      ++control_only;
    } else {
      ++counted;
    }
  }
  session->start();
}

// Closes the connection that has waited longest without a request in progress: idle
// keep-alive connections first, then those still sending a header, then a body.
bool Transport::Impl::evict_one_locked() {
  std::shared_ptr<Session> victim;
  for (const auto& [id, weak] : sessions) {
    std::shared_ptr<Session> s = weak.lock();
    if (!s || !s->counted_) continue;
    const Phase p = s->phase();
    if (p != Phase::kIdle && p != Phase::kHeader && p != Phase::kBody) continue;
    if (!victim || p < victim->phase() || (p == victim->phase() && s->phase_since() < victim->phase_since())) {
      victim = std::move(s);
    }
  }
  if (!victim) return false;
  victim->counted_ = false;
  --counted;
  victim->close_soon();
  return true;
}

template <typename Pred>
void Transport::Impl::close_sessions(Pred pred) {
  std::vector<std::shared_ptr<Session>> doomed;
  {
    std::lock_guard lock(reg_mu);
    for (const auto& [id, weak] : sessions) {
      if (auto s = weak.lock(); s && pred(s->phase())) doomed.push_back(std::move(s));
    }
  }
  for (auto& s : doomed) s->close_soon();
}

size_t Transport::Impl::busy_sessions() const {
  std::lock_guard lock(reg_mu);
  size_t n = 0;
  for (const auto& [id, weak] : sessions) {
    if (auto s = weak.lock(); s && s->phase() == Phase::kBusy) ++n;
  }
  return n;
}

Transport::Transport(Options options, log::Logger& log) : impl_(std::make_unique<Impl>(std::move(options), log)) {}

Transport::~Transport() { shutdown(Clock::now()); }

void Transport::route(const std::string& method, const std::string& path, Dispatch dispatch, Handler handler) {
  impl_->routes[path][method] = Route{dispatch, std::move(handler)};
}

int Transport::bind(const std::string& host, int port) {
  Impl& m = *impl_;
  auto refuse = [&](const std::string& why) {
    return Error(ErrorCode::kInvalidArgument,
                 "server: cannot listen on " + host + ":" + std::to_string(port) + ": " + why);
  };
  // Each connection is a descriptor: allow as many as the hard limit permits.
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
      m.opt.limits.max_connections + kControlReserve + 256 > lim.rlim_cur) {
    const size_t fit = lim.rlim_cur > kControlReserve + 512 ? lim.rlim_cur - kControlReserve - 256 : 256;
    m.log.warn("server.max_connections = {} does not fit the open-file limit {}; using {}",
               m.opt.limits.max_connections, lim.rlim_cur, fit);
    m.opt.limits.max_connections = fit;
  }
  beast::error_code ec;
  tcp::resolver resolver(m.ioc);
  const auto endpoints = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || endpoints.empty()) throw refuse(ec ? ec.message() : "no address");
  const tcp::endpoint ep = endpoints.begin()->endpoint();
  m.acceptor.open(ep.protocol(), ec);
  if (!ec) m.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(ep, ec);
  if (!ec) m.acceptor.listen(kBacklog, ec);
  if (ec) throw refuse(ec.message() + " (address in use or not local?)");
  return m.acceptor.local_endpoint().port();
}

void Transport::start() {
  Impl& m = *impl_;
  SPECD_CHECK(m.acceptor.is_open(), ErrorCode::kInvalidArgument, "Transport::start() before bind()");
  m.guard.emplace(m.ioc.get_executor());
  for (size_t i = 0; i < std::max<size_t>(1, m.opt.worker_threads); ++i) m.workers.emplace_back([&m] { m.worker_loop(); });
  net::post(m.acceptor.get_executor(), [&m] { m.accept(); });
  for (size_t i = 0; i < std::max<size_t>(1, m.opt.io_threads); ++i) m.io_threads.emplace_back([&m] { m.ioc.run(); });
}

void Transport::drain() {
  impl_->draining = true;
  impl_->close_sessions([](Phase p) { return p == Phase::kIdle || p == Phase::kHeader || p == Phase::kBody; });
}

void Transport::shutdown(Clock::time_point deadline) {
  Impl& m = *impl_;
  std::lock_guard stop_lock(m.shutdown_mu);
  if (m.shut_down) return;
  m.shut_down = true;
  drain();
  net::post(m.acceptor.get_executor(), [&m] {
    beast::error_code ignored;
    m.acceptor.close(ignored);
    m.accept_retry.cancel();
  });
  if (!m.io_threads.empty()) {
    while (m.busy_sessions() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Whatever is still open now is closed: blocked writers see their write fail and return.
  m.close_sessions([](Phase) { return true; });
  {
    std::lock_guard lock(m.work_mu);
    m.work_stop = true;
  }
  m.work_cv.notify_all();
  for (auto& w : m.workers) w.join();
  m.guard.reset();
  m.stopped = true;
  m.ioc.stop();
  for (auto& t : m.io_threads) t.join();
}

size_t Transport::open_connections() const {
  std::lock_guard lock(impl_->reg_mu);
  return impl_->sessions.size();
}

}  // namespace specd::server::http

// Private to the HTTP transport (http_transport.cpp, http_session.cpp): the transport's state,
// one connection (Session) and the shared state behind an Exchange. Beast and Asio stay here.
#pragma once

// clang-format off
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it
// clang-format on

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "server/http_transport.hpp"
#include "specd/log.hpp"

namespace specd::server::http {

namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

inline constexpr size_t kReadChunk = 16 << 10;
// Connections admitted above max_connections, for inline routes only, when none can be evicted.
inline constexpr size_t kControlReserve = 16;

enum class Phase { kIdle, kHeader, kBody, kBusy, kClosed };

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
  bool ended = false;  // end_stream() was called
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
  void close_acceptor();
  std::vector<std::shared_ptr<Session>> snapshot() const;
  std::shared_ptr<Session> pick_victim_locked(const std::vector<std::shared_ptr<Session>>& all) const;
  template <typename Pred>
  void close_sessions(Pred pred);
  size_t busy_sessions() const;
};

// ---- Session -----------------------------------------------------------------------------------

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Transport::Impl& t, tcp::socket socket, uint64_t id, bool control_only)
      : t_(t),
        stream_(std::move(socket)),
        buffer_(t.opt.limits.max_header_bytes + 4 * kReadChunk),
        id_(id),
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
  void fail(int status, const std::string& message, const std::string& code, const Headers& extra = {});
  void write_and_close(const Response& r, const Headers& extra);
  template <class Fields>
  void cors_headers(Fields& h) const;
  void linger();
  void respond(int status) {
    if (t_.opt.on_response) t_.opt.on_response(request_, status);
  }
  std::string body_limit_message() const {
    return "the request body is larger than server.max_body_bytes = " + std::to_string(t_.opt.limits.max_body_bytes) +
           " bytes";
  }

  Transport::Impl& t_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Request request_;     // method and path of the request in progress (for on_response)
  std::string origin_;  // its Origin header (CORS)
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

}  // namespace specd::server::http

#include "server/http_transport.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <future>

#include "server/http_session.hpp"
#include "specd/error.hpp"

namespace specd::server::http {

namespace {

constexpr int kBacklog = 1024;
const std::string kNoValue;

}  // namespace

const std::string& Request::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return kNoValue;
}

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

// Sessions are collected here and released by the caller after reg_mu is unlocked: the last
// reference to a Session may be one of these, and its destructor takes reg_mu.
std::vector<std::shared_ptr<Session>> Transport::Impl::snapshot() const {
  std::vector<std::shared_ptr<Session>> all;
  std::lock_guard lock(reg_mu);
  all.reserve(sessions.size());
  for (const auto& [id, weak] : sessions) {
    if (auto s = weak.lock()) all.push_back(std::move(s));
  }
  return all;
}

void Transport::Impl::admit(tcp::socket socket) {
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  bool at_cap = false;
  {
    std::lock_guard lock(reg_mu);
    at_cap = counted >= opt.limits.max_connections;
  }
  // Declared before the lock below, so released after it.
  const std::vector<std::shared_ptr<Session>> all = at_cap ? snapshot() : std::vector<std::shared_ptr<Session>>{};
  std::shared_ptr<Session> victim, session;
  {
    std::lock_guard lock(reg_mu);
    bool control = false;
    if (counted >= opt.limits.max_connections) {
      victim = pick_victim_locked(all);
      if (victim) {
        victim->counted_ = false;
        --counted;
      } else if (control_only >= kControlReserve) {
        socket.close(ignored);
        return;
      } else {
        control = true;
      }
    }
    session = std::make_shared<Session>(*this, std::move(socket), ++next_id, control);
    sessions.emplace(next_id, session);
    session->counted_ = !control;
    ++(control ? control_only : counted);
  }
  if (victim) victim->close_soon();
  session->start();
}

// The connection that has waited longest without a request in progress: idle keep-alive
// connections first, then those still sending a header, then a body.
std::shared_ptr<Session> Transport::Impl::pick_victim_locked(const std::vector<std::shared_ptr<Session>>& all) const {
  std::shared_ptr<Session> victim;
  for (const auto& s : all) {
    if (!s->counted_) continue;
    const Phase p = s->phase();
    if (p != Phase::kIdle && p != Phase::kHeader && p != Phase::kBody) continue;
    if (!victim || p < victim->phase() || (p == victim->phase() && s->phase_since() < victim->phase_since()))
      victim = s;
  }
  return victim;
}

template <typename Pred>
void Transport::Impl::close_sessions(Pred pred) {
  for (const auto& s : snapshot()) {
    if (pred(s->phase())) s->close_soon();
  }
}

size_t Transport::Impl::busy_sessions() const {
  size_t n = 0;
  for (const auto& s : snapshot()) n += s->phase() == Phase::kBusy ? 1 : 0;
  return n;
}

Transport::Transport(Options options, log::Logger& log) : impl_(std::make_unique<Impl>(std::move(options), log)) {}

Transport::~Transport() {
  shutdown(Clock::now());
}

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
  for (size_t i = 0; i < std::max<size_t>(1, m.opt.worker_threads); ++i)
    m.workers.emplace_back([&m] { m.worker_loop(); });
  net::post(m.acceptor.get_executor(), [&m] { m.accept(); });
  for (size_t i = 0; i < std::max<size_t>(1, m.opt.io_threads); ++i) m.io_threads.emplace_back([&m] { m.ioc.run(); });
}

// Shutdown's last step, on the acceptor's strand: connections still waiting in the listen backlog
// get a 503 instead of a bare close (the request they may have sent is read and dropped first, so
// that closing does not reset the connection under the answer); then the port closes.
void Transport::Impl::close_acceptor() {
  beast::error_code ec;
  accept_retry.cancel();
  acceptor.cancel(ec);
  acceptor.non_blocking(true, ec);
  const Response r = error(503, "the server is shutting down", "shutting_down");
  const std::string wire = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: " + r.content_type +
                           "\r\nContent-Length: " + std::to_string(r.body.size()) + "\r\nConnection: close\r\n\r\n" +
                           r.body;
  for (int i = 0; i < kBacklog && acceptor.is_open(); ++i) {
    tcp::socket s(ioc);
    acceptor.accept(s, ec);
    if (ec) break;  // would_block: the backlog is empty
    net::write(s, net::buffer(wire), ec);
    s.non_blocking(true, ec);
    char sink[4096];
    for (int k = 0; k < 16 && !ec; ++k) s.read_some(net::buffer(sink), ec);
    s.shutdown(tcp::socket::shutdown_both, ec);
    s.close(ec);
  }
  acceptor.close(ec);
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
  // The port stays open while in-flight work finishes: a request that arrives meanwhile is
  // answered (the server's handlers refuse new work with 503), not reset.
  if (!m.io_threads.empty()) {
    while (m.busy_sessions() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!m.io_threads.empty()) {
    std::promise<void> closed;
    net::post(m.acceptor.get_executor(), [&m, &closed] {
      m.close_acceptor();
      closed.set_value();
    });
    closed.get_future().wait();
  } else {
    m.close_acceptor();
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

}  // namespace specd::server::http

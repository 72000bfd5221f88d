// specd-hostile-bench --port P --pid PID (--chunked-mb N | --slow-clients N [--seconds S] | --slow-shutdown)
// Measures how a running `specd serve` (on 127.0.0.1) holds up against hostile clients; prints
// one line of figures per measurement (docs/server.md "Limits" quotes them):
//   --chunked-mb N    sends an N MB chunked request body as fast as the server takes it and
//                     samples the server's RSS (/proc/PID/status) meanwhile: idle RSS, peak RSS,
//                     the status the server answered.
//   --slow-clients N  keeps N connections each sending one header byte per second (reconnecting
//                     when the server closes them) for S seconds, and meanwhile times GET /health
//                     every 20 ms: p50 / p99 / max latency and failures.
//   --slow-shutdown   opens one client that sends a header byte per second, sends SIGTERM to
//                     PID and times how long the server takes to exit.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

int connect_local(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads until the peer closes or `timeout_ms` passes without data; returns the status code.
int read_status(int fd, int timeout_ms) {
  std::string got;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
    if (got.find("\r\n\r\n") != std::string::npos) break;
  }
  return got.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(got.c_str() + 9) : 0;
}

long rss_kib(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

bool alive(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_s, comm, state;
  if (!(in >> pid_s >> comm >> state)) return false;
  return state != "Z" && state != "X";
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

void chunked_body(int port, int pid, int megabytes) {
  const long idle = rss_kib(pid);
  std::atomic<bool> done{false};
  std::atomic<long> peak{idle};
  std::thread sampler([&] {
    while (!done) {
      peak = std::max(peak.load(), rss_kib(pid));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  const int fd = connect_local(port);
  const std::string head =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n";
  std::string chunk(1 << 20, 'a');
  chunk = "100000\r\n" + chunk + "\r\n";  // 1 MiB per chunk
  bool ok = fd >= 0 && send_all(fd, head.data(), head.size());
  int sent = 0;
  for (; ok && sent < megabytes; ++sent) ok = send_all(fd, chunk.data(), chunk.size());
  const int status = fd >= 0 ? read_status(fd, 5000) : 0;
  if (fd >= 0) ::close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  done = true;
  sampler.join();
  const long after = rss_kib(pid);
  std::printf(
      "chunked body: offered %d MiB, server took %d MiB before closing, status %d; RSS idle %.1f MiB, "
      "peak %.1f MiB (%.2fx idle), after %.1f MiB; limit 2x idle + 1 MiB = %.1f MiB: %s\n",
      megabytes, sent, status, idle / 1024.0, peak / 1024.0, static_cast<double>(peak) / idle, after / 1024.0,
      (2 * idle + 1024) / 1024.0, peak < 2 * idle + 1024 ? "ok" : "EXCEEDED");
}

void slow_clients(int port, int n, int seconds) {
  std::atomic<bool> stop{false};
  std::atomic<long> reconnects{0};
  std::thread attacker([&] {
    std::vector<int> fds(static_cast<size_t>(n), -1);
    const std::string request = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    std::vector<size_t> pos(static_cast<size_t>(n), 0);
    while (!stop) {
      for (size_t i = 0; i < fds.size(); ++i) {
        if (fds[i] < 0) {
          fds[i] = connect_local(port);
          pos[i] = 0;
          ++reconnects;
        }
        const char c = pos[i] < request.size() ? request[pos[i]] : 'a';
        if (fds[i] >= 0 && ::send(fds[i], &c, 1, MSG_NOSIGNAL) != 1) {
          ::close(fds[i]);
          fds[i] = -1;
        }
        ++pos[i];
      }
      for (int t = 0; t < 10 && !stop; ++t) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (int fd : fds) {
      if (fd >= 0) ::close(fd);
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));  // every slow client is connected
  std::vector<double> ms;
  int failures = 0;
  const auto end = Clock::now() + std::chrono::seconds(seconds);
  const std::string get = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    const int fd = connect_local(port);
    const int status = fd >= 0 && send_all(fd, get.data(), get.size()) ? read_status(fd, 5000) : 0;
    if (fd >= 0) ::close(fd);
    if (status == 200) {
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    } else {
      ++failures;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop = true;
  attacker.join();
  std::printf(
      "slow clients: %d connections sending 1 header byte/s (%ld connects over the run), %zu GET /health "
      "in %d s: p50 %.2f ms, p99 %.2f ms, max %.2f ms, failures %d\n",
      n, reconnects.load(), ms.size(), seconds, percentile(ms, 0.5), percentile(ms, 0.99), percentile(ms, 1.0),
      failures);
}

void slow_shutdown(int port, int pid) {
  const int fd = connect_local(port);
  const std::string head = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
  if (fd >= 0) send_all(fd, head.data(), 10);  // a slow client in the middle of its header
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto t0 = Clock::now();
  ::kill(pid, SIGTERM);
  size_t i = 10;
  while (alive(pid) && Clock::now() - t0 < std::chrono::seconds(120)) {
    if (fd >= 0 && i < head.size()) ::send(fd, &head[i++], 1, MSG_NOSIGNAL);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (fd >= 0) ::close(fd);
  std::printf("shutdown with a slow client connected: the server exited %.2f s after SIGTERM\n",
              std::chrono::duration<double>(Clock::now() - t0).count());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("specd-hostile-bench: how `specd serve` holds up against hostile clients");
  int port = 0, pid = 0, chunked_mb = 0, slow = 0, seconds = 15;
  bool shutdown = false;
  app.add_option("--port", port, "server port on 127.0.0.1")->required();
  app.add_option("--pid", pid, "server process id (RSS, SIGTERM)")->required();
  app.add_option("--chunked-mb", chunked_mb, "send a chunked body of this many MiB");
  app.add_option("--slow-clients", slow, "number of slow clients");
  app.add_option("--seconds", seconds, "how long to time /health under slow clients");
  app.add_flag("--slow-shutdown", shutdown, "SIGTERM with a slow client connected; time to exit");
  CLI11_PARSE(app, argc, argv);
  if (chunked_mb > 0) chunked_body(port, pid, chunked_mb);
  if (slow > 0) slow_clients(port, slow, seconds);
  if (shutdown) slow_shutdown(port, pid);
  return 0;
}

// specd-loadgen --url http://127.0.0.1:8000 --concurrency N --requests M --max-tokens T [--stream]
// Closed-loop load on POST /v1/completions: N workers each send their next request when the
// previous one is done, until M requests have been sent. Prompts differ per request; decoding is
// greedy with ignore_eos so every request generates exactly T tokens. Reports requests/s,
// output tokens/s and TTFT / TPOT / latency percentiles (TTFT and TPOT need --stream: the first
// SSE event marks the first token; TPOT = (end - first token) / (tokens - 1)).
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Sample {
  bool ok = false;
  double latency_s = 0;
  double ttft_s = -1;
  double tpot_s = -1;
  int tokens = 0;
};

int connect_to(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  return fd;
}

Sample run_one(const std::string& host, const std::string& port, const std::string& api_key, const json& body,
               bool stream) {
  Sample s;
  const auto t0 = Clock::now();
  const int fd = connect_to(host, port);
  if (fd < 0) return s;
  const std::string payload = body.dump();
  std::string req = "POST /v1/completions HTTP/1.1\r\nHost: " + host +
                    "\r\nConnection: close\r\n"
                    "Content-Type: application/json\r\nContent-Length: " +
                    std::to_string(payload.size()) + "\r\n";
  if (!api_key.empty()) req += "Authorization: Bearer " + api_key + "\r\n";
  req += "\r\n" + payload;
  for (size_t off = 0; off < req.size();) {
    const ssize_t n = ::send(fd, req.data() + off, req.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      ::close(fd);
      return s;
    }
    off += static_cast<size_t>(n);
  }
  std::string raw;
  std::optional<Clock::time_point> first;
  char buf[16384];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 600000) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
    if (stream && !first) {
      // The first event after the (empty) role/prefix carries the first token's text.
      const size_t body_at = raw.find("\r\n\r\n");
      if (body_at != std::string::npos && raw.find("\"text\":\"", body_at) != std::string::npos) first = Clock::now();
    }
  }
  ::close(fd);
  const auto t1 = Clock::now();
  if (raw.compare(0, 12, "HTTP/1.1 200") != 0) return s;
  s.latency_s = std::chrono::duration<double>(t1 - t0).count();
  static const std::regex kTokens("\"completion_tokens\":([0-9]+)");
  std::smatch m;
  if (std::regex_search(raw, m, kTokens)) s.tokens = std::stoi(m[1]);
  s.ok = s.tokens > 0;
  if (stream && first) {
    s.ttft_s = std::chrono::duration<double>(*first - t0).count();
    if (s.tokens > 1) s.tpot_s = std::chrono::duration<double>(t1 - *first).count() / (s.tokens - 1);
  }
  return s;
}

double percentile(std::vector<double> v, double q) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return x < 0; }), v.end());
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"specd-loadgen: closed-loop load on an OpenAI-compatible /v1/completions endpoint"};
  std::string url = "http://127.0.0.1:8000";
  std::string model;
  std::string api_key;
  int concurrency = 1;
  int requests = 32;
  int max_tokens = 64;
  bool stream = false;
  app.add_option("--url", url, "server base URL (http only)");
  app.add_option("--model", model, "model id as the server names it (GET /v1/models)")->required();
  app.add_option("--api-key", api_key, "sent as Authorization: Bearer");
  app.add_option("--concurrency", concurrency, "concurrent workers")->check(CLI::Range(1, 1024));
  app.add_option("--requests", requests, "requests in total")->check(CLI::Range(1, 1000000));
  app.add_option("--max-tokens", max_tokens, "tokens generated per request")->check(CLI::Range(1, 1000000));
  app.add_flag("--stream", stream, "stream responses (needed for TTFT / TPOT)");
  CLI11_PARSE(app, argc, argv);

  static const std::regex kUrl("http://([^:/]+)(?::([0-9]+))?/?");
  std::smatch m;
  if (!std::regex_match(url, m, kUrl)) {
    std::fprintf(stderr, "specd-loadgen: --url must look like http://HOST[:PORT], got %s\n", url.c_str());
    return 2;
  }
  const std::string host = m[1];
  const std::string port = m[2].matched ? std::string(m[2]) : "80";

  std::atomic<int> next{0};
  std::mutex mu;
  std::vector<Sample> samples;
  const auto t0 = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&] {
      for (int i = next++; i < requests; i = next++) {
        json body = {{"model", model},
                     {"prompt", "Load test request " + std::to_string(i) + ": once upon a time"},
                     {"max_tokens", max_tokens},
                     {"temperature", 0},
                     {"ignore_eos", true}};
        if (stream) {
          body["stream"] = true;
          body["stream_options"] = {{"include_usage", true}};
        }
        Sample s = run_one(host, port, api_key, body, stream);
        std::lock_guard lock(mu);
        samples.push_back(s);
      }
    });
  }
  for (auto& t : workers) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();

  std::vector<double> ttft, tpot, lat;
  long tokens = 0;
  int ok = 0;
  for (const Sample& s : samples) {
    if (!s.ok) continue;
    ++ok;
    tokens += s.tokens;
    ttft.push_back(s.ttft_s);
    tpot.push_back(s.tpot_s);
    lat.push_back(s.latency_s);
  }
  auto ms = [](double s) { return s < 0 ? std::string("-") : std::to_string(s * 1000.0).substr(0, 7); };
  std::printf("concurrency %d, requests %d (%d ok, %d failed), max_tokens %d, %s\n", concurrency, requests, ok,
              requests - ok, max_tokens, stream ? "streaming" : "non-streaming");
  std::printf("wall %.2f s, %.2f requests/s, %.1f output tokens/s\n", wall, ok / wall,
              static_cast<double>(tokens) / wall);
  std::printf("%-12s %10s %10s %10s\n", "ms", "p50", "p90", "p99");
  std::printf("%-12s %10s %10s %10s\n", "TTFT", ms(percentile(ttft, 0.5)).c_str(), ms(percentile(ttft, 0.9)).c_str(),
              ms(percentile(ttft, 0.99)).c_str());
  std::printf("%-12s %10s %10s %10s\n", "TPOT", ms(percentile(tpot, 0.5)).c_str(), ms(percentile(tpot, 0.9)).c_str(),
              ms(percentile(tpot, 0.99)).c_str());
  std::printf("%-12s %10s %10s %10s\n", "latency", ms(percentile(lat, 0.5)).c_str(), ms(percentile(lat, 0.9)).c_str(),
              ms(percentile(lat, 0.99)).c_str());
  return ok == requests ? 0 : 1;
}

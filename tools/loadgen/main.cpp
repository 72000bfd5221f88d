// specd-loadgen --url http://127.0.0.1:8000 --model NAME --concurrency N --requests M
//               --max-tokens T [--stream] [--workload plain|agent|edit [--turns K] [--prompt-chars C]]
// Closed-loop load on POST /v1/completions: N workers each send their next request when the
// previous one is done, until M requests have been sent. Decoding is greedy with ignore_eos, so
// every request generates exactly T tokens. The workload decides the prompts (workloads.hpp):
// `plain` prompts share nothing; `agent` runs sessions whose turns quote earlier outputs and tool
// results; `edit` asks for files rewritten with a function renamed. Reports requests/s, output
// tokens/s, TTFT / TPOT / latency percentiles (TTFT and TPOT need --stream: the first SSE event
// marks the first token; TPOT = (end - first token) / (tokens - 1)) and, when the server
// speculates, the acceptance over the run from /metrics before and after.
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "workloads.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Sample {
  bool ok = false;
  double latency_s = 0;
  double ttft_s = -1;
  double tpot_s = -1;
  int tokens = 0;
  std::string text;  // the completion's text
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

// Sends `request` and returns the raw response (status line, headers, body); "" on failure.
// `first`: set when the first streamed token arrives.
std::string exchange(const std::string& host, const std::string& port, const std::string& request, bool stream,
                     std::optional<Clock::time_point>* first) {
  const int fd = connect_to(host, port);
  if (fd < 0) return {};
  for (size_t off = 0; off < request.size();) {
    const ssize_t n = ::send(fd, request.data() + off, request.size() - off, MSG_NOSIGNAL);
    if (n <= 0) {
      ::close(fd);
      return {};
    }
    off += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[16384];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 600000) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
    if (stream && first != nullptr && !*first) {
      // The first event after the (empty) role/prefix carries the first token's text.
      const size_t body_at = raw.find("\r\n\r\n");
      if (body_at != std::string::npos && raw.find("\"text\":\"", body_at) != std::string::npos) *first = Clock::now();
    }
  }
  ::close(fd);
  return raw;
}

// The body of a raw response, de-chunked when the server sent it chunked.
std::string body_of(const std::string& raw) {
  const size_t at = raw.find("\r\n\r\n");
  if (at == std::string::npos) return {};
  std::string headers = raw.substr(0, at);
  std::transform(headers.begin(), headers.end(), headers.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string body = raw.substr(at + 4);
  if (headers.find("transfer-encoding: chunked") == std::string::npos) return body;
  std::string out;
  for (size_t pos = 0; pos < body.size();) {
    const size_t eol = body.find("\r\n", pos);
    if (eol == std::string::npos) break;
    const size_t n = std::strtoul(body.substr(pos, eol - pos).c_str(), nullptr, 16);
    if (n == 0 || eol + 2 + n > body.size()) break;
    out.append(body, eol + 2, n);
    pos = eol + 2 + n + 2;
  }
  return out;
}

// The completion's text: choices[0].text of the response, or of every streamed event.
std::string completion_text(const std::string& body, bool stream) {
  auto text_of = [](const json& j) -> std::string {
    if (!j.contains("choices") || j["choices"].empty() || !j["choices"][0].contains("text")) return {};
    const json& t = j["choices"][0]["text"];
    return t.is_string() ? t.get<std::string>() : std::string();
  };
  if (!stream) {
    const json j = json::parse(body, nullptr, false);
    return j.is_discarded() ? std::string() : text_of(j);
  }
  std::string out;
  for (size_t pos = 0; pos < body.size();) {
    size_t eol = body.find('\n', pos);
    if (eol == std::string::npos) eol = body.size();
    const std::string line = body.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.rfind("data: ", 0) != 0 || line == "data: [DONE]") continue;
    const json j = json::parse(line.substr(6), nullptr, false);
    if (!j.is_discarded()) out += text_of(j);
  }
  return out;
}

Sample run_one(const std::string& host, const std::string& port, const std::string& api_key, const json& body,
               bool stream) {
  Sample s;
  const auto t0 = Clock::now();
  const std::string payload = body.dump();
  std::string req = "POST /v1/completions HTTP/1.1\r\nHost: " + host +
                    "\r\nConnection: close\r\n"
                    "Content-Type: application/json\r\nContent-Length: " +
                    std::to_string(payload.size()) + "\r\n";
  if (!api_key.empty()) req += "Authorization: Bearer " + api_key + "\r\n";
  req += "\r\n" + payload;
  std::optional<Clock::time_point> first;
  const std::string raw = exchange(host, port, req, stream, &first);
  const auto t1 = Clock::now();
  if (raw.compare(0, 12, "HTTP/1.1 200") != 0) return s;
  s.latency_s = std::chrono::duration<double>(t1 - t0).count();
  static const std::regex kTokens("\"completion_tokens\":([0-9]+)");
  std::smatch m;
  if (std::regex_search(raw, m, kTokens)) s.tokens = std::stoi(m[1]);
  s.ok = s.tokens > 0;
  s.text = completion_text(body_of(raw), stream);
  if (stream && first) {
    s.ttft_s = std::chrono::duration<double>(*first - t0).count();
    if (s.tokens > 1) s.tpot_s = std::chrono::duration<double>(t1 - *first).count() / (s.tokens - 1);
  }
  return s;
}

// The speculative counters on /metrics (summed over their labels); all 0 without speculation.
struct SpecCounters {
  double drafts = 0, draft_tokens = 0, accepted = 0;
};

SpecCounters spec_counters(const std::string& host, const std::string& port, const std::string& api_key) {
  std::string req = "GET /metrics HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n";
  if (!api_key.empty()) req += "Authorization: Bearer " + api_key + "\r\n";
  const std::string body = body_of(exchange(host, port, req + "\r\n", false, nullptr));
  SpecCounters c;
  const std::pair<const char*, double*> wanted[] = {{"specd_spec_drafts_total{", &c.drafts},
                                                    {"specd_spec_draft_tokens_total{", &c.draft_tokens},
                                                    {"specd_spec_accepted_tokens_total{", &c.accepted}};
  for (size_t pos = 0; pos < body.size();) {
    size_t eol = body.find('\n', pos);
    if (eol == std::string::npos) eol = body.size();
    const std::string line = body.substr(pos, eol - pos);
    pos = eol + 1;
    for (const auto& [prefix, into] : wanted)
      if (line.rfind(prefix, 0) == 0) *into += std::strtod(line.substr(line.rfind(' ') + 1).c_str(), nullptr);
  }
  return c;
}

double percentile(std::vector<double> v, double q) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return x < 0; }), v.end());
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace

// Prints throughput and TTFT / TPOT / latency percentiles of the samples; returns how many succeeded.
int print_latencies(const std::vector<Sample>& samples, double wall) {
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
  std::printf("wall %.2f s, %.2f requests/s, %.1f output tokens/s\n", wall, ok / wall,
              static_cast<double>(tokens) / wall);
  std::printf("%-12s %10s %10s %10s\n", "ms", "p50", "p90", "p99");
  std::printf("%-12s %10s %10s %10s\n", "TTFT", ms(percentile(ttft, 0.5)).c_str(), ms(percentile(ttft, 0.9)).c_str(),
              ms(percentile(ttft, 0.99)).c_str());
  std::printf("%-12s %10s %10s %10s\n", "TPOT", ms(percentile(tpot, 0.5)).c_str(), ms(percentile(tpot, 0.9)).c_str(),
              ms(percentile(tpot, 0.99)).c_str());
  std::printf("%-12s %10s %10s %10s\n", "latency", ms(percentile(lat, 0.5)).c_str(), ms(percentile(lat, 0.9)).c_str(),
              ms(percentile(lat, 0.99)).c_str());
  return ok;
}

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
  std::string workload_name = "plain";
  int turns = 4;
  int prompt_chars = 1200;
  app.add_option("--workload", workload_name, "plain | agent | edit (see workloads.hpp)");
  app.add_option("--turns", turns, "agent: turns per session")->check(CLI::Range(1, 1000));
  app.add_option("--prompt-chars", prompt_chars, "agent, edit: prompt length in characters at most")
      ->check(CLI::Range(100, 1000000));
  CLI11_PARSE(app, argc, argv);
  specd::loadgen::Workload workload{};
  if (!specd::loadgen::parse_workload(workload_name, &workload)) {
    std::fprintf(stderr, "specd-loadgen: --workload must be plain, agent or edit, got %s\n", workload_name.c_str());
    return 2;
  }

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
  const SpecCounters before = spec_counters(host, port, api_key);
  const auto t0 = Clock::now();
  std::vector<std::thread> workers;
  for (int w = 0; w < concurrency; ++w) {
    workers.emplace_back([&, w] {
      specd::loadgen::PromptSource prompts(workload, w, turns, static_cast<size_t>(prompt_chars));
      std::string last_output;
      for (int i = next++; i < requests; i = next++) {
        const std::string prompt = prompts.next(i, last_output);
        json body = {
            {"model", model}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}};
        if (stream) {
          body["stream"] = true;
          body["stream_options"] = {{"include_usage", true}};
        }
        Sample s = run_one(host, port, api_key, body, stream);
        last_output = s.text;
        std::lock_guard lock(mu);
        samples.push_back(std::move(s));
      }
    });
  }
  for (auto& t : workers) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();

  const int ok = static_cast<int>(std::count_if(samples.begin(), samples.end(), [](const Sample& x) { return x.ok; }));
  std::printf("workload %s, concurrency %d, requests %d (%d ok, %d failed), max_tokens %d, %s\n", workload_name.c_str(),
              concurrency, requests, ok, requests - ok, max_tokens, stream ? "streaming" : "non-streaming");
  print_latencies(samples, wall);
  const SpecCounters after = spec_counters(host, port, api_key);
  const double drafts = after.drafts - before.drafts, drafted = after.draft_tokens - before.draft_tokens;
  const double accepted = after.accepted - before.accepted;
  if (drafted > 0) {
    std::printf(
        "speculation: acceptance %.3f (%.0f of %.0f draft tokens), mean accepted length %.2f over %.0f drafts\n",
        accepted / drafted, accepted, drafted, 1.0 + accepted / drafts, drafts);
  } else {
    std::printf("speculation: no drafts\n");
  }
  return ok == requests ? 0 : 1;
}

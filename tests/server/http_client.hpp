// A minimal blocking HTTP/1.1 client over loopback for the server tests: one request per
// connection (Connection: close), Content-Length and chunked bodies, a receive timeout on every
// read so that no test can hang.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace specd::test {

struct HttpResponse {
  int status = 0;                              // 0: no response (connection failed or timed out)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
};

class HttpConnection {
 public:
  explicit HttpConnection(int port, int timeout_ms = 60000) : timeout_ms_(timeout_ms) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) close();
  }
  ~HttpConnection() { close(); }
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool send_all(const std::string& data) {
    size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  bool send_request(const std::string& method, const std::string& path, const std::string& body,
                    const std::vector<std::string>& extra_headers = {}) {
    std::string req = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    for (const auto& h : extra_headers) req += h + "\r\n";
    if (method == "POST")
      req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    req += "\r\n" + body;
    return send_all(req);
  }

  // Reads raw bytes; "" at EOF or after the timeout.
  std::string read_some() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms_) <= 0) return "";
    char buf[8192];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }

  // Reads the whole response (the server closes the connection after it).
  HttpResponse read_response(const std::function<void(const std::string&)>& on_bytes = nullptr) {
    std::string raw;
    for (std::string chunk = read_some(); !chunk.empty(); chunk = read_some()) {
      raw += chunk;
      if (on_bytes) on_bytes(raw);
    }
    return parse(raw);
  }

  static HttpResponse parse(const std::string& raw) {
    HttpResponse r;
    const size_t head_end = raw.find("\r\n\r\n");
    if (raw.compare(0, 9, "HTTP/1.1 ") != 0 || head_end == std::string::npos) return r;
    r.status = std::stoi(raw.substr(9, 3));
    size_t pos = raw.find("\r\n") + 2;
    while (pos < head_end) {
      const size_t eol = raw.find("\r\n", pos);
      const std::string line = raw.substr(pos, eol - pos);
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        size_t v = colon + 1;
        while (v < line.size() && line[v] == ' ') ++v;
        r.headers[name] = line.substr(v);
      }
      pos = eol + 2;
    }
    std::string body = raw.substr(head_end + 4);
    if (r.headers["transfer-encoding"] == "chunked") {
      std::string out;
      size_t p = 0;
      while (p < body.size()) {
        const size_t eol = body.find("\r\n", p);
        if (eol == std::string::npos) break;
        const size_t len = std::stoul(body.substr(p, eol - p), nullptr, 16);
        if (len == 0) break;
        out += body.substr(eol + 2, len);
        p = eol + 2 + len + 2;
      }
      body = out;
    }
    r.body = body;
    return r;
  }

 private:
  int fd_ = -1;
  int timeout_ms_;
};

inline HttpResponse http_call(int port, const std::string& method, const std::string& path,
                              const std::string& body = "", const std::vector<std::string>& headers = {}) {
  HttpConnection c(port);
  if (!c.ok() || !c.send_request(method, path, body, headers)) return {};
  return c.read_response();
}

// The `data:` payloads of an SSE body, in order.
inline std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    if (end == std::string::npos) break;
    pos = end + 2;
  }
  return out;
}

}  // namespace specd::test

// Runs the real `specd serve` binary as a child process on 127.0.0.1 with an ephemeral port:
// reads the port from its "listening on http://127.0.0.1:PORT" line, waits for /health 200,
// keeps draining its stderr, and stops it with SIGTERM (SIGKILL after a bound) at the end.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "http_client.hpp"

namespace specd::test {

class ServerProcess {
 public:
  // env: extra NAME=VALUE entries for the child. launcher: a command the server runs under
  // (e.g. {"mpirun", "-np", "2"}); pid() is then the launcher's.
  ServerProcess(const std::string& config_file, std::vector<std::string> env = {},
                std::vector<std::string> launcher = {}) {
    std::vector<std::string> args = std::move(launcher);
    for (const char* a : {SPECD_CLI_PATH, "serve", "--config", config_file.c_str(), "--port", "0"})
      args.emplace_back(a);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      // Never outlive the test (a crashed test must not leave a server holding ctest's pipes).
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int devnull = ::open("/dev/null", O_WRONLY);
      if (devnull >= 0) ::dup2(devnull, STDOUT_FILENO);
      ::dup2(fds[1], STDERR_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      for (auto& e : env) ::putenv(e.data());
      ::execvp(argv[0], argv.data());
      std::_Exit(127);
    }
    ::close(fds[1]);
    fd_ = fds[0];
    // Read until the listening line (30 s at most).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    static const std::regex kListening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    while (port_ <= 0 && std::chrono::steady_clock::now() < deadline) {
      std::string chunk = read_stderr(500);
      std::smatch m;
      std::lock_guard lock(mu_);
      if (std::regex_search(log_, m, kListening)) port_ = std::stoi(m[1]);
      if (chunk.empty() && exited()) break;
    }
    reader_ = std::thread([this] {
      while (!stop_reader_) {
        if (read_stderr(100).empty() && exited()) break;
      }
    });
    if (port_ > 0) {
      for (int i = 0; i < 300; ++i) {
        if (http_call(port_, "GET", "/health").status == 200) {
          ready_ = true;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  }

  ~ServerProcess() {
    if (pid_ > 0 && !exited()) stop(std::chrono::seconds(5));
    stop_reader_ = true;
    if (reader_.joinable()) reader_.join();
    if (fd_ >= 0) ::close(fd_);
  }

  bool ready() const { return ready_; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string log() const {
    std::lock_guard lock(mu_);
    return log_;
  }

  void signal(int sig) { ::kill(pid_, sig); }

  // SIGTERM, then waits; SIGKILL after `grace`. Returns the exit status (or -signal).
  int stop(std::chrono::seconds grace) {
    if (exited()) return *exit_status_;
    ::kill(pid_, SIGTERM);
    return wait(grace);
  }

  int wait(std::chrono::seconds grace) {
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (!exited() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!exited()) {
      ::kill(pid_, SIGKILL);
      std::lock_guard lock(wait_mu_);
      int st = 0;
      ::waitpid(pid_, &st, 0);
      exit_status_ = -SIGKILL;
    }
    return *exit_status_;
  }

 private:
  bool exited() {
    std::lock_guard lock(wait_mu_);
    if (exit_status_) return true;
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      exit_status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
      return true;
    }
    return false;
  }

  std::string read_stderr(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return "";
    char buf[4096];
    const ssize_t n = ::read(fd_, buf, sizeof(buf));
    if (n <= 0) return "";
    std::string s(buf, static_cast<size_t>(n));
    std::lock_guard lock(mu_);
    log_ += s;
    return s;
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  int port_ = -1;
  bool ready_ = false;
  mutable std::mutex mu_;
  std::string log_;
  std::mutex wait_mu_;
  std::optional<int> exit_status_;
  std::atomic<bool> stop_reader_{false};
  std::thread reader_;
};

}  // namespace specd::test

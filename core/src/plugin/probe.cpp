#include "plugin/probe.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace specd::plugin {
namespace {

// The child's exit statuses for "the attempt came back".
constexpr int kLoaded = 0;
constexpr int kRefused = 3;

}  // namespace

std::string probe_in_child(const std::function<bool()>& attempt, std::chrono::milliseconds timeout) {
  const pid_t pid = ::fork();
  if (pid < 0) return "";  // cannot fork: load in this process, as without probing
  if (pid == 0) {
    bool ok = false;
    try {
      ok = attempt();
    } catch (...) {
      ok = false;
    }
    ::_exit(ok ? kLoaded : kRefused);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return "";
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return "did not finish loading within " + std::to_string(timeout.count() / 1000) + " s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "crashed the loader (signal " + std::to_string(sig) + ", " + ::strsignal(sig) + ")";
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != kLoaded && WEXITSTATUS(status) != kRefused)
    return "stopped the loader (exit status " + std::to_string(WEXITSTATUS(status)) +
           "; the dynamic loader prints why, e.g. \"Inconsistency detected by ld.so\")";
  return "";
}

bool probing_enabled() {
  const char* probe = std::getenv("SPECD_PLUGIN_PROBE");
  if (probe != nullptr && std::strcmp(probe, "0") == 0) return false;
  return std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr && std::getenv("PMI_SIZE") == nullptr;
}

}  // namespace specd::plugin

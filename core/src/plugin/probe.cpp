#include "plugin/probe.hpp"

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace specd::plugin {

std::string probe_load(const std::filesystem::path& file, std::chrono::milliseconds timeout) {
  const std::string path = file.string();
  const pid_t pid = ::fork();
  if (pid < 0) return "";  // cannot fork: load in this process, as without probing
  if (pid == 0) {
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ::_exit(handle != nullptr ? 0 : 3);
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
  return "";
}

bool probing_enabled() {
  const char* probe = std::getenv("SPECD_PLUGIN_PROBE");
  if (probe != nullptr && std::strcmp(probe, "0") == 0) return false;
  return std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr && std::getenv("PMI_SIZE") == nullptr;
}

}  // namespace specd::plugin

#include "plugin/probe.hpp"

#include <link.h>
#include <signal.h>
#include <sys/stat.h>
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

void run_exit_destructors_left_by(const std::filesystem::path& file) {
  struct stat want {};
  if (::stat(file.c_str(), &want) != 0) return;
  struct Found {
    dev_t dev;
    ino_t ino;
    const ElfW(Phdr) * phdr = nullptr;
    int phnum = 0;
    ElfW(Addr) base = 0;
  } found{want.st_dev, want.st_ino};
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto& f = *static_cast<Found*>(data);
        struct stat st {};
        if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0' || ::stat(info->dlpi_name, &st) != 0) return 0;
        if (st.st_dev != f.dev || st.st_ino != f.ino) return 0;
        f.phdr = info->dlpi_phdr;
        f.phnum = info->dlpi_phnum;
        f.base = info->dlpi_addr;
        return 1;
      },
      &found);
  if (found.phdr == nullptr) return;  // unloaded: its destructors ran in dlclose
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < found.phnum; ++i)
    if (found.phdr[i].p_type == PT_DYNAMIC)
      dyn = reinterpret_cast<const ElfW(Dyn)*>(found.base + found.phdr[i].p_vaddr);
  if (dyn == nullptr) return;
  ElfW(Addr) array = 0, fini = 0;
  size_t array_bytes = 0;
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_FINI_ARRAY) array = d->d_un.d_ptr;
    if (d->d_tag == DT_FINI_ARRAYSZ) array_bytes = d->d_un.d_val;
    if (d->d_tag == DT_FINI) fini = d->d_un.d_ptr;
  }
  using Fn = void (*)();
  if (array != 0) {  // last to first, as the loader runs them
    auto* fns = reinterpret_cast<Fn*>(found.base + array);
    for (size_t i = array_bytes / sizeof(Fn); i-- > 0;) fns[i]();
  }
  if (fini != 0) reinterpret_cast<Fn>(found.base + fini)();
}

bool probing_enabled() {
  const char* probe = std::getenv("SPECD_PLUGIN_PROBE");
  if (probe != nullptr && std::strcmp(probe, "0") == 0) return false;
  return std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr && std::getenv("PMI_SIZE") == nullptr;
}

}  // namespace specd::plugin

#include "plugin/probe.hpp"

#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

extern char** environ;

namespace specd::plugin {
namespace {

// The child's exit statuses for "the attempt came back".
constexpr int kLoaded = 0;
constexpr int kRefused = 3;

// Waits for the probing child `pid`: "" when it came back (exit status kLoaded or kRefused), else
// why not.
std::string wait_for_probe(pid_t pid, std::chrono::milliseconds timeout) {
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
  return wait_for_probe(pid, timeout);
}

std::filesystem::path probe_helper() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  std::filesystem::path helper = self.parent_path() / "specd-plugin-probe";
  if (::access(helper.c_str(), X_OK) != 0 || self == helper) return {};
  return helper;
}

std::optional<std::string> probe_in_fresh_process(const std::filesystem::path& file,
                                                  std::chrono::milliseconds timeout) {
  static std::mutex mu;
  static std::map<std::tuple<std::string, uintmax_t, int64_t>, std::string> done;
  static const std::filesystem::path helper = probe_helper();
  if (helper.empty()) return std::nullopt;
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(file, ec);
  const auto mtime = std::filesystem::last_write_time(file, ec).time_since_epoch().count();
  const auto key = std::make_tuple(file.string(), size, static_cast<int64_t>(mtime));
  const std::lock_guard<std::mutex> lock(mu);
  if (const auto it = done.find(key); it != done.end()) return it->second;
  // The helper's environment: this one's, with probing off (it must not probe in turn).
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "SPECD_PLUGIN_PROBE=", 19) != 0) env_strings.emplace_back(*e);
  env_strings.emplace_back("SPECD_PLUGIN_PROBE=0");
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string helper_arg = helper.string(), file_arg = file.string();
  char* argv[] = {helper_arg.data(), file_arg.data(), nullptr};
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, helper.c_str(), &actions, nullptr, argv, envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return "";  // cannot start it: load without the probe, as when fork fails
  std::string verdict = wait_for_probe(pid, timeout);
  done.emplace(key, verdict);
  return verdict;
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

// Logging facade over spdlog. spdlog itself stays out of this header so that hot include
// paths only pay for fmt's format-string checking.
//
//   auto& log = specd::log::get("kv");
//   log.debug("freed {} blocks of sequence {}", n, seq);
//
// Named loggers: engine, sched, kv, spec, server, plugin.<name>. The level comes from YAML
// (`logging.level`) or SPECD_LOG_LEVEL; the environment wins so that a run can be made more
// verbose without editing its config.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string>
#include <string_view>
#include <utility>

namespace specd::log {

enum class Level { kTrace = 0, kDebug, kInfo, kWarn, kError, kCritical, kOff };

// Parses "trace|debug|info|warn|warning|error|critical|off"; throws specd::Error otherwise.
Level parse_level(std::string_view text);
std::string_view level_name(Level level) noexcept;

// Sets the level of every existing and future logger.
void set_level(Level level);
Level level() noexcept;
// Applies SPECD_LOG_LEVEL when it is set; returns true if it was.
bool apply_env_level();
// Puts "[tag]" in front of every logger's name in the output of existing and future loggers
// (an MPI job's ranks tag their lines "rank N").
void set_tag(const std::string& tag);
// All output goes to stderr; stdout is kept for command results.

class Logger {
 public:
  explicit Logger(std::string name);
  const std::string& name() const noexcept { return name_; }
  bool should_log(Level lvl) const noexcept;
  void write(Level lvl, std::string_view message) const;

  template <class... Args>
  void log(Level lvl, fmt::format_string<Args...> f, Args&&... args) const {
    if (should_log(lvl)) write(lvl, fmt::format(f, std::forward<Args>(args)...));
  }
  template <class... Args>
  void trace(fmt::format_string<Args...> f, Args&&... a) const {
    log(Level::kTrace, f, std::forward<Args>(a)...);
  }
  template <class... Args>
  void debug(fmt::format_string<Args...> f, Args&&... a) const {
    log(Level::kDebug, f, std::forward<Args>(a)...);
  }
  template <class... Args>
  void info(fmt::format_string<Args...> f, Args&&... a) const {
    log(Level::kInfo, f, std::forward<Args>(a)...);
  }
  template <class... Args>
  void warn(fmt::format_string<Args...> f, Args&&... a) const {
    log(Level::kWarn, f, std::forward<Args>(a)...);
  }
  template <class... Args>
  void error(fmt::format_string<Args...> f, Args&&... a) const {
    log(Level::kError, f, std::forward<Args>(a)...);
  }

 private:
  std::string name_;
  void* impl_;  // spdlog::logger*, owned by spdlog's registry
};

// Receives every record that passes the level, in addition to the stderr sink (tests use it
// to check routing; the server may use it to expose recent errors). nullptr removes it.
using Observer = std::function<void(const std::string& logger, Level level, std::string_view message)>;
void set_observer(Observer observer);

// Returns the named logger, creating it on first use. Thread-safe; the reference stays valid
// for the life of the process.
Logger& get(const std::string& name);

}  // namespace specd::log

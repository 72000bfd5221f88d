#include "specd/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "specd/error.hpp"

namespace specd::log {
namespace {

std::atomic<Level> g_level{Level::kInfo};
std::atomic<bool> g_has_observer{false};
std::mutex g_observer_mu;
Observer g_observer;

spdlog::level::level_enum to_spd(Level l) {
  return static_cast<spdlog::level::level_enum>(static_cast<int>(l));
}

struct Registry {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<Logger>> loggers;
  std::string pattern = "[%Y-%m-%d %H:%M:%S.%e] [%n] [%l] %v";
  std::shared_ptr<spdlog::sinks::stderr_color_sink_mt> sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
};

Registry& registry() {
  static Registry* r = new Registry();  // leaked on purpose: loggers outlive static dtors
  return *r;
}

}  // namespace

Level parse_level(std::string_view text) {
  if (text == "trace") return Level::kTrace;
  if (text == "debug") return Level::kDebug;
  if (text == "info") return Level::kInfo;
  if (text == "warn" || text == "warning") return Level::kWarn;
  if (text == "error") return Level::kError;
  if (text == "critical") return Level::kCritical;
  if (text == "off") return Level::kOff;
  throw Error(ErrorCode::kInvalidArgument, "unknown log level \"" + std::string(text) +
                                               "\" (expected one of trace, debug, info, warn, error, critical, off)");
}

std::string_view level_name(Level level) noexcept {
  switch (level) {
    case Level::kTrace:
      return "trace";
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warn";
    case Level::kError:
      return "error";
    case Level::kCritical:
      return "critical";
    case Level::kOff:
      return "off";
  }
  return "info";
}

// Gating happens on g_level (one relaxed atomic load per call site); the spdlog loggers
// themselves stay at trace so that they never filter a second time.
void set_level(Level level) {
  g_level.store(level);
}

Level level() noexcept {
  return g_level.load();
}

bool apply_env_level() {
  const char* env = std::getenv("SPECD_LOG_LEVEL");
  if (env == nullptr || *env == '\0') return false;
  try {
    set_level(parse_level(env));
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidArgument, std::string("SPECD_LOG_LEVEL: ") + e.what());
  }
  return true;
}

Logger::Logger(std::string name) : name_(std::move(name)), impl_(nullptr) {
  auto& r = registry();
  auto logger = std::make_shared<spdlog::logger>(name_, r.sink);
  logger->set_level(spdlog::level::trace);
  logger->set_pattern(r.pattern);  // get() holds r.mu
  spdlog::register_logger(logger);
  impl_ = logger.get();
}

bool Logger::should_log(Level lvl) const noexcept {
  return static_cast<int>(lvl) >= static_cast<int>(g_level.load(std::memory_order_relaxed)) && lvl != Level::kOff;
}

void Logger::write(Level lvl, std::string_view message) const {
  static_cast<spdlog::logger*>(impl_)->log(to_spd(lvl), "{}", message);
  if (g_has_observer.load(std::memory_order_acquire)) {
    std::lock_guard lock(g_observer_mu);
    if (g_observer) g_observer(name_, lvl, message);
  }
}

void set_tag(const std::string& tag) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  r.pattern = "[%Y-%m-%d %H:%M:%S.%e] [" + tag + "] [%n] [%l] %v";
  for (auto& [name, logger] : r.loggers) spdlog::get(name)->set_pattern(r.pattern);
}

void set_observer(Observer observer) {
  std::lock_guard lock(g_observer_mu);
  g_observer = std::move(observer);
  g_has_observer.store(static_cast<bool>(g_observer), std::memory_order_release);
}

Logger& get(const std::string& name) {
  auto& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.loggers.find(name);
  if (it == r.loggers.end()) it = r.loggers.emplace(name, std::make_unique<Logger>(name)).first;
  return *it->second;
}

}  // namespace specd::log

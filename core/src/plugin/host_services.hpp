// The host services table handed to plugin components (ABI: specd_host_services). One
// HostContext per component instance; it outlives the instance and names its logger
// "plugin.<plugin name>".
#pragma once

#include <string>

#include "specd/sdk/abi.h"

namespace specd::log {
class Logger;
}

namespace specd::plugin {

struct HostContext {
  HostContext(const std::string& plugin_name, const specd_model_services* models);
  HostContext(const HostContext&) = delete;
  HostContext& operator=(const HostContext&) = delete;

  const specd_host_services* services() const { return &services_; }
  log::Logger& logger() const { return *logger_; }

 private:
  specd_host_services services_{};
  log::Logger* logger_;
};

// The CUDA runtime major this host was built with; 0 when built without CUDA.
int host_cuda_runtime_major();

}  // namespace specd::plugin

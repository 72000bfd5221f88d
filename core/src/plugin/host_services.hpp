// The host services table handed to plugin components (ABI: specd_host_services). One
// HostContext per component instance; it outlives the instance and names its logger
// "plugin.<plugin name>". A proposer's context also takes its observations (ABI 1.4 record;
// observations.hpp) and answers allowed_tokens (ABI 1.5) during propose; other components get
// neither service (NULL).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "plugin/observations.hpp"
#include "specd/sdk/abi.h"

namespace specd::log {
class Logger;
}

namespace specd::plugin {

// Model services as a table plus the host object its functions work on. The table's
// functions receive the component's host_ctx (a HostContext*) and reach the object through
// HostContext::model_ctx().
struct ModelBinding {
  const specd_model_services* table = nullptr;
  void* ctx = nullptr;
};

// What the allowed_tokens service (ABI 1.5) asks, for the length of one propose call
// (speculative/propose_grammar.hpp).
class GrammarSource {
 public:
  virtual ~GrammarSource() = default;
  // 1, 0 or -1 as abi.h's allowed_tokens says.
  virtual int32_t allowed_tokens(uint64_t seq_id, std::span<const int32_t> prefix, std::span<uint64_t> mask) const = 0;
};

struct HostContext {
  HostContext(const std::string& plugin_name, ModelBinding models, bool offers_record = false);
  HostContext(const HostContext&) = delete;
  HostContext& operator=(const HostContext&) = delete;

  const specd_host_services* services() const { return &services_; }
  log::Logger& logger() const { return *logger_; }
  const std::string& plugin_name() const { return plugin_name_; }
  // The model host object behind a host_ctx handed to a plugin (nullptr if none).
  static void* model_ctx(void* host_ctx) { return static_cast<HostContext*>(host_ctx)->models_.ctx; }
  const Observations& observations() const { return observations_; }
  Observations& observations() { return observations_; }
  // The grammars of the propose call in progress (null outside one).
  void set_grammar(const GrammarSource* grammar) { grammar_ = grammar; }
  const GrammarSource* grammar() const { return grammar_; }

 private:
  specd_host_services services_{};
  log::Logger* logger_;
  std::string plugin_name_;
  ModelBinding models_;
  Observations observations_;
  const GrammarSource* grammar_ = nullptr;
};

// The CUDA runtime major this host was built with; 0 when built without CUDA.
int host_cuda_runtime_major();

}  // namespace specd::plugin

// The engine configuration: YAML → typed structs with strict validation. Every key is
// documented in docs/configuration.md; defaults here and there must agree.
//
// Errors carry the file, line and YAML path, e.g.
//   configs/x.yaml:12: speculative.num_speculative_tokens: expected integer in [1, 32], got "five"
// and loading reports every error found, not only the first.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plugin/params.hpp"
#include "specd/config.hpp"

namespace specd::config {

struct ModelConfig {
  std::string path;                  // model directory (HF layout); required
  std::string tokenizer;             // tokenizer.json or directory; "" = model path
  std::string dtype = "auto";        // auto | f32 | f16 | bf16 | q8_0 | q4_0 | q4_k | q5_k | q6_k | q4_k_m | q5_k_m
  std::string device = "cpu";        // cpu | cuda | cuda:N
  int64_t max_model_len = 0;         // 0 = the checkpoint's max_position_embeddings
  int32_t num_threads = 0;           // CPU threads for kernels; 0 = all hardware threads
  bool mmap = false;                 // use tensors in place in the file map where possible (docs)
  int32_t seed = 0;                  // default seed for requests that set none
  int32_t tensor_parallel_size = 0;  // ranks the target is split over; 0 = the MPI job's size (1 without mpirun)
  // How sampled tokens are drawn (docs/generation.md): inverse_cdf (one uniform per token) or
  // gumbel (counter-based Gumbel-max, sdk/gumbel.hpp). auto: gumbel when a verifier is `coupled`
  // (it must sample as the engine does), else inverse_cdf. Resolved when the config is read.
  std::string sampler = "auto";
  // model.device cuda: record each forward shape's kernels once as a CUDA graph and replay it
  // (docs/cuda.md "CUDA graphs"); false launches every kernel each step.
  bool cuda_graphs = true;
};

struct ComponentConfig {
  std::string name;       // component name as the plugin registers it
  plugin::Params params;  // the rest of the node, handed to the plugin
  int32_t line = 0;
};

// One A/B arm (docs/ab-testing.md): a verifier, optionally its own k, and a traffic weight.
struct ArmConfig {
  std::string name;  // [A-Za-z0-9_.-], at most 64 characters, unique
  ComponentConfig verifier;
  int32_t num_speculative_tokens = 0;  // k cap of the arm's requests; 0 = speculative.num_speculative_tokens
  double weight = 1.0;                 // share of assigned traffic; 0 = only when asked for by name
};

struct SpeculativeConfig {
  bool enabled = false;                // true when the `speculative` section is present
  int32_t num_speculative_tokens = 4;  // k, in [1, 32]; with dynamic: the largest k
  bool dynamic = true;                 // the policy picks k in [0, k] per sequence and step;
                                       // false: k every step (docs/speculative.md)
  ComponentConfig proposer;
  // speculative.proposer.tensor_parallel_size: ranks the proposer's draft models run on, 1 or
  // the target's; 0 = the target's. Read by the core, not handed to the plugin.
  int32_t proposer_tensor_parallel_size = 0;
  ComponentConfig verifier;           // default: rejection
  ComponentConfig scorer;             // default: mqa (built in); else a scorer plugin
  int32_t disable_by_batch_size = 0;  // 0 = never disable
  // A/B testing (docs/ab-testing.md). Without `arms` the engine has one arm, "default", that
  // serves with `verifier`; `arms` and `verifier` are exclusive.
  std::vector<ArmConfig> arms;
  std::vector<std::string> shadow;  // arms that verify every other arm's drafts (`all` expanded)
  std::string ab_log;               // JSON-lines file, one line per finished request; "" = off
  int64_t ab_log_max_mib = 64;      // the file is rotated when it reaches this size
  int32_t ab_log_keep = 5;          // rotated files kept: FILE.1 (newest) .. FILE.<keep>
};

struct SchedulerConfig {
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 2048;
  bool chunked_prefill = true;
  int32_t max_queue = 1024;  // waiting requests beyond this are refused
  // A model worker thread runs step N while the engine thread processes the outputs of step N-1
  // and prepares step N+1 (docs/scheduling.md); off = one thread does both in turn.
  bool async_scheduling = false;
  // Decode steps run per scheduler invocation (multi-step scheduling); 1 = schedule every step.
  int32_t num_scheduler_steps = 1;
};

struct KvCacheConfig {
  int32_t block_size = 16;           // tokens per block; power of two in [1, 256]
  int64_t memory_mib = 0;            // budget for all KV caches; 0 = auto (see docs)
  std::string dtype = "auto";        // auto | f32 | f16 | bf16; auto = f32 for f32 weights, else f16
  bool prefix_caching = true;        // reuse the KV of full blocks of earlier prompts (docs/scheduling.md)
  double gpu_memory_fraction = 0.9;  // model.device cuda, memory_mib auto: the KV cache's share of the device
                                     // memory free after the weights (refused for the cpu)
};

struct ServerConfig {
  std::string host = "127.0.0.1";
  int32_t port = 8000;
  std::string model_name;             // name served in /v1/models; "" = model dir name
  std::vector<std::string> api_keys;  // empty = no auth unless api_key_env is set
  std::string api_key_env;            // environment variable holding one more key
  int64_t max_body_bytes = 1 << 20;
  int32_t max_prompt_tokens = 0;          // 0 = the model's context length
  int32_t max_tokens_limit = 0;           // upper bound for a request's max_tokens; 0 = the context
  std::string chat_template = "auto";     // auto (the model's own) | a Jinja template file
  std::string tool_call_parser = "auto";  // auto | hermes | llama3_json | none
  bool stream_token_by_token = false;     // one SSE event per token, not per engine step
  bool allow_unsupported_tools = false;   // serve tools the template does not render / no parser reads
  int32_t shutdown_timeout_s = 30;
  int32_t template_timeout_ms = 1000;  // wall clock of one chat template render (0 = none)
  int32_t max_connections = 1024;      // open connections; see docs/server.md "Limits"
  double idle_timeout_s = 60;          // a connection waiting for the first byte of a request
  double header_timeout_s = 10;        // first byte of a request to the end of its header
  double body_timeout_s = 30;          // end of the header to the end of the body
  double write_timeout_s = 30;         // each write of a response to a client
  // Browser origins allowed to call the API (CORS): "*" = any, else exact "scheme://host[:port]"
  // values; [] = no CORS headers (browsers then block cross-origin calls).
  std::vector<std::string> cors_allow_origins = {"*"};
};

struct PluginsConfig {
  std::vector<std::string> paths;  // searched before SPECD_PLUGIN_PATH and the built-ins
};

struct LoggingConfig {
  std::string level = "info";  // trace | debug | info | warn | error | critical | off
};

struct EngineConfig {
  std::string source_file = "<default>";
  ModelConfig model;
  SpeculativeConfig speculative;
  SchedulerConfig scheduler;
  KvCacheConfig kv_cache;
  ServerConfig server;
  PluginsConfig plugins;
  LoggingConfig logging;

  // The public, immutable form an Engine takes (specd/config.hpp).
  operator specd::Config() const;  // NOLINT(google-explicit-constructor): one config, two views
};

// `--set key=value` overrides, applied to the YAML tree before validation; key is a dotted
// path such as `speculative.num_speculative_tokens` or `model.path`.
using Overrides = std::vector<std::pair<std::string, std::string>>;

// Parses "a.b=c" into an override; throws specd::Error on a malformed flag.
std::pair<std::string, std::string> parse_override(const std::string& flag);

// Loads and validates a YAML file. Throws specd::Error (kConfig) listing every error found,
// one per line, each with file:line: path: message.
EngineConfig load_file(const std::filesystem::path& file, const Overrides& overrides = {});
// Validates YAML text (for tests and stdin); `source_name` is used in messages.
EngineConfig load_string(const std::string& yaml, const std::string& source_name, const Overrides& overrides = {});
// A config with documented defaults for a model directory alone (`--model DIR`).
EngineConfig for_model_dir(const std::string& model_dir, const Overrides& overrides = {});

// An A/B arm name: 1 to 64 characters of A-Z a-z 0-9 _ - . (names appear in HTTP headers,
// metric labels and reports).
bool valid_arm_name(std::string_view name);

// A one-screen human summary (what `specd validate` prints on success).
std::string summary(const EngineConfig& config);

}  // namespace specd::config

namespace specd {
struct Config::Impl {
  config::EngineConfig engine;
};
}  // namespace specd

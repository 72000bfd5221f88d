// The embedding API: an engine that loads a model and serves requests step by step.
//
//   specd::Engine engine(specd::ConfigBuilder::for_model("models/tiny").build());
//   engine.add_request(1, {.prompt = "Once upon a time", .sampling = {.max_tokens = 32}});
//   while (engine.has_unfinished())
//     for (const specd::RequestOutput& out : engine.step()) std::cout << out.text_delta;
//
// Each step() runs one batched forward over every scheduled sequence (prefill chunks and
// decodes together, continuous batching) and returns what each request gained; the step's
// stages are described in docs/architecture.md. Per-request failures (prompt too long, bad
// sampling parameters, KV cache exhausted, a failing plugin) finish that request with
// FinishReason::kError and a message; they never throw out of step().
//
// With scheduler.async_scheduling, step() hands the next step to a model worker thread and
// returns the outputs of the step before it, processed while the worker runs: outputs trail by
// one call, and a request finished by a stop string or aborted still runs (discarded) in the
// step already in flight. With scheduler.num_scheduler_steps = n, the scheduler runs once per n
// decode steps; every step() still returns that step's outputs (docs/scheduling.md).
//
// Request ids belong to the caller (the server, the CLI, a test): outputs carry the id the
// request was added with.
//
// Threading: an Engine is used from one thread at a time (its model worker is its own). To serve
// requests from many threads, drive it with a ServingEngine (specd/serving_engine.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "specd/config.hpp"
#include "specd/request.hpp"
#include "specd/spec_metrics.hpp"
#include "specd/tokenizer.hpp"

namespace specd {

// One A/B arm as configured.
struct ArmInfo {
  std::string name;
  std::string verifier;
  bool lossless = false;  // the verifier's capability
  int32_t num_speculative_tokens = 0;
  double weight = 0;
  bool shadow = false;  // verifies the other arms' drafts as a shadow
};

// What the engine loaded, for logs, `specd bench` and tests.
struct EngineInfo {
  std::string model_dir;
  std::string architecture;
  int64_t vocab_size = 0;
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t max_model_len = 0;
  int32_t kv_block_size = 0;
  int32_t kv_num_blocks = 0;
  size_t kv_bytes = 0;             // KV storage reserved (touched as used); rank 0's share under TP
  size_t decode_weight_bytes = 0;  // weight bytes read per decode step, in their stored dtypes (rank 0's shard)
  std::string weight_dtype;        // compute dtype of the projections: f32 | f16 | bf16 | q8_0 | q4_0
  std::string kv_dtype;            // f32 | f16 | bf16
  // Automatic prefix caching is on (kv_cache.prefix_caching, unless the proposer needs the
  // target's hidden states of every prompt position: MTP, EAGLE-3).
  bool prefix_caching = false;
  std::string cpu_isa;      // CPU kernel level: scalar | avx2 | avx512 | avx512_vnni | avx512_vbmi | avx512_bf16
  std::string cpu_model;    // the CPU's model name (/proc/cpuinfo)
  std::string device;       // where the target model runs: "cpu", or "cuda (<the GPU>)"
  int32_t num_threads = 0;  // CPU kernel threads (per rank)
  int32_t tensor_parallel_size = 1;           // ranks the target is split over (MPI job size)
  int32_t proposer_tensor_parallel_size = 0;  // ranks the proposer's draft models run on (0: no proposer)
  // Speculative decoding; empty proposer = off.
  std::string proposer;
  std::string verifier;
  bool verifier_lossless = false;      // the verifier's capability: sampled output follows the target
  std::string scorer;                  // "mqa" or a scorer plugin
  int32_t num_speculative_tokens = 0;  // k; with dynamic_k the largest k
  bool dynamic_k = false;              // speculative.dynamic: the policy picks k per sequence and step
  // The model's generation_config.json sampling defaults (unset: not given there).
  std::optional<double> default_temperature, default_top_p, default_min_p, default_repetition_penalty;
  std::optional<int64_t> default_top_k, default_max_tokens;
  // A/B arms (docs/ab-testing.md): without speculative.arms, one arm "default". With several,
  // `verifier` lists their verifiers ("rejection,typical_acceptance") and `verifier_lossless`
  // holds when every arm's does.
  std::vector<ArmInfo> arms;
  std::string ab_log;  // the A/B log file; "" = off
};

// Where the engine's step time goes (docs/scheduling.md), summed since construction, in seconds.
// A step's wall time runs from its start to the next step's start while requests are
// unfinished (so it includes the caller's work between steps); everything but `forward` is work
// outside the target's forward. Share outside the forward = 1 - forward / wall.
struct StepStats {
  uint64_t steps = 0;  // steps that ran the model
  double wall = 0;
  // Where the step executes (the model worker with async scheduling):
  double forward = 0;  // the target's forward (the scorer stage)
  double propose = 0;  // the proposer, a draft model's forwards included
  double verify = 0;   // sampling and verification, proposer prefill notifications
  double commit = 0;   // Scheduler::commit (tokens appended, KV rolled back) and on_accept
  // On the engine thread:
  double schedule = 0;  // the hand-off: finished requests removed, arrivals, Scheduler::schedule
  double output = 0;    // the output processor: detokenization, stop strings, finish reasons
  // Async scheduling: engine-thread time between handing a step to the worker and waiting for
  // it (the previous step's outputs and the caller's work, e.g. streaming), the part of it
  // during which the worker executed (the overlap achieved), and the time spent waiting.
  double in_flight = 0;
  double overlap = 0;
  double wait = 0;
};

// Live counters, for metrics and health checks.
struct EngineStats {
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_free = 0;
  size_t num_running = 0;  // sequences admitted to the KV cache
  size_t num_waiting = 0;  // queued or preempted
  uint64_t num_preemptions = 0;
  // Prefix caching: free blocks that keep a cached prefix (part of kv_blocks_free), and the
  // prompt tokens looked up in the cache so far and found there.
  int32_t kv_blocks_cached = 0;
  uint64_t prefix_cache_queries = 0;
  uint64_t prefix_cache_hits = 0;
  // Structured output (docs/structured-output.md): constrained requests admitted; token masks
  // computed (a walk of the vocabulary trie) and taken from the cache, and the walks' time;
  // draft tokens the grammar cut (forbidden, never scored) and added (forced text).
  uint64_t structured_requests = 0;
  uint64_t grammar_masks_computed = 0;
  uint64_t grammar_masks_cached = 0;
  double grammar_mask_seconds = 0;
  uint64_t grammar_cut_drafts = 0;
  uint64_t grammar_forced_drafts = 0;
  // Mixture-of-experts targets (docs/model-formats.md "Mixture of experts"; zero otherwise): MoE
  // layer passes, distinct experts read over them (each read once per forward however many of
  // the forward's rows chose it), and (token, expert) pairs routed. experts_read /
  // (layer_passes * experts_per_token) is the expert bytes read against what one row alone reads.
  uint64_t moe_layer_passes = 0;
  uint64_t moe_experts_read = 0;
  uint64_t moe_expert_rows = 0;
  int32_t moe_experts_per_token = 0;
};

// The version of the specd library an application runs with ("0.1.0"): defined by libspecd.so.
const char* library_version() noexcept;

class Engine {
 public:
  // Loads the checkpoint and tokenizer named by the config and sizes the KV cache. Throws
  // specd::Error on load errors (naming the files), an unsupported device or dtype, and a
  // tokenizer whose ids exceed the model's vocabulary.
  explicit Engine(const Config& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request under the caller's id. Never throws for bad request content: an invalid
  // request is reported as a finished output with FinishReason::kError by the next step().
  // Throws specd::Error(kInvalidArgument) for an id that is still in use (added and not yet
  // finished). Any other 64-bit value is a valid id.
  void add_request(RequestId id, const Request& request);
  // Finishes a request with FinishReason::kAbort (reported by the next step()); unknown ids
  // are ignored.
  void abort(RequestId id);

  std::vector<RequestOutput> step();
  bool has_unfinished() const;

  // log p(token_i | tokens_<i) for i = 1..n-1 of `ids`, computed with full-sequence forwards
  // (chunked by scheduler.max_num_batched_tokens). Throws specd::Error on invalid ids, fewer
  // than 2 tokens, more than the context length, or too few free KV blocks. Call between
  // steps, not concurrently with them.
  std::vector<float> prompt_logprobs(std::span<const int32_t> ids);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = true) const;
  // The tokenizer the engine encodes prompts and decodes outputs with. Its const methods may be
  // called from any thread, concurrently with step().
  const Tokenizer& tokenizer() const;

  const EngineInfo& info() const;
  // Engine-wide speculative-decoding counters since construction (all zero when off).
  spec::SpecMetrics spec_metrics() const;
  // Per A/B arm (indexed like EngineInfo::arms), since construction; empty when speculation is
  // off. The reference is valid until the next step().
  const std::vector<spec::ArmMetrics>& arm_metrics() const;
  EngineStats stats() const;
  StepStats step_stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace specd

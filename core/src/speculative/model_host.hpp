// ModelHost: the host side of the plugin ABI's model services. Proposer plugins (draft model,
// MTP) load and run causal LMs through it; every hosted model has its own paged KV cache, keyed
// by the engine's sequence ids. A scorer plugin runs the engine's own target model and KV
// cache through the handle bind_target() returns.
//
// KV memory (ARCHITECTURE.md "One engine step"): the target and every hosted model get the
// same number of blocks, so a sequence that fits in the target's cache fits in the draft's.
// With a budget of B bytes and per-block sizes b_target, b_1, ..., b_n (bytes of K and V of one
// block over all layers of that model),
//
//     num_blocks = floor(B / (b_target + b_1 + ... + b_n))
//
// The engine creates the proposer (which loads its models here) before sizing the caches, then
// calls allocate_kv(num_blocks). Models loaded later get the same block count.
//
// As sched::HostedKv, the scheduler caps the hosted caches at the target's committed length
// after a verification and frees a sequence in all of them with the target (rollback in one
// place); plugins may roll back further themselves.
//
// Tensor parallelism (tp/model_factory.hpp): a copy of the target and MTP modules run at the
// target's tensor-parallel size; drafts (a checkpoint or a self-draft of N layers) at
// speculative.proposer.tensor_parallel_size: on every rank (announced to the other ranks, like
// the target) or on rank 0 alone, in a group of its own. KV block sizes are each rank's share.
//
// Not thread-safe: used from the engine's step thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kv/kv_cache.hpp"
#include "model/forward.hpp"
#include "model/llama.hpp"
#include "model/weights.hpp"
#include "plugin/host_services.hpp"
#include "sched/scheduler.hpp"
#include "tp/model_factory.hpp"

namespace specd::speculative {

class ModelHost final : public sched::HostedKv {
 public:
  // target: the engine's model; its weights are shared by self-drafts (layers: N) of its own
  // dtype, and every model loaded here takes their placement (model.mmap). kv_dtype: the
  // kv_cache.dtype setting, resolved per hosted model (kv::resolve_kv_dtype). models: where
  // models are built and run (this process, or every rank under tensor parallelism); it must
  // outlive the host. placement: the target's; hosted models the device runtime runs (draft
  // models, self-drafts, MTP modules, EAGLE-3 heads: DeviceWeights::unsupported) take it, with
  // their KV caches on its device; a whole-target handle runs on the CPU path.
  ModelHost(std::shared_ptr<const model::LlamaWeights> target_weights, int32_t block_size, int64_t max_context,
            std::string kv_dtype, tp::ModelFactory& models, model::Placement placement = {});
  ~ModelHost() override;
  ModelHost(const ModelHost&) = delete;
  ModelHost& operator=(const ModelHost&) = delete;

  plugin::ModelBinding binding() { return {&table_, this}; }

  // Σ bytes per KV block over the hosted models (not counting the target).
  size_t hosted_bytes_per_block() const;
  // Sizes every hosted model's KV cache (and those loaded later) to num_blocks blocks.
  void allocate_kv(int32_t num_blocks);
  int32_t num_blocks() const { return num_blocks_; }

  // The model services handle of the engine's target model and KV cache (both must outlive the
  // host). Forwards through it may only fill room the scheduler reserved; truncate and drop
  // are refused or ignored (the scheduler owns that KV).
  specd_model* bind_target(model::LlamaModel& model, kv::KvCache& kv);

  // sched::HostedKv: every hosted model (not the bound target).
  void truncate(kv::SeqId seq, int32_t max_len) override;
  void drop(kv::SeqId seq) override;
  void match_prefix(kv::SeqId seq, std::span<const int32_t> tokens, int32_t max_len) override;
  void publish(kv::SeqId seq, std::span<const int32_t> tokens) override;
  // Prefix caching in every hosted cache (and those of models loaded later), in copy mode: each
  // sequence holds its own blocks, so a hosted cache never needs more blocks than the target's.
  void set_prefix_caching(bool on);

  struct Hosted;

 private:
  static const specd_model_services table_;
  Hosted& load(const specd_model_load_options& options);
  Hosted& load_mtp(Hosted* target, int32_t module);
  // Builds h's weights and model from `spec`: on every rank (all_ranks) or on this one.
  // mtp_base: the weights an MTP module's spec refers to.
  Hosted& add(std::unique_ptr<Hosted> h, const tp::HostedModelSpec& spec, bool all_ranks,
              const std::shared_ptr<const model::LlamaWeights>& mtp_base);
  void set_kv(Hosted& h, int32_t num_blocks);
  void release(Hosted* m);
  void forward(Hosted& m, const specd_forward_batch& batch);
  void fill_info(const Hosted* m, specd_model_info& out) const;
  kv::KvCacheShape kv_shape(const Hosted& h) const;

  std::shared_ptr<const model::LlamaWeights> target_weights_;
  int32_t block_size_;
  int64_t max_context_;
  std::string kv_dtype_;
  tp::ModelFactory& factory_;
  model::Placement placement_;
  int32_t num_blocks_ = 0;
  bool prefix_caching_ = false;
  std::vector<std::unique_ptr<Hosted>> models_;
  std::unique_ptr<Hosted> target_;  // bind_target()
};

}  // namespace specd::speculative

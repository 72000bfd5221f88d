// ModelHost: the host side of the plugin ABI's model services. Proposer plugins (draft
// model, MTP) load and run causal LMs through it; every hosted model has its own paged KV
// cache, keyed by the engine's sequence ids.
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
// Not thread-safe: used from the engine's step thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kv/kv_cache.hpp"
#include "model/forward.hpp"
#include "model/llama.hpp"
#include "model/weights.hpp"
#include "plugin/host_services.hpp"

namespace specd::spec {

class ModelHost {
 public:
  // target: the engine's model; its weights are shared by self-drafts (layers: N) of its own
  // dtype. kv_dtype: the kv_cache.dtype setting, resolved per hosted model (kv::resolve_kv_dtype);
  // placement: model.mmap, for every model loaded here.
  ModelHost(std::shared_ptr<const model::LlamaWeights> target_weights, int32_t block_size, int64_t max_context,
            std::string kv_dtype, model::WeightPlacement placement);
  ~ModelHost();
  ModelHost(const ModelHost&) = delete;
  ModelHost& operator=(const ModelHost&) = delete;

  plugin::ModelBinding binding() { return {&table_, this}; }

  // Σ bytes per KV block over the hosted models (not counting the target).
  size_t hosted_bytes_per_block() const;
  // Sizes every hosted model's KV cache (and those loaded later) to num_blocks blocks.
  void allocate_kv(int32_t num_blocks);
  int32_t num_blocks() const { return num_blocks_; }
  size_t num_models() const { return models_.size(); }

  // Frees a sequence in every hosted model (the engine calls this when a sequence ends, in
  // case a plugin did not).
  void drop_sequence_everywhere(kv::SeqId seq);

  struct Hosted;

 private:
  static const specd_model_services table_;
  Hosted& load(const specd_model_load_options& options);
  Hosted& load_mtp(Hosted* target, int32_t module);
  void release(Hosted* m);
  void forward(Hosted& m, const specd_forward_batch& batch);
  void fill_info(const Hosted* m, specd_model_info& out) const;
  kv::KvCacheShape kv_shape(const Hosted& h) const;
  static int32_t call(specd_error* err, const std::function<void()>& fn);

  std::shared_ptr<const model::LlamaWeights> target_weights_;
  int32_t block_size_;
  int64_t max_context_;
  std::string kv_dtype_;
  model::WeightPlacement placement_;
  int32_t num_blocks_ = 0;
  std::vector<std::unique_ptr<Hosted>> models_;
};

}  // namespace specd::spec

// ModelFactory: where the engine's models are built and run, as one interface for the engine
// (the target and its KV cache) and the model host (drafts, MTP modules and their KV caches):
//
//   Local   a single process: a model is built here, its forwards run here.
//   Leader  rank 0 of a tensor-parallel MPI job (tensor_parallel.hpp): every rank of the
//           model's group builds its shard of the same model, and each forward is announced to
//           the other ranks before it runs (docs/distributed.md).
//
// Models are named by an id: kTarget is the engine's target, load() numbers the rest, and
// kLocal is a model that runs in this process only (everything under Local; a draft at
// speculative.proposer.tensor_parallel_size 1 under a Leader). Used from the engine's step thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dist/communicator.hpp"
#include "dist/session.hpp"
#include "kv/kv_cache.hpp"
#include "model/llama.hpp"
#include "model/weights.hpp"

namespace specd::tp {

// The target as every rank loads it.
struct TargetSpec {
  std::string path;           // checkpoint directory or GGUF file
  model::WeightDTypes dtype;  // model.dtype
  model::WeightPlacement placement = model::WeightPlacement::kCopy;
  int32_t num_threads = 0;     // CPU kernel threads per rank (0: this machine's share)
  int32_t proposer_size = 1;   // the draft's group: ranks [0, proposer_size)
  int64_t context_length = 0;  // the engine's max_model_len (LlamaModel::set_context_length)
};

// A model loaded next to the target through model services, described so that every rank of
// its group builds the same shard of it.
struct HostedModelSpec {
  std::string path;           // "" = the target's own checkpoint
  int64_t layers = -1;        // first `layers` decoder layers; < 0 all
  model::WeightDTypes dtype;  // auto (a draft checkpoint) or the target's
  int32_t mtp_module = -1;    // >= 0: this MTP module of model `base`
  int32_t base = 0;           // model id of the MTP module's base (kTarget = the target)
};

class ModelFactory {
 public:
  static constexpr int32_t kTarget = 0;
  static constexpr int32_t kLocal = -1;

  virtual ~ModelFactory() = default;

  // Ranks of the target's group (1: a single process) and of the draft's.
  virtual int32_t size() const = 0;
  virtual int32_t proposer_size() const = 0;
  // The communicator of a model built on the target's group (all_ranks) or the draft's; null in
  // a single process.
  virtual dist::Communicator* group(bool all_ranks) = 0;

  // A model the proposer loads: `build` makes this rank's model; under a Leader with all_ranks,
  // every other rank of the target's group builds its shard from `spec`. Returns its id
  // (kLocal: this process only). Throws specd::Error naming every rank that failed.
  virtual int32_t load(const HostedModelSpec& spec, bool all_ranks, const std::function<void()>& build) = 0;
  // From now on every forward of `model` (id from load(), or kTarget) runs where the model was
  // built; a no-op for kLocal.
  virtual void attach(model::LlamaModel& model, int32_t id) = 0;
  // Sizes model `id`'s KV cache: `allocate_here` makes this rank's (shape: this rank's KV
  // heads) and returns it; every other rank of the model's group makes its own with the same
  // block count.
  virtual void allocate_kv(int32_t id, const kv::KvCacheShape& shape, int32_t num_blocks,
                           const std::function<kv::KvCache&()>& allocate_here) = 0;
  virtual void release(int32_t id) = 0;
};

// The factory for this process, loading the target through `load_target` (this rank's shard):
// Local at tensor_parallel_size 1, else a Leader over the job `session` (rank 0), which sends
// the target to every rank first.
std::unique_ptr<ModelFactory> open_models(dist::Session* session, int32_t tensor_parallel_size,
                                          const TargetSpec& target, const std::function<void()>& load_target);

// The weights `spec` names for `shard`: the target's own weights when they are what is asked
// for (same checkpoint, dtype and shard; a self-draft runs their first layers), else loaded.
// `base` is the MTP module's base model (spec.mtp_module >= 0).
std::shared_ptr<const model::LlamaWeights> load_hosted_weights(const HostedModelSpec& spec,
                                                               const std::shared_ptr<const model::LlamaWeights>& target,
                                                               const std::shared_ptr<const model::LlamaWeights>& base,
                                                               model::TensorShard shard);

// CPU kernel threads for this rank: `configured` when > 0, else this machine's hardware
// threads divided among the job's ranks on it (at least 1).
int32_t kernel_threads(int32_t configured);

// Ranks 1..N-1 of an MPI job: run what rank 0's Leader sends until rank 0's session ends.
// Returns the process's exit code.
int follow(dist::Session& session);

}  // namespace specd::tp

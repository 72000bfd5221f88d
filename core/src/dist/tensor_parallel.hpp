// Tensor parallelism across MPI ranks: rank 0 (the Leader, inside the Engine) owns requests,
// the tokenizer, the scheduler, speculation and output; ranks 1..N-1 (Followers) hold the
// other shards of every tensor-parallel model and run each forward rank 0 announces.
//
// What rank 0 sends over the control channel (dist/session.hpp), in the order it happens:
//   open      the target: checkpoint, dtype, placement, threads, the draft's group size; every
//             rank loads its shard (and, for a draft on fewer ranks, the draft group is split
//             off); all ranks then exchange their load status
//   load      a model loaded through model services at the target's tensor-parallel size (a
//             self-draft or draft checkpoint at proposer TP = N, a copy of the target, an MTP
//             module): every rank builds the same shard; status exchanged
//   kv        a model's KV cache shape and block count (the block count rank 0 computed from
//             its budget: every rank of a group holds the same share); status exchanged
//   forward   one forward of one model: its token ids, each sequence's committed length and
//             block table (the KV positions it writes and reads), the logit rows wanted and,
//             for an MTP module, the input hidden states. Followers mirror the tables into
//             their cache (kv::KvCache::mirror) and run the same forward on their shard.
//   release   a model services model was freed
//   close     the engine ended: drop its models
// A draft at TP 1 runs on rank 0 alone, in its own group of one: its forwards are not
// announced, its draft tokens reach the other ranks inside the target's scoring forward, and its
// draft probabilities stay on rank 0, where the verifier runs.
//
// Failures: a command that can fail (open, load, kv) fails on every rank together: each rank
// reports its status and rank 0 throws one error naming every rank that failed and why. A
// forward is checked on rank 0 before it is announced (LlamaModel::forward), so a request's
// bad input fails that request on rank 0 and never reaches the others; a follower that still
// fails inside a forward ends the job (Communicator::abort). A lost rank ends the job through
// the launcher (docs/distributed.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/session.hpp"
#include "kv/kv_cache.hpp"
#include "model/llama.hpp"
#include "model/weights.hpp"

namespace specd::dist {

// The target as every rank loads it.
struct TargetSpec {
  std::string path;              // checkpoint directory or GGUF file
  std::optional<model::DType> dtype;  // model.dtype (nullopt: auto)
  model::WeightPlacement placement = model::WeightPlacement::kCopy;
  int32_t num_threads = 0;       // CPU kernel threads per rank (0: this machine's share)
  int32_t proposer_size = 1;     // the draft's group: ranks [0, proposer_size)
};

// A model loaded next to the target through model services, described so that every rank of
// its group builds the same shard of it.
struct HostedModelSpec {
  std::string path;                   // "" = the target's own checkpoint
  int64_t layers = -1;                // first `layers` decoder layers; < 0 all
  std::optional<model::DType> dtype;  // nullopt: auto (a draft checkpoint) or the target's
  int32_t mtp_module = -1;            // >= 0: this MTP module of model `base`
  int32_t base = 0;                   // model id of the MTP module's base (0 = the target)
};

// The weights `spec` names for `shard`: the target's own weights when they are what is asked
// for (same checkpoint, dtype and shard; a self-draft runs their first layers), else loaded.
// `base` is the MTP module's base model (spec.mtp_module >= 0).
std::shared_ptr<const model::LlamaWeights> load_hosted_weights(const HostedModelSpec& spec,
                                                               const std::shared_ptr<const model::LlamaWeights>& target,
                                                               const std::shared_ptr<const model::LlamaWeights>& base,
                                                               model::TensorShard shard);

// Rank 0's side, owned by the Engine. Model ids: 0 is the target; load() numbers the rest.
class Leader {
 public:
  static constexpr int32_t kTarget = 0;

  // Sends `open`; every rank loads its target shard (`load_target` here) and the draft group is
  // formed. Throws specd::Error naming every rank that failed (the others drop their shards).
  Leader(Session& session, const TargetSpec& spec, const std::function<void()>& load_target);
  // Sends `close`: the other ranks drop this engine's models.
  ~Leader();
  Leader(const Leader&) = delete;
  Leader& operator=(const Leader&) = delete;

  int size() const { return group_.size(); }
  // The target's tensor-parallel group (and that of models at the target's size).
  Communicator& group() { return group_; }
  // The draft's group: ranks [0, proposer_size); `group()` when that is every rank.
  Communicator& draft_group() { return draft_group_ ? *draft_group_ : group_; }
  int32_t proposer_size() const { return spec_.proposer_size; }

  // A model every rank loads (`load_here` builds rank 0's shard). Returns its id; throws like
  // the constructor.
  int32_t load(const HostedModelSpec& spec, const std::function<void()>& load_here);
  void release(int32_t model);
  // Every rank sizes `model`'s KV cache: `shape` (this rank's KV heads), `num_blocks` blocks.
  void allocate_kv(int32_t model, const kv::KvCacheShape& shape, int32_t num_blocks,
                   const std::function<void()>& allocate_here);
  // From now on every forward of `llama` runs on all ranks, announced as model `id`.
  void attach(model::LlamaModel& llama, int32_t id);

 private:
  // Sends `message_`, runs `here`, then exchanges statuses; throws if any rank failed.
  void run_everywhere(const std::function<void()>& here, const std::string& what);
  void announce_forward(int32_t id, int64_t hidden, const model::ForwardBatch& batch, kv::KvCache& kv);

  Session& session_;
  Communicator& group_;
  TargetSpec spec_;
  std::unique_ptr<Communicator> draft_group_;
  int32_t next_id_ = 1;
  std::vector<std::byte> message_;  // reused: a forward's message is built here every step
};

// CPU kernel threads for this rank: `configured` when > 0, else this machine's hardware
// threads divided among the job's ranks on it (at least 1).
int32_t kernel_threads(int32_t configured);

class MessageReader;

// Ranks 1..N-1: runs what the Leader sends until the session ends (Session::follow).
class Follower {
 public:
  explicit Follower(Session& session);
  ~Follower();
  // Returns the process exit code: 0 when rank 0 ended the session.
  int run();

 private:
  struct Model;
  void handle(const std::vector<std::byte>& message);
  void open(MessageReader& in);
  void load(MessageReader& in);
  void allocate_kv(MessageReader& in);
  void forward(MessageReader& in);
  // Runs `fn`, then exchanges statuses with every rank; returns whether all succeeded.
  bool run_everywhere(const std::function<void()>& fn);

  Session& session_;
  TargetSpec spec_;
  std::unique_ptr<Communicator> draft_group_;
  std::vector<std::unique_ptr<Model>> models_;  // by id; null after release
  std::vector<kv::KvCache::MirroredSeq> mirror_;
  model::ForwardBatch batch_;
};

}  // namespace specd::dist

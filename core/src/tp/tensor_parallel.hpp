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
#include "tp/model_factory.hpp"

namespace specd::tp {

// Rank 0's side: the engine's ModelFactory under tensor parallelism (model_factory.hpp).
class Leader final : public ModelFactory {
 public:
  // Sends `open`; every rank loads its target shard (`load_target` here) and the draft group is
  // formed. Throws specd::Error naming every rank that failed (the others drop their shards).
  Leader(dist::Session& session, const TargetSpec& spec, const std::function<void()>& load_target);
  // Sends `close`: the other ranks drop this engine's models.
  ~Leader() override;
  Leader(const Leader&) = delete;
  Leader& operator=(const Leader&) = delete;

  int32_t size() const override { return group_.size(); }
  int32_t proposer_size() const override { return spec_.proposer_size; }
  // The target's group, or the draft's: ranks [0, proposer_size) (the target's when that is
  // every rank).
  dist::Communicator* group(bool all_ranks) override {
    return all_ranks || !draft_group_ ? &group_ : draft_group_.get();
  }
  // all_ranks: every rank loads the model (`build` builds rank 0's shard); else only rank 0
  // builds it, in the draft's group.
  int32_t load(const HostedModelSpec& spec, bool all_ranks, const std::function<void()>& build) override;
  void release(int32_t id) override;
  void allocate_kv(int32_t id, const kv::KvCacheShape& shape, int32_t num_blocks,
                   const std::function<kv::KvCache&()>& allocate_here) override;
  // From now on every forward of `llama` runs on all ranks, announced as model `id`.
  void attach(model::LlamaModel& llama, int32_t id) override;

 private:
  // Sends `message_`, runs `here`, then exchanges statuses; throws if any rank failed.
  void run_everywhere(const std::function<void()>& here, const std::string& what);
  void announce_forward(int32_t id, int64_t hidden, const model::ForwardBatch& batch, kv::KvCache& kv);

  dist::Session& session_;
  dist::Communicator& group_;
  TargetSpec spec_;
  std::unique_ptr<dist::Communicator> draft_group_;
  int32_t next_id_ = 1;
  std::vector<std::byte> message_;  // reused: a forward's message is built here every step
};

class MessageReader;

// Ranks 1..N-1: runs what the Leader sends until the session ends (Session::follow).
class Follower {
 public:
  explicit Follower(dist::Session& session);
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

  dist::Session& session_;
  TargetSpec spec_;
  std::unique_ptr<dist::Communicator> draft_group_;
  std::vector<std::unique_ptr<Model>> models_;  // by id; null after release
  std::vector<kv::KvCache::MirroredSeq> mirror_;
  model::ForwardBatch batch_;
};

}  // namespace specd::tp

// Paged KV cache: a pool of fixed-size blocks shared by all sequences, one block table per
// sequence, storage per layer in the cache dtype (f32, f16 or bf16) laid out
// [num_blocks, block_size, num_kv_heads, head_dim] (the layout kernels::paged_attention reads).
//
// Lifecycle of a step for sequence s that adds n tokens:
//   reserve(s, n)   – false = out of blocks; the scheduler decides (wait, preempt, fail)
//   forward          – writes K/V at positions [num_tokens, num_tokens + n), then commit(s, n)
//   truncate(s, len) – rollback of rejected speculative tokens: a length change on the block
//                      table; blocks past the new length (and past any room asked to be kept)
//                      go back to the pool.
//   fork(p, c, len)  – c starts as the first len tokens of p, sharing p's blocks (refcounted);
//                      the first write into a shared, partly filled block copies it (reserve).
//
// Prefix caching (set_prefix_caching(true); kv/prefix_index.hpp): publish(s, tokens) puts the
// sequence's full blocks of committed tokens in the index, where they outlive the sequence
// until their blocks are needed (LRU); match_prefix(s, tokens, max) gives a new sequence the
// published blocks its tokens start with. Only the scheduler publishes, after a step's rollback,
// so a block that held rejected drafts is never published. A published block is never written
// again: a write into one (after a truncate) copies it first, as for a shared block.
// Not thread-safe: owned by the engine's step thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kv/block_allocator.hpp"
#include "kv/prefix_index.hpp"
#include "specd/kernels/device_memory.hpp"
#include "specd/kernels/dtype.hpp"

namespace specd::kv {

using SeqId = int64_t;

struct KvCacheShape {
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;
  kernels::DType dtype = kernels::DType::kF32;  // f32, f16 or bf16
};

// The cache dtype for `requested` (config kv_cache.dtype: auto | f32 | f16 | bf16) and a model
// computing with `weight_dtype` weights: auto = f32 for f32 weights, f16 otherwise (16-bit
// and quantized models halve their attention traffic). Throws kInvalidArgument on other text.
kernels::DType resolve_kv_dtype(const std::string& requested, kernels::DType weight_dtype);

// Bytes of K and V for one block across all layers, in the cache dtype.
size_t bytes_per_block(const KvCacheShape& shape);
// How many blocks fit in `budget_bytes` (0 when not even one does).
int32_t blocks_for_budget(const KvCacheShape& shape, size_t budget_bytes);

class KvCache {
 public:
  // Throws specd::Error(kInvalidArgument) on a non-positive shape, a block size that is not a
  // power of two, or a dtype other than f32/f16/bf16. Storage is allocated up front on `device`
  // (host memory for the CPU: not touched, so RSS grows with use); the block copies of
  // copy-on-write and compact() run on that device. Throws kUnsupported where the device is
  // absent and kOutOfMemory where the pool does not fit.
  KvCache(const KvCacheShape& shape, int32_t num_blocks, kernels::Device device = kernels::Device::kCpu);

  const KvCacheShape& shape() const { return shape_; }
  int32_t block_size() const { return shape_.block_size; }
  int32_t num_blocks() const { return allocator_.num_blocks(); }
  // Blocks a reservation can take: never-used or freed ones and unreferenced cached ones.
  int32_t num_free_blocks() const { return allocator_.num_free(); }
  // Unreferenced blocks that keep a published prefix (counted in num_free_blocks()).
  int32_t num_cached_free_blocks() const { return allocator_.num_cached_free(); }

  // Prefix caching (see the file comment); off by default and for mirrored caches. share:
  // sequences hold the found blocks themselves; otherwise match_prefix copies them into blocks of
  // the sequence's own (for an engine whose hosted caches, which cache nothing, must never need
  // more blocks than this one holds: one block each per sequence block).
  void set_prefix_caching(bool on, bool share = true) {
    prefix_caching_ = on;
    prefix_sharing_ = share;
  }
  bool prefix_caching() const { return prefix_caching_; }
  // Gives the empty sequence `seq` the published blocks holding tokens[0, m), m <= max_tokens
  // the most whole blocks found in a row, shared; returns m (0 with caching off).
  int32_t match_prefix(SeqId seq, std::span<const int32_t> tokens, int32_t max_tokens);
  // Publishes the sequence's full blocks of its first min(num_tokens, tokens.size()) tokens, whose
  // K/V must be final (tokens: what the sequence's positions hold). No-op with caching off.
  void publish(SeqId seq, std::span<const int32_t> tokens);

  bool has_sequence(SeqId seq) const { return seqs_.contains(seq); }
  // Registers an empty sequence; throws kInternal if it exists.
  void add_sequence(SeqId seq);
  // Frees every block of the sequence and forgets it; no-op for an unknown id.
  void remove_sequence(SeqId seq);

  // A sequence for work outside the scheduler (prompt scoring, the speculation policy's
  // calibration): registered empty under an id no scheduled sequence has (scheduled ids are
  // >= 0, scratch ids negative), removed with its blocks when the handle goes.
  class Scratch {
   public:
    Scratch(KvCache& kv, SeqId id) : kv_(kv), id_(id) { kv_.add_sequence(id_); }
    ~Scratch() { kv_.remove_sequence(id_); }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    SeqId id() const { return id_; }

   private:
    KvCache& kv_;
    SeqId id_;
  };
  Scratch scratch() { return Scratch(*this, --last_scratch_); }

  // Tokens whose K/V are in the cache.
  int32_t num_tokens(SeqId seq) const;
  // Tokens the sequence's blocks can hold (num_blocks_of(seq) * block_size).
  int32_t capacity(SeqId seq) const;
  // Blocks that reserve(seq, n) would take from the pool.
  int32_t blocks_needed(SeqId seq, int32_t n) const;
  // Makes room for n tokens past num_tokens(seq), copying a partly filled last block that
  // another sequence shares first (copy-on-write). All or nothing: false (and no change) when
  // the pool has too few free blocks.
  bool reserve(SeqId seq, int32_t n);
  // Registers `child` holding the first len tokens of `parent` (<= num_tokens(parent)) in the
  // parent's blocks, shared. Throws kInternal if the child exists or len is out of range.
  void fork(SeqId parent, SeqId child, int32_t len);
  // Marks n more tokens as written. Throws kInternal past the reserved capacity.
  void commit(SeqId seq, int32_t n);
  // Shrinks the sequence to new_len tokens (<= num_tokens) and frees the blocks it no longer
  // needs, keeping those that hold room for `keep_room` more tokens past new_len (a multi-step
  // reservation survives the rollback of rejected drafts). Never allocates.
  void truncate(SeqId seq, int32_t new_len, int32_t keep_room = 0);

  // Tensor parallelism, ranks 1..N-1 (tp::Follower): the sequences of rank 0's next forward,
  // each with rank 0's committed length and block table, replace whatever this cache held. Such
  // a cache is storage addressed by rank 0's tables; its own pool is never used, so mirror()
  // is not mixed with reserve / truncate / remove_sequence. A sequence listed twice (batch
  // expansion) keeps its first entry. Throws kInternal for a block outside the pool or a
  // length past the table.
  struct MirroredSeq {
    SeqId seq = 0;
    int32_t num_tokens = 0;
    std::span<const int32_t> blocks;
  };
  void mirror(std::span<const MirroredSeq> seqs);
  // Draft trees: after verification the accepted path's K/V is made contiguous. Positions
  // base + keep[i] move to base + i (keep strictly increasing, keep[i] >= i, within the
  // sequence), in every layer; the caller then truncates past the path. Throws kInternal
  // otherwise.
  void compact(SeqId seq, int32_t base, std::span<const int32_t> keep);
  // The copies of copy-on-write (reserve after fork) and of compact() reach the followers the
  // same way: rank 0 records them (record_copies(true), set where tp::Leader allocates the
  // cache) and sends those made since the last forward with the next one (take_copies, as
  // triples: kind (kCopyBlock, kCopyRow), from, to); each follower repeats them in order before
  // that forward (repeat_copies). Throws kInternal for a ragged list, an unknown kind or a block
  // or row outside the pool.
  static constexpr int32_t kCopyBlock = 0;
  static constexpr int32_t kCopyRow = 1;
  void record_copies(bool on) { record_copies_ = on; }
  std::vector<int32_t> take_copies() { return std::exchange(copies_, {}); }
  void repeat_copies(std::span<const int32_t> copies);

  std::span<const int32_t> block_table(SeqId seq) const;
  // Row index (block * block_size + offset) of token position `pos` of `seq`.
  int64_t slot(SeqId seq, int32_t pos) const;

  kernels::DType dtype() const { return shape_.dtype; }
  kernels::Device device() const { return device_; }
  // The layer's storage, in the memory of device().
  void* k_layer(int32_t layer) { return k_[static_cast<size_t>(layer)].data(); }
  void* v_layer(int32_t layer) { return v_[static_cast<size_t>(layer)].data(); }
  const void* k_layer(int32_t layer) const { return k_[static_cast<size_t>(layer)].data(); }
  const void* v_layer(int32_t layer) const { return v_[static_cast<size_t>(layer)].data(); }
  // Elements per cache row (num_kv_heads * head_dim).
  int64_t row_elems() const { return static_cast<int64_t>(shape_.num_kv_heads) * shape_.head_dim; }

 private:
  struct BlockTable {
    std::vector<int32_t> blocks;
    int32_t num_tokens = 0;
    std::vector<uint64_t> keys;  // prefix keys of blocks[0, keys.size()), all full and final
  };
  const BlockTable& table(SeqId seq) const;
  BlockTable& table(SeqId seq);
  // The partly filled last block that a write of n > 0 tokens would copy first, or -1.
  int32_t shared_tail(const BlockTable& t, int32_t n) const;
  void copy_block(int32_t from, int32_t to);
  void copy_row(int64_t from, int64_t to);
  bool allocate(int32_t n, std::vector<int32_t>& out);  // unpublishes what it evicts
  void copy_found(BlockTable& t);

  KvCacheShape shape_;
  BlockAllocator allocator_;
  PrefixIndex index_;
  bool prefix_caching_ = false;
  bool prefix_sharing_ = true;
  std::vector<int32_t> evicted_;  // allocate()'s scratch
  std::unordered_map<SeqId, BlockTable> seqs_;
  kernels::Device device_;
  std::vector<kernels::DeviceBuffer> k_, v_;
  bool record_copies_ = false;
  std::vector<int32_t> copies_;  // (kind, from, to) since the last take_copies()
  SeqId last_scratch_ = 0;       // scratch ids count down from -1
};

}  // namespace specd::kv

#include "kv/kv_cache.hpp"

#include <algorithm>
#include <string>

#include "specd/error.hpp"

namespace specd::kv {

namespace {
size_t element_bytes(kernels::DType d) {
  return d == kernels::DType::kF32 ? 4 : 2;
}
}  // namespace

kernels::DType resolve_kv_dtype(const std::string& requested, kernels::DType weight_dtype) {
  if (requested == "auto") return weight_dtype == kernels::DType::kF32 ? kernels::DType::kF32 : kernels::DType::kF16;
  if (requested == "f32") return kernels::DType::kF32;
  if (requested == "f16") return kernels::DType::kF16;
  if (requested == "bf16") return kernels::DType::kBF16;
  throw Error(ErrorCode::kInvalidArgument,
              "kv_cache.dtype: expected auto, f32, f16 or bf16, got \"" + requested + "\"");
}

size_t bytes_per_block(const KvCacheShape& s) {
  return 2 * element_bytes(s.dtype) * static_cast<size_t>(s.num_layers) * static_cast<size_t>(s.block_size) *
         static_cast<size_t>(s.num_kv_heads) * static_cast<size_t>(s.head_dim);
}

int32_t blocks_for_budget(const KvCacheShape& shape, size_t budget_bytes) {
  const size_t per = bytes_per_block(shape);
  if (per == 0) return 0;
  const size_t n = budget_bytes / per;
  return n > static_cast<size_t>(INT32_MAX) ? INT32_MAX : static_cast<int32_t>(n);
}

KvCache::KvCache(const KvCacheShape& shape, int32_t num_blocks, kernels::Device device)
    : shape_(shape), allocator_(num_blocks), index_(num_blocks, std::max(shape.block_size, 1)), device_(device) {
  if (shape.num_layers <= 0 || shape.num_kv_heads <= 0 || shape.head_dim <= 0 || shape.block_size <= 0 ||
      (shape.block_size & (shape.block_size - 1)) != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "KV cache: invalid shape (layers " + std::to_string(shape.num_layers) + ", kv heads " +
                    std::to_string(shape.num_kv_heads) + ", head_dim " + std::to_string(shape.head_dim) +
                    ", block_size " + std::to_string(shape.block_size) + "; block_size must be a power of two)");
  }
  if (shape.dtype != kernels::DType::kF32 && shape.dtype != kernels::DType::kF16 &&
      shape.dtype != kernels::DType::kBF16) {
    throw Error(ErrorCode::kInvalidArgument, "KV cache: dtype " + std::string(kernels::dtype_name(shape.dtype)) +
                                                 " is not supported (f32, f16, bf16)");
  }
  const size_t bytes = static_cast<size_t>(num_blocks) * static_cast<size_t>(shape.block_size) *
                       static_cast<size_t>(row_elems()) * element_bytes(shape.dtype);
  for (int32_t l = 0; l < shape.num_layers; ++l) {
    k_.emplace_back(device, bytes);  // uninitialized: untouched until written
    v_.emplace_back(device, bytes);
  }
}

const KvCache::BlockTable& KvCache::table(SeqId seq) const {
  auto it = seqs_.find(seq);
  SPECD_CHECK(it != seqs_.end(), ErrorCode::kInternal, "KV cache: unknown sequence " + std::to_string(seq));
  return it->second;
}

KvCache::BlockTable& KvCache::table(SeqId seq) {
  return const_cast<BlockTable&>(static_cast<const KvCache*>(this)->table(seq));
}

void KvCache::add_sequence(SeqId seq) {
  SPECD_CHECK(!seqs_.contains(seq), ErrorCode::kInternal,
              "KV cache: sequence " + std::to_string(seq) + " already exists");
  seqs_.emplace(seq, BlockTable{});
}

void KvCache::remove_sequence(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  // Last block first: cached blocks are evicted in the order they were freed, so a prefix loses
  // its tail before its head (a head alone is still found; a tail without its head is not).
  const std::vector<int32_t>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) allocator_.free(*b);
  seqs_.erase(it);
}

int32_t KvCache::num_tokens(SeqId seq) const {
  return table(seq).num_tokens;
}

int32_t KvCache::capacity(SeqId seq) const {
  return static_cast<int32_t>(table(seq).blocks.size()) * shape_.block_size;
}

int32_t KvCache::shared_tail(const BlockTable& t, int32_t n) const {
  if (n <= 0 || t.num_tokens % shape_.block_size == 0) return -1;
  const auto last = static_cast<size_t>(t.num_tokens / shape_.block_size);
  if (last >= t.blocks.size()) return -1;
  const int32_t b = t.blocks[last];
  if (allocator_.refs(b) <= 1 && !allocator_.cached(b)) return -1;
  return static_cast<int32_t>(last);
}

int32_t KvCache::blocks_needed(SeqId seq, int32_t n) const {
  const BlockTable& t = table(seq);
  const int64_t want = static_cast<int64_t>(t.num_tokens) + n;
  const int64_t blocks = (want + shape_.block_size - 1) / shape_.block_size;
  const int64_t extra = blocks - static_cast<int64_t>(t.blocks.size());
  return (extra > 0 ? static_cast<int32_t>(extra) : 0) + (shared_tail(t, n) >= 0 ? 1 : 0);
}

bool KvCache::reserve(SeqId seq, int32_t n) {
  SPECD_CHECK(n >= 0, ErrorCode::kInternal, "KV cache: negative reservation");
  BlockTable& t = table(seq);
  const int32_t extra = blocks_needed(seq, n);
  if (extra > allocator_.num_free()) return false;
  if (const int32_t tail = shared_tail(t, n); tail >= 0) {
    std::vector<int32_t> fresh;
    allocate(1, fresh);
    int32_t& block = t.blocks[static_cast<size_t>(tail)];
    copy_block(block, fresh[0]);
    if (record_copies_) copies_.insert(copies_.end(), {kCopyBlock, block, fresh[0]});
    allocator_.free(block);  // the other holders keep it
    block = fresh[0];
  }
  return allocate(blocks_needed(seq, n), t.blocks);
}

bool KvCache::allocate(int32_t n, std::vector<int32_t>& out) {
  evicted_.clear();
  const bool ok = allocator_.allocate(n, out, evicted_);
  for (const int32_t b : evicted_) index_.erase(b);
  return ok;
}

int32_t KvCache::match_prefix(SeqId seq, std::span<const int32_t> tokens, int32_t max_tokens) {
  BlockTable& t = table(seq);
  SPECD_CHECK(t.blocks.empty() && t.num_tokens == 0, ErrorCode::kInternal,
              "KV cache: matching a prefix for sequence " + std::to_string(seq) + ", which holds tokens");
  if (!prefix_caching_) return 0;
  const auto bs = static_cast<size_t>(shape_.block_size);
  const size_t limit = std::min(tokens.size(), static_cast<size_t>(std::max(max_tokens, 0)));
  uint64_t parent = PrefixIndex::kRoot;
  for (size_t at = 0; at + bs <= limit; at += bs) {
    const std::span<const int32_t> block_tokens = tokens.subspan(at, bs);
    const uint64_t key = PrefixIndex::chain(parent, block_tokens);
    const int32_t b = index_.find(key, parent, block_tokens);
    if (b < 0) break;
    allocator_.share(b);
    t.blocks.push_back(b);
    t.keys.push_back(key);
    parent = key;
  }
  if (!prefix_sharing_) copy_found(t);
  t.num_tokens = static_cast<int32_t>(t.blocks.size() * bs);
  return t.num_tokens;
}

// Copy mode: the found blocks (held meanwhile, so that allocating cannot evict them) are copied
// into blocks of the sequence's own, as many as the pool has room for; the found ones go back.
void KvCache::copy_found(BlockTable& t) {
  const std::vector<int32_t> found = std::move(t.blocks);
  t.blocks.clear();
  const auto fit = std::min<size_t>(found.size(), static_cast<size_t>(allocator_.num_free()));
  allocate(static_cast<int32_t>(fit), t.blocks);
  for (size_t i = 0; i < fit; ++i) {
    copy_block(found[i], t.blocks[i]);
    if (record_copies_) copies_.insert(copies_.end(), {kCopyBlock, found[i], t.blocks[i]});
  }
  for (auto b = found.rbegin(); b != found.rend(); ++b) allocator_.free(*b);
  t.keys.resize(fit);
}

void KvCache::publish(SeqId seq, std::span<const int32_t> tokens) {
  if (!prefix_caching_) return;
  BlockTable& t = table(seq);
  const auto bs = static_cast<size_t>(shape_.block_size);
  const size_t end = std::min(tokens.size(), static_cast<size_t>(t.num_tokens));
  for (size_t i = t.keys.size(); (i + 1) * bs <= end; ++i) {
    const uint64_t parent = i == 0 ? PrefixIndex::kRoot : t.keys[i - 1];
    const std::span<const int32_t> block_tokens = tokens.subspan(i * bs, bs);
    const uint64_t key = PrefixIndex::chain(parent, block_tokens);
    // Another block may hold the same prefix already (two sequences prefilled it side by side):
    // this one then stays private and returns to the pool with its sequence.
    if (index_.insert(t.blocks[i], key, parent, block_tokens)) allocator_.mark_cached(t.blocks[i]);
    t.keys.push_back(key);
  }
}

void KvCache::copy_block(int32_t from, int32_t to) {
  const size_t bytes =
      static_cast<size_t>(shape_.block_size) * static_cast<size_t>(row_elems()) * element_bytes(shape_.dtype);
  for (int32_t l = 0; l < shape_.num_layers; ++l) {
    for (auto* storage : {&k_, &v_}) {
      auto* base = (*storage)[static_cast<size_t>(l)].as<std::byte>();
      kernels::copy_on_device(device_, base + static_cast<size_t>(to) * bytes, base + static_cast<size_t>(from) * bytes,
                              bytes);
    }
  }
}

void KvCache::copy_row(int64_t from, int64_t to) {
  const size_t bytes = static_cast<size_t>(row_elems()) * element_bytes(shape_.dtype);
  for (int32_t l = 0; l < shape_.num_layers; ++l) {
    for (auto* storage : {&k_, &v_}) {
      auto* base = (*storage)[static_cast<size_t>(l)].as<std::byte>();
      kernels::copy_on_device(device_, base + static_cast<size_t>(to) * bytes, base + static_cast<size_t>(from) * bytes,
                              bytes);
    }
  }
}

void KvCache::compact(SeqId seq, int32_t base, std::span<const int32_t> keep) {
  const BlockTable& t = table(seq);
  for (size_t i = 0; i < keep.size(); ++i) {
    const int32_t k = keep[i];
    SPECD_CHECK(k >= static_cast<int32_t>(i) && (i == 0 || k > keep[i - 1]) && base >= 0 && base + k < t.num_tokens,
                ErrorCode::kInternal,
                "KV cache: compacting sequence " + std::to_string(seq) + ": position " + std::to_string(base) + "+" +
                    std::to_string(k) + " cannot move to " + std::to_string(base) + "+" + std::to_string(i) + " of " +
                    std::to_string(t.num_tokens));
  }
  for (size_t i = 0; i < keep.size(); ++i) {
    if (keep[i] == static_cast<int32_t>(i)) continue;
    const int64_t from = slot(seq, base + keep[i]), to = slot(seq, base + static_cast<int32_t>(i));
    copy_row(from, to);
    if (record_copies_) copies_.insert(copies_.end(), {kCopyRow, static_cast<int32_t>(from), static_cast<int32_t>(to)});
  }
}

void KvCache::repeat_copies(std::span<const int32_t> copies) {
  SPECD_CHECK(copies.size() % 3 == 0, ErrorCode::kInternal, "KV cache: copies come as (kind, from, to)");
  const int64_t rows = static_cast<int64_t>(num_blocks()) * shape_.block_size;
  for (size_t i = 0; i < copies.size(); i += 3) {
    const int32_t kind = copies[i];
    const int64_t limit = kind == kCopyBlock ? num_blocks() : rows;
    SPECD_CHECK(kind == kCopyBlock || kind == kCopyRow, ErrorCode::kInternal,
                "KV cache: unknown copy kind " + std::to_string(kind));
    for (size_t j = i + 1; j < i + 3; ++j)
      SPECD_CHECK(copies[j] >= 0 && copies[j] < limit, ErrorCode::kInternal,
                  std::string("KV cache: copied ") + (kind == kCopyBlock ? "block " : "row ") +
                      std::to_string(copies[j]) + " is outside the pool of " + std::to_string(limit));
  }
  for (size_t i = 0; i < copies.size(); i += 3) {
    if (copies[i] == kCopyBlock) {
      copy_block(copies[i + 1], copies[i + 2]);
    } else {
      copy_row(copies[i + 1], copies[i + 2]);
    }
  }
}

void KvCache::fork(SeqId parent, SeqId child, int32_t len) {
  const BlockTable& p = table(parent);
  SPECD_CHECK(len >= 0 && len <= p.num_tokens, ErrorCode::kInternal,
              "KV cache: forking " + std::to_string(len) + " tokens of sequence " + std::to_string(parent) + " of " +
                  std::to_string(p.num_tokens));
  add_sequence(child);
  BlockTable& c = table(child);
  const auto blocks = static_cast<size_t>((len + shape_.block_size - 1) / shape_.block_size);
  c.blocks.assign(p.blocks.begin(), p.blocks.begin() + static_cast<std::ptrdiff_t>(blocks));
  for (int32_t b : c.blocks) allocator_.share(b);
  c.num_tokens = len;
  const auto full = static_cast<size_t>(len / shape_.block_size);
  c.keys.assign(p.keys.begin(), p.keys.begin() + static_cast<std::ptrdiff_t>(std::min(full, p.keys.size())));
}

void KvCache::commit(SeqId seq, int32_t n) {
  BlockTable& t = table(seq);
  SPECD_CHECK(n >= 0 && t.num_tokens + n <= capacity(seq), ErrorCode::kInternal,
              "KV cache: committing " + std::to_string(n) + " tokens to sequence " + std::to_string(seq) +
                  " beyond its reserved capacity " + std::to_string(capacity(seq)));
  t.num_tokens += n;
}

void KvCache::truncate(SeqId seq, int32_t new_len, int32_t keep_room) {
  BlockTable& t = table(seq);
  SPECD_CHECK(new_len >= 0 && new_len <= t.num_tokens && keep_room >= 0, ErrorCode::kInternal,
              "KV cache: truncating sequence " + std::to_string(seq) + " of " + std::to_string(t.num_tokens) +
                  " tokens to " + std::to_string(new_len) + " (room " + std::to_string(keep_room) + ")");
  t.num_tokens = new_len;
  t.keys.resize(std::min(t.keys.size(), static_cast<size_t>(new_len / shape_.block_size)));
  const int64_t keep_tokens = static_cast<int64_t>(new_len) + keep_room;
  const auto keep = static_cast<size_t>((keep_tokens + shape_.block_size - 1) / shape_.block_size);
  while (t.blocks.size() > keep) {
    allocator_.free(t.blocks.back());
    t.blocks.pop_back();
  }
}

void KvCache::mirror(std::span<const MirroredSeq> seqs) {
  seqs_.clear();
  for (const MirroredSeq& m : seqs) {
    for (int32_t b : m.blocks) {
      SPECD_CHECK(
          b >= 0 && b < num_blocks(), ErrorCode::kInternal,
          "KV cache: mirrored block " + std::to_string(b) + " is outside the pool of " + std::to_string(num_blocks()));
    }
    SPECD_CHECK(m.num_tokens >= 0 && static_cast<size_t>(m.num_tokens) <= m.blocks.size() * shape_.block_size,
                ErrorCode::kInternal,
                "KV cache: mirrored sequence " + std::to_string(m.seq) + " is longer than its table");
    seqs_.try_emplace(m.seq, BlockTable{{m.blocks.begin(), m.blocks.end()}, m.num_tokens, {}});
  }
}

std::span<const int32_t> KvCache::block_table(SeqId seq) const {
  return table(seq).blocks;
}

int64_t KvCache::slot(SeqId seq, int32_t pos) const {
  const BlockTable& t = table(seq);
  const auto b = static_cast<size_t>(pos / shape_.block_size);
  SPECD_CHECK(pos >= 0 && b < t.blocks.size(), ErrorCode::kInternal,
              "KV cache: position " + std::to_string(pos) + " of sequence " + std::to_string(seq) + " is not reserved");
  return static_cast<int64_t>(t.blocks[b]) * shape_.block_size + pos % shape_.block_size;
}

}  // namespace specd::kv

#include "specd/kernels/attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cuda_dispatch.hpp"
#include "isa_kernels.hpp"
#include "specd/error.hpp"
#include "specd/kernels/device_memory.hpp"
#include "specd/kernels/parallel.hpp"

namespace specd::kernels {
namespace {

[[noreturn]] void invalid(const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "paged_attention: " + what);
}

void validate(const PagedAttentionParams& p) {
  if (p.q == nullptr || p.k_cache == nullptr || p.v_cache == nullptr || p.out == nullptr || p.query_start == nullptr ||
      p.context_lens == nullptr || p.block_tables == nullptr) {
    invalid("null pointer argument");
  }
  if (p.num_seqs < 0 || p.block_size <= 0 || p.num_heads <= 0 || p.num_kv_heads <= 0 || p.head_dim <= 0 ||
      p.num_blocks <= 0) {
    invalid("non-positive shape argument");
  }
  if (p.kv_dtype != DType::kF32 && p.kv_dtype != DType::kF16 && p.kv_dtype != DType::kBF16) {
    invalid("KV cache dtype " + std::string(dtype_name(p.kv_dtype)) + " is not supported (f32, f16, bf16)");
  }
  if (p.head_dim > cpu::kMaxHeadDim) {
    invalid("head_dim " + std::to_string(p.head_dim) + " exceeds " + std::to_string(cpu::kMaxHeadDim));
  }
  if (p.num_heads % p.num_kv_heads != 0) {
    invalid("num_heads " + std::to_string(p.num_heads) + " is not a multiple of num_kv_heads " +
            std::to_string(p.num_kv_heads));
  }
  if (p.num_seqs > 0 && p.query_start[0] != 0) invalid("query_start[0] must be 0");
  if (p.window < 0) invalid("negative window " + std::to_string(p.window));
  if (!(p.softcap >= 0.0f)) invalid("softcap must be >= 0");
  if ((p.tree_offsets == nullptr) != (p.tree_parents == nullptr)) invalid("tree_offsets and tree_parents go together");
  if (p.tree_offsets != nullptr && p.num_seqs > 0 && p.tree_offsets[0] != 0) invalid("tree_offsets[0] must be 0");
  for (int32_t s = 0; s < p.num_seqs; ++s) {
    const int32_t n_new = p.query_start[s + 1] - p.query_start[s];
    const int32_t ctx = p.context_lens[s];
    if (n_new < 0) invalid("query_start is not non-decreasing at sequence " + std::to_string(s));
    if (n_new > ctx) {
      invalid("sequence " + std::to_string(s) + " has " + std::to_string(n_new) + " new tokens but a context of only " +
              std::to_string(ctx));
    }
    if (p.tree_offsets != nullptr) {
      const int32_t m = p.tree_offsets[s + 1] - p.tree_offsets[s];
      if (m < 0 || m > ctx)
        invalid("sequence " + std::to_string(s) + " has a tree region of " + std::to_string(m) +
                " positions, outside [0, " + std::to_string(ctx) + "]");
      for (int32_t r = 0; r < m; ++r) {
        const int32_t parent = p.tree_parents[p.tree_offsets[s] + r];
        if (parent < -1 || parent >= r)
          invalid("sequence " + std::to_string(s) + ": tree node " + std::to_string(r) + " has parent " +
                  std::to_string(parent) + ", outside [-1, " + std::to_string(r) + ")");
      }
    }
    const int32_t blocks = (ctx + p.block_size - 1) / p.block_size;
    if (blocks > p.block_table_stride) {
      invalid("sequence " + std::to_string(s) + " needs " + std::to_string(blocks) +
              " blocks but the block table holds " + std::to_string(p.block_table_stride));
    }
    for (int32_t b = 0; b < blocks; ++b) {
      const int32_t id = p.block_tables[static_cast<int64_t>(s) * p.block_table_stride + b];
      if (id < 0 || id >= p.num_blocks) {
        invalid("sequence " + std::to_string(s) + " maps block " + std::to_string(b) + " to " + std::to_string(id) +
                ", outside [0, " + std::to_string(p.num_blocks) + ")");
      }
    }
  }
}

// Offset of token position `pos`, kv head `g` of sequence `s` in the cache.
inline int64_t cache_offset(const PagedAttentionParams& p, int32_t s, int32_t pos, int32_t g) {
  const int32_t block = p.block_tables[static_cast<int64_t>(s) * p.block_table_stride + pos / p.block_size];
  return ((static_cast<int64_t>(block) * p.block_size + pos % p.block_size) * p.num_kv_heads + g) * p.head_dim;
}

// One cached row (head_dim elements at element offset `off`), exactly widened to F32.
std::vector<float> reference_row(const PagedAttentionParams& p, const void* cache, int64_t off) {
  std::vector<float> out(static_cast<size_t>(p.head_dim));
  const size_t elem = p.kv_dtype == DType::kF32 ? 4 : 2;
  cpu::kScalarKernels.to_f32[static_cast<int>(p.kv_dtype)](
      static_cast<const uint8_t*>(cache) + static_cast<size_t>(off) * elem, out.data(), p.head_dim);
  return out;
}

// The keys of new token t of sequence s as a linear run: `len` logical positions, of which the
// first `linear` are the cache positions themselves and the rest (tree ancestors, root first)
// are stored at cache positions path[0 .. len - linear).
struct Keys {
  int32_t len = 0;
  int32_t linear = 0;
  const int32_t* path = nullptr;
  int32_t first = 0;  // the first logical position the token sees (its sliding window)
};

// The soft-capped score (PagedAttentionParams::softcap).
inline float soft_cap(float x, float cap) {
  return cap * std::tanh(x / cap);
}

Keys keys_of(const PagedAttentionParams& p, int32_t s, int32_t t, std::vector<int32_t>& path) {
  const int32_t n_new = p.query_start[s + 1] - p.query_start[s];
  const int32_t pos = p.context_lens[s] - n_new + (t - p.query_start[s]);  // its cache position
  const int32_t m = p.tree_offsets == nullptr ? 0 : p.tree_offsets[s + 1] - p.tree_offsets[s];
  const int32_t base = p.context_lens[s] - m;
  Keys keys;
  if (pos < base) {
    keys = {pos + 1, pos + 1, nullptr};
  } else {
    const int32_t* parents = p.tree_parents + p.tree_offsets[s];
    path.clear();
    for (int32_t r = pos - base; r >= 0; r = parents[r]) path.push_back(base + r);  // parents[r] < r: ends
    std::reverse(path.begin(), path.end());
    keys = {base + static_cast<int32_t>(path.size()), base, path.data()};
  }
  if (p.window > 0) keys.first = std::max(0, keys.len - p.window);
  return keys;
}

// CUDA: the call's metadata (query_start, context_lens, block_tables, the tree arrays) is device
// memory like the rest. paged_attention_cuda copies it back to validate the call as on the CPU
// and to lay out each token's keys (keys_of), which the kernel reads: one synchronisation per
// call. An AttentionPlan does that once per batch, from host copies.
#ifdef SPECD_WITH_CUDA
// Each new token's keys as the kernel reads them. The window is left to each call (the kernel
// applies it), so one layout serves layers of different windows.
void lay_out_keys(const PagedAttentionParams& h, std::vector<cuda::TokenKeys>& keys, std::vector<int32_t>& paths) {
  PagedAttentionParams unwindowed = h;
  unwindowed.window = 0;
  std::vector<int32_t> path;
  keys.clear();
  paths.clear();
  for (int32_t s = 0; s < h.num_seqs; ++s)
    for (int32_t t = h.query_start[s]; t < h.query_start[s + 1]; ++t) {
      const Keys k = keys_of(unwindowed, s, t, path);
      keys.push_back({s, k.len, k.linear, k.first, static_cast<int64_t>(paths.size())});
      if (k.len > k.linear) paths.insert(paths.end(), k.path, k.path + (k.len - k.linear));
    }
}

void paged_attention_cuda(const PagedAttentionParams& p) {
  if (p.query_start == nullptr || p.context_lens == nullptr || p.block_tables == nullptr)
    invalid("null pointer argument");
  if (p.num_seqs < 0 || p.block_table_stride < 0) invalid("non-positive shape argument");
  std::vector<int32_t> qs, ctx, tables, toff, tpar;
  auto fetch = [](std::vector<int32_t>& v, const int32_t* src, int64_t n) {
    v.resize(static_cast<size_t>(n));
    if (n > 0) copy_to_host(Device::kCuda, v.data(), src, static_cast<size_t>(n) * sizeof(int32_t));
    return v.data();
  };
  PagedAttentionParams h = p;
  h.query_start = fetch(qs, p.query_start, int64_t{p.num_seqs} + 1);
  h.context_lens = fetch(ctx, p.context_lens, p.num_seqs);
  h.block_tables = fetch(tables, p.block_tables, int64_t{p.num_seqs} * p.block_table_stride);
  if (p.tree_offsets != nullptr && p.tree_parents != nullptr) {
    h.tree_offsets = fetch(toff, p.tree_offsets, int64_t{p.num_seqs} + 1);
    int64_t total = 0;
    for (int32_t c : ctx) total += std::max(c, 0);
    if (toff.back() < 0 || toff.back() > total)
      invalid("tree_offsets ends at " + std::to_string(toff.back()) + ", outside [0, " + std::to_string(total) + "]");
    h.tree_parents = fetch(tpar, p.tree_parents, toff.back());
  }
  validate(h);
  if (p.num_seqs == 0) return;
  std::vector<cuda::TokenKeys> keys;
  std::vector<int32_t> paths;
  lay_out_keys(h, keys, paths);
  cuda::paged_attention(p, keys.data(), static_cast<int32_t>(keys.size()), paths.data(),
                        static_cast<int64_t>(paths.size()));
}
#endif

// One call's work on the CPU, item by item. An item is KV head g of a run of new tokens
// [t0, t1) of sequence s:
//  - a run of several tokens whose keys are the cache positions themselves (prefill chunks,
//    scoring rows of a chain; no tree node, no sliding window): token t sees [0, len_t), len_t
//    growing by one per token, so the run's tokens share the keys [0, len_t0). Their query heads
//    (t1 - t0) x group attend to those as one group: each key row is read and widened once for
//    all of them (5 scoring rows read the cache once instead of 5 times), and each token then
//    takes its own last keys alone;
//  - a single token (any token: tree nodes gather their ancestors' rows, a window cuts the front).
// Per (query head, key) the kernels run the same instructions whatever the group and however the
// keys are split into calls (scores: one dot product per key; values: one FMA per key and
// element, in key order), and the softmax is per query head, so a token's output has the same
// bits whether it runs alone or in a run: decode and scoring rows stay bit-identical.
class Attention {
 public:
  explicit Attention(const PagedAttentionParams& p)
      : p_(p),
        group_(p.num_heads / p.num_kv_heads),
        hd_(p.head_dim),
        elem_(p.kv_dtype == DType::kF32 ? 4 : 2),
        stride_(static_cast<int64_t>(p.num_kv_heads) * p.head_dim),
        isa_(cpu::active_kernels()),
        scores_fn_(isa_.attn_scores[static_cast<int>(p.kv_dtype)]),
        values_fn_(isa_.attn_values[static_cast<int>(p.kv_dtype)]) {}

  struct Item {
    int32_t s, t0, t1, g;
  };
  // Tokens per run at most: scores of a run take (t1 - t0) x group x len floats.
  static constexpr int32_t kRunTokens = 8;

  // The call's items: runs where a sequence's tokens allow them, else single tokens.
  void items(std::vector<Item>& out) const {
    out.clear();
    for (int32_t s = 0; s < p_.num_seqs; ++s) {
      const int32_t q0 = p_.query_start[s], q1 = p_.query_start[s + 1];
      const int32_t n_new = q1 - q0;
      const int32_t m = p_.tree_offsets == nullptr ? 0 : p_.tree_offsets[s + 1] - p_.tree_offsets[s];
      // Tokens at cache positions below the tree region's start are linear.
      const int32_t linear_end =
          p_.window > 0 ? q0 : std::min(q1, q0 + (p_.context_lens[s] - m) - (p_.context_lens[s] - n_new));
      // Runs short enough that the sequence's items keep every thread busy (one KV head: MQA).
      const int32_t run = std::clamp(n_new * p_.num_kv_heads / std::max(1, num_threads()), 1, kRunTokens);
      for (int32_t t = q0; t < q1;) {
        const int32_t t1 = t < linear_end ? std::min(linear_end, t + run) : t + 1;
        for (int32_t g = 0; g < p_.num_kv_heads; ++g) out.push_back({s, t, t1, g});
        t = t1;
      }
    }
  }

  void run(const Item& it) {
    const Keys keys = keys_of(p_, it.s, it.t0, path_);  // the item's first token's
    if (it.t1 - it.t0 > 1 || (keys.linear == keys.len && keys.first == 0)) {
      attend_run(it, keys.len);
    } else {
      attend_token(it.s, it.t0, it.g, keys);
    }
  }

 private:
  const float* q_of(int32_t t, int32_t g) const {
    return p_.q + (static_cast<int64_t>(t) * p_.num_heads + static_cast<int64_t>(g) * group_) * hd_;
  }
  float* out_of(int32_t t, int32_t g) const {
    return p_.out + (static_cast<int64_t>(t) * p_.num_heads + static_cast<int64_t>(g) * group_) * hd_;
  }
  // The cache rows of logical positions [j0, ...) within one block, in place.
  const uint8_t* rows_at(const void* cache, int32_t s, int32_t j0, int32_t g) const {
    const int32_t* table = p_.block_tables + static_cast<int64_t>(s) * p_.block_table_stride;
    const int64_t row0 = static_cast<int64_t>(table[j0 / p_.block_size]) * p_.block_size + j0 % p_.block_size;
    return static_cast<const uint8_t*>(cache) + static_cast<size_t>((row0 * p_.num_kv_heads + g) * hd_) * elem_;
  }
  // Calls fn(j0, nn) for the pieces of [a, b) that lie within one cache block each.
  template <class Fn>
  void pieces(int32_t a, int32_t b, Fn&& fn) const {
    for (int32_t j0 = a; j0 < b; j0 = (j0 / p_.block_size + 1) * p_.block_size)
      fn(j0, std::min((j0 / p_.block_size + 1) * p_.block_size, b) - j0);
  }
  // Soft cap, then softmax of one query head's scores over len keys.
  void softmax(float* sc, int32_t len) const {
    if (p_.softcap > 0.0f)
      for (int32_t j = 0; j < len; ++j) sc[j] = soft_cap(sc[j], p_.softcap);
    float m = -std::numeric_limits<float>::infinity();
    for (int32_t j = 0; j < len; ++j) m = std::max(m, sc[j]);
    const float inv = 1.0f / isa_.exp_sum(sc, len, m);
    for (int32_t j = 0; j < len; ++j) sc[j] *= inv;
  }

  // shared: the first token's keys, [0, shared); token i's are [0, shared + i).
  void attend_run(const Item& it, int32_t shared) {
    const int32_t nt = it.t1 - it.t0, rows = nt * group_, last = shared + nt - 1;
    const auto H = static_cast<size_t>(hd_), gh = static_cast<size_t>(group_) * H;
    q_.resize(static_cast<size_t>(rows) * H);
    for (int32_t i = 0; i < nt; ++i) std::memcpy(q_.data() + i * gh, q_of(it.t0 + i, it.g), gh * sizeof(float));
    scores_.resize(static_cast<size_t>(rows) * static_cast<size_t>(last));
    float* sc = scores_.data();
    pieces(0, shared, [&](int32_t j0, int32_t nn) {
      scores_fn_(q_.data(), rows, hd_, rows_at(p_.k_cache, it.s, j0, it.g), stride_, nn, p_.scale, sc + j0, last);
    });
    for (int32_t i = 1; i < nt; ++i)  // token i's own keys [shared, shared + i)
      pieces(shared, shared + i, [&](int32_t j0, int32_t nn) {
        scores_fn_(q_.data() + i * gh, group_, hd_, rows_at(p_.k_cache, it.s, j0, it.g), stride_, nn, p_.scale,
                   sc + static_cast<size_t>(i * group_) * last + j0, last);
      });
    for (int32_t r = 0; r < rows; ++r) softmax(sc + static_cast<size_t>(r) * last, shared + r / group_);
    o_.assign(static_cast<size_t>(rows) * H, 0.0f);
    pieces(0, shared, [&](int32_t j0, int32_t nn) {
      values_fn_(sc + j0, last, rows, hd_, rows_at(p_.v_cache, it.s, j0, it.g), stride_, nn, o_.data());
    });
    for (int32_t i = 1; i < nt; ++i)
      pieces(shared, shared + i, [&](int32_t j0, int32_t nn) {
        values_fn_(sc + static_cast<size_t>(i * group_) * last + j0, last, group_, hd_,
                   rows_at(p_.v_cache, it.s, j0, it.g), stride_, nn, o_.data() + i * gh);
      });
    for (int32_t i = 0; i < nt; ++i) std::memcpy(out_of(it.t0 + i, it.g), o_.data() + i * gh, gh * sizeof(float));
  }

  // One token whose keys may be gathered (tree ancestors) or cut (a sliding window).
  void attend_token(int32_t s, int32_t t, int32_t g, const Keys& keys) {
    const int32_t first = keys.first, len = keys.len - first;  // scores of positions [first, keys.len)
    if (scores_.size() < static_cast<size_t>(group_) * len) scores_.resize(static_cast<size_t>(group_) * len);
    gathered_.resize(static_cast<size_t>(p_.block_size) * static_cast<size_t>(hd_) * elem_);
    // The rows of logical positions [j0, j0 + nn) (within one cache block) and their stride: in
    // place while they are linear, else gathered (tree ancestors), so that every kernel call
    // covers the same logical rows as for a chain.
    auto block = [&](const void* cache, int32_t j0, int32_t nn, int64_t& row_stride) -> const uint8_t* {
      if (j0 + nn <= keys.linear) {
        row_stride = stride_;
        return rows_at(cache, s, j0, g);
      }
      row_stride = hd_;
      for (int32_t j = 0; j < nn; ++j) {
        const int32_t x = j0 + j;
        const int32_t pos = x < keys.linear ? x : keys.path[x - keys.linear];
        std::memcpy(gathered_.data() + static_cast<size_t>(j) * hd_ * elem_,
                    static_cast<const uint8_t*>(cache) + static_cast<size_t>(cache_offset(p_, s, pos, g)) * elem_,
                    static_cast<size_t>(hd_) * elem_);
      }
      return gathered_.data();
    };
    pieces(first, keys.len, [&](int32_t j0, int32_t nn) {
      int64_t row_stride = 0;
      const uint8_t* rows = block(p_.k_cache, j0, nn, row_stride);
      scores_fn_(q_of(t, g), group_, hd_, rows, row_stride, nn, p_.scale, scores_.data() + (j0 - first), len);
    });
    float* o0 = out_of(t, g);
    for (int32_t h = 0; h < group_; ++h) {
      softmax(scores_.data() + static_cast<size_t>(h) * len, len);
      std::fill(o0 + h * hd_, o0 + (h + 1) * hd_, 0.0f);
    }
    pieces(first, keys.len, [&](int32_t j0, int32_t nn) {
      int64_t row_stride = 0;
      const uint8_t* rows = block(p_.v_cache, j0, nn, row_stride);
      values_fn_(scores_.data() + (j0 - first), len, group_, hd_, rows, row_stride, nn, o0);
    });
  }

  const PagedAttentionParams& p_;
  const int32_t group_;
  const int64_t hd_;
  const size_t elem_;
  const int64_t stride_;  // elements between rows of a block
  const cpu::IsaKernels& isa_;
  const cpu::AttnScoresFn scores_fn_;
  const cpu::AttnValuesFn values_fn_;
  // The thread's buffers, kept between calls (no allocation per step).
  struct Buffers {
    std::vector<float> q, o, scores;
    std::vector<int32_t> path;
    std::vector<uint8_t> gathered;
  };
  static Buffers& buffers() {
    thread_local Buffers b;
    return b;
  }
  Buffers& b_ = buffers();
  std::vector<float>& q_ = b_.q;
  std::vector<float>& o_ = b_.o;
  std::vector<float>& scores_ = b_.scores;
  std::vector<int32_t>& path_ = b_.path;
  std::vector<uint8_t>& gathered_ = b_.gathered;
};

}  // namespace

void tree_depths(const int32_t* parents, int32_t m, int32_t* depth) {
  for (int32_t r = 0; r < m; ++r) {
    const int32_t parent = parents[r];
    if (parent < -1 || parent >= r)
      invalid("tree node " + std::to_string(r) + " has parent " + std::to_string(parent) + ", outside [-1, " +
              std::to_string(r) + ")");
    depth[r] = parent < 0 ? 0 : depth[parent] + 1;
  }
}

void paged_attention(Device device, const PagedAttentionParams& p) {
#ifdef SPECD_WITH_CUDA
  if (device == Device::kCuda) return paged_attention_cuda(p);
#endif
  detail::require_cpu(device, "paged_attention");
  validate(p);
  if (p.num_seqs == 0) return;
  thread_local std::vector<Attention::Item> call_items;
  // The workers read the caller's list (a lambda names a thread_local, it does not capture it).
  const std::vector<Attention::Item>& items = call_items;
  Attention(p).items(call_items);
  parallel_for(static_cast<int64_t>(items.size()), 1, [&](int64_t begin, int64_t end) {
    Attention a(p);
    for (int64_t i = begin; i < end; ++i) a.run(items[static_cast<size_t>(i)]);
  });
}

void AttentionPlan::prepare(Device device, const PagedAttentionParams& host) {
  num_seqs_ = -1;
  validate(host);
  device_ = device;
  num_tokens_ = host.num_seqs > 0 ? host.query_start[host.num_seqs] : 0;
#ifdef SPECD_WITH_CUDA
  if (device == Device::kCuda) {
    std::vector<cuda::TokenKeys> keys;
    std::vector<int32_t> paths;
    lay_out_keys(host, keys, paths);
    const size_t key_bytes = keys.size() * sizeof(cuda::TokenKeys);
    paths_at_ = (key_bytes + 15) / 16 * 16;
    const size_t bytes = paths_at_ + paths.size() * sizeof(int32_t);
    if (buf_.size() < bytes || buf_.device() != device) buf_ = DeviceBuffer(device, std::max<size_t>(bytes, 256));
    copy_to_device(device, buf_.data(), keys.data(), key_bytes);
    if (!paths.empty())
      copy_to_device(device, static_cast<uint8_t*>(buf_.data()) + paths_at_, paths.data(),
                     paths.size() * sizeof(int32_t));
  }
#endif
  num_seqs_ = host.num_seqs;
}

void paged_attention(Device device, const PagedAttentionParams& p, const AttentionPlan& plan) {
  if (plan.num_seqs_ < 0 || plan.num_seqs_ != p.num_seqs || plan.device_ != device)
    invalid("the plan was not prepared for this batch on " + std::string(device_name(device)));
#ifdef SPECD_WITH_CUDA
  if (device == Device::kCuda) {
    if (p.q == nullptr || p.k_cache == nullptr || p.v_cache == nullptr || p.out == nullptr)
      invalid("null pointer argument");
    if (p.window < 0) invalid("negative window " + std::to_string(p.window));
    if (plan.num_tokens_ == 0) return;
    const auto* base = static_cast<const uint8_t*>(plan.buf_.data());
    cuda::paged_attention_prepared(p, reinterpret_cast<const cuda::TokenKeys*>(base), plan.num_tokens_,
                                   reinterpret_cast<const int32_t*>(base + plan.paths_at_));
    return;
  }
#endif
  paged_attention(device, p);
}

void write_kv(Device device, const float* k, const float* v, int64_t n, int64_t num_kv_heads, int64_t head_dim,
              const float* cos, const float* sin, const int64_t* slots, DType kv_dtype, void* k_cache, void* v_cache) {
  if (kv_dtype != DType::kF32 && kv_dtype != DType::kF16 && kv_dtype != DType::kBF16)
    invalid("KV cache dtype " + std::string(dtype_name(kv_dtype)) + " is not supported (f32, f16, bf16)");
  if ((cos == nullptr) != (sin == nullptr) || head_dim % 2 != 0) invalid("write_kv: bad rotary tables or head_dim");
  if constexpr (kWithCuda)
    if (device == Device::kCuda)
      return cuda::write_kv(k, v, n, num_kv_heads, head_dim, cos, sin, slots, kv_dtype, k_cache, v_cache);
  detail::require_cpu(device, "write_kv");
  const int64_t row = num_kv_heads * head_dim, half = head_dim / 2;
  const size_t row_bytes = static_cast<size_t>(row) * (kv_dtype == DType::kF32 ? 4 : 2);
  const cpu::NarrowFn narrow = cpu::active_kernels().narrow[static_cast<int>(kv_dtype)];
  auto store = [&](const float* src, uint8_t* dst) {
    if (kv_dtype == DType::kF32) {
      std::memcpy(dst, src, row_bytes);
    } else {
      narrow(src, reinterpret_cast<uint16_t*>(dst), row);
    }
  };
  parallel_for(n, std::max<int64_t>(1, 8192 / row), [&](int64_t b, int64_t e) {
    thread_local std::vector<float> rotated;
    if (rotated.size() < static_cast<size_t>(row)) rotated.resize(static_cast<size_t>(row));
    for (int64_t t = b; t < e; ++t) {
      const float* kt = k + t * row;
      if (cos != nullptr) {
        const float* c = cos + t * half;
        const float* s = sin + t * half;
        for (int64_t h = 0; h < num_kv_heads; ++h) {
          const float* x = kt + h * head_dim;
          float* y = rotated.data() + h * head_dim;
          for (int64_t j = 0; j < half; ++j) {
            y[j] = x[j] * c[j] - x[j + half] * s[j];
            y[j + half] = x[j + half] * c[j] + x[j] * s[j];
          }
        }
        kt = rotated.data();
      }
      const auto slot = static_cast<size_t>(slots[t]);
      store(kt, static_cast<uint8_t*>(k_cache) + slot * row_bytes);
      store(v + t * row, static_cast<uint8_t*>(v_cache) + slot * row_bytes);
    }
  });
}

namespace reference {
void paged_attention(const PagedAttentionParams& p) {
  validate(p);
  const int32_t group = p.num_heads / p.num_kv_heads;
  const int64_t hd = p.head_dim;
  std::vector<int32_t> path;
  for (int32_t s = 0; s < p.num_seqs; ++s) {
    const int32_t n_new = p.query_start[s + 1] - p.query_start[s];
    for (int32_t i = 0; i < n_new; ++i) {
      const int32_t t = p.query_start[s] + i;
      const Keys keys = keys_of(p, s, t, path);
      auto key_pos = [&](int32_t x) { return x < keys.linear ? x : keys.path[x - keys.linear]; };
      const int32_t pos = keys.len - 1;
      for (int32_t h = 0; h < p.num_heads; ++h) {
        const int32_t g = h / group;
        const float* q = p.q + (static_cast<int64_t>(t) * p.num_heads + h) * hd;
        std::vector<double> sc(static_cast<size_t>(pos) + 1, 0.0);
        double m = -std::numeric_limits<double>::infinity();
        for (int32_t j = keys.first; j <= pos; ++j) {
          const std::vector<float> k = reference_row(p, p.k_cache, cache_offset(p, s, key_pos(j), g));
          double d = 0.0;
          for (int64_t e = 0; e < hd; ++e) d += static_cast<double>(q[e]) * k[static_cast<size_t>(e)];
          d *= p.scale;
          if (p.softcap > 0.0f) d = p.softcap * std::tanh(d / p.softcap);
          sc[static_cast<size_t>(j)] = d;
          m = std::max(m, d);
        }
        double sum = 0.0;
        for (int32_t j = keys.first; j <= pos; ++j) {
          double& x = sc[static_cast<size_t>(j)];
          x = std::exp(x - m);
          sum += x;
        }
        float* o = p.out + (static_cast<int64_t>(t) * p.num_heads + h) * hd;
        std::vector<double> acc(static_cast<size_t>(hd), 0.0);
        for (int32_t j = keys.first; j <= pos; ++j) {
          const std::vector<float> v = reference_row(p, p.v_cache, cache_offset(p, s, key_pos(j), g));
          for (int64_t e = 0; e < hd; ++e)
            acc[static_cast<size_t>(e)] += sc[static_cast<size_t>(j)] * v[static_cast<size_t>(e)];
        }
        for (int64_t e = 0; e < hd; ++e) o[e] = static_cast<float>(acc[static_cast<size_t>(e)] / sum);
      }
    }
  }
}
}  // namespace reference

}  // namespace specd::kernels

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>

#include "kernel_test_util.hpp"
#include "specd/error.hpp"
#include "specd/kernels/attention.hpp"
#include "specd/kernels/convert.hpp"

namespace specd::kernels {
namespace {
using testing::max_rel_error;
using testing::random_vector;

// A batch over a shuffled block pool: sequence s has context ctx[s] of which n_new[s] are new.
struct Batch {
  int32_t block_size, num_heads, num_kv_heads, head_dim, num_blocks, stride;
  std::vector<int32_t> ctx, n_new, query_start, tables;
  std::vector<float> q, k, v;

  Batch(std::vector<int32_t> c, std::vector<int32_t> n, int32_t bs, int32_t nh, int32_t nkv, int32_t hd, uint32_t seed)
      : block_size(bs), num_heads(nh), num_kv_heads(nkv), head_dim(hd), ctx(std::move(c)), n_new(std::move(n)) {
    stride = 0;
    int32_t total_blocks = 0;
    for (int32_t len : ctx) {
      const int32_t b = (len + bs - 1) / bs;
      stride = std::max(stride, b);
      total_blocks += b;
    }
    num_blocks = total_blocks + 3;  // a few unused blocks
    std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
    tables.assign(ctx.size() * static_cast<size_t>(stride), -1);
    size_t next = 0;
    query_start = {0};
    for (size_t s = 0; s < ctx.size(); ++s) {
      for (int32_t b = 0; b < (ctx[s] + bs - 1) / bs; ++b) tables[s * stride + b] = ids[next++];
      query_start.push_back(query_start.back() + n_new[s]);
    }
    const size_t cache = static_cast<size_t>(num_blocks) * bs * nkv * hd;
    k = random_vector(cache, seed + 1);
    v = random_vector(cache, seed + 2);
    q = random_vector(static_cast<size_t>(query_start.back()) * nh * hd, seed + 3, -2, 2);
  }

  PagedAttentionParams params(float* out) const {
    PagedAttentionParams p;
    p.q = q.data();
    p.k_cache = k.data();
    p.v_cache = v.data();
    p.out = out;
    p.num_seqs = static_cast<int32_t>(ctx.size());
    p.query_start = query_start.data();
    p.context_lens = ctx.data();
    p.block_tables = tables.data();
    p.block_table_stride = stride;
    p.num_blocks = num_blocks;
    p.block_size = block_size;
    p.num_heads = num_heads;
    p.num_kv_heads = num_kv_heads;
    p.head_dim = head_dim;
    p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    return p;
  }
  size_t out_size() const { return static_cast<size_t>(query_start.back()) * num_heads * head_dim; }
};

// The batch's keys and values stored in the cache dtype `dt`, and the batch's params reading them.
struct StoredCache {
  DType dt;
  std::vector<uint8_t> k, v;
  StoredCache(const Batch& b, DType dtype) : dt(dtype), k(b.k.size() * 4), v(b.v.size() * 4) {
    from_f32(Device::kCpu, b.k.data(), dt, k.data(), static_cast<int64_t>(b.k.size()));
    from_f32(Device::kCpu, b.v.data(), dt, v.data(), static_cast<int64_t>(b.v.size()));
  }
  PagedAttentionParams params(const Batch& b, float* out) const {
    PagedAttentionParams p = b.params(out);
    p.k_cache = k.data();
    p.v_cache = v.data();
    p.kv_dtype = dt;
    return p;
  }
};

// paged_attention of host-memory params on `device`: on CUDA every array goes through a device
// copy and the output comes back into p.out. With `plan`, through an AttentionPlan prepared
// from the host-memory params (the model runtime's way: one layout for every layer).
void attend(Device device, const PagedAttentionParams& p, AttentionPlan* plan = nullptr) {
  if (plan != nullptr) plan->prepare(device, p);
  if (device == Device::kCpu) return plan != nullptr ? paged_attention(device, p, *plan) : paged_attention(device, p);
  const int32_t tokens = p.num_seqs > 0 ? p.query_start[p.num_seqs] : 0;
  const size_t elem = p.kv_dtype == DType::kF32 ? 4 : 2;
  const auto cache_bytes = static_cast<size_t>(p.num_blocks) * p.block_size * p.num_kv_heads * p.head_dim * elem;
  const auto qn = static_cast<size_t>(tokens) * p.num_heads * p.head_dim;
  auto ints = [](const int32_t* v, int64_t n) {
    return v == nullptr ? std::vector<int32_t>() : std::vector<int32_t>(v, v + n);
  };
  auto bytes = [](const void* v, size_t n) {
    const auto* b = static_cast<const uint8_t*>(v);
    return std::vector<uint8_t>(b, b + n);
  };
  const testing::Mirror<float> q(device, std::vector<float>(p.q, p.q + qn)), out(device, std::vector<float>(qn));
  const testing::Mirror<uint8_t> kc(device, bytes(p.k_cache, cache_bytes)), vc(device, bytes(p.v_cache, cache_bytes));
  const testing::Mirror<int32_t> qs(device, ints(p.query_start, p.num_seqs + 1)),
      ctx(device, ints(p.context_lens, p.num_seqs)),
      tables(device, ints(p.block_tables, int64_t{p.num_seqs} * p.block_table_stride)),
      toff(device, ints(p.tree_offsets, p.num_seqs + 1)),
      tpar(device, ints(p.tree_parents, p.tree_offsets != nullptr ? p.tree_offsets[p.num_seqs] : 0));
  PagedAttentionParams d = p;
  d.q = q.get();
  d.k_cache = kc.get();
  d.v_cache = vc.get();
  d.out = out.get();
  d.query_start = qs.get();
  d.context_lens = ctx.get();
  d.block_tables = tables.get();
  d.tree_offsets = p.tree_offsets != nullptr ? toff.get() : nullptr;
  d.tree_parents = p.tree_parents != nullptr ? tpar.get() : nullptr;
  if (plan != nullptr) {
    paged_attention(device, d, *plan);
  } else {
    paged_attention(device, d);
  }
  const std::vector<float> got = out.read();
  std::copy(got.begin(), got.end(), p.out);
}

class PagedAttentionTest : public ::testing::TestWithParam<Device> {};

TEST_P(PagedAttentionTest, MixedPrefillDecodeAndScoringMatchReference) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  // prefill of 23, decode at 40, 5-token scoring at 37, decode at 1; GQA 8 heads / 2 kv heads.
  const Batch b({23, 40, 37, 1}, {23, 1, 5, 1}, 4, 8, 2, 32, 31);
  std::vector<float> got(b.out_size()), want(b.out_size());
  attend(GetParam(), b.params(got.data()));
  reference::paged_attention(b.params(want.data()));
  EXPECT_LT(max_rel_error(got, want), 1e-5);
}

TEST_P(PagedAttentionTest, MultiHeadAndMultiQueryShapes) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  for (auto [nh, nkv] : {std::pair{4, 4}, std::pair{6, 1}}) {
    const Batch b({17, 64}, {3, 64}, 16, nh, nkv, 64, 41);
    std::vector<float> got(b.out_size()), want(b.out_size());
    attend(GetParam(), b.params(got.data()));
    reference::paged_attention(b.params(want.data()));
    EXPECT_LT(max_rel_error(got, want), 1e-5) << nh << "/" << nkv;
  }
}

TEST_P(PagedAttentionTest, FirstTokenReturnsItsValue) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  const Batch b({1}, {1}, 2, 2, 1, 8, 51);
  std::vector<float> out(b.out_size());
  attend(GetParam(), b.params(out.data()));
  const size_t off = static_cast<size_t>(b.tables[0]) * 2 * 1 * 8;
  for (int h = 0; h < 2; ++h) {
    for (int e = 0; e < 8; ++e) EXPECT_FLOAT_EQ(out[h * 8 + e], b.v[off + e]);
  }
}

TEST_P(PagedAttentionTest, IsCausalAmongNewTokens) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  Batch b({12}, {4}, 4, 2, 2, 16, 61);
  std::vector<float> before(b.out_size()), after(b.out_size());
  attend(GetParam(), b.params(before.data()));
  // Change K/V of the last position (11): only the last new token may see it.
  const int32_t block = b.tables[11 / 4];
  for (int32_t g = 0; g < 2; ++g) {
    for (int32_t e = 0; e < 16; ++e) {
      const size_t off = ((static_cast<size_t>(block) * 4 + 3) * 2 + g) * 16 + e;
      b.k[off] += 1.0f;
      b.v[off] += 1.0f;
    }
  }
  attend(GetParam(), b.params(after.data()));
  const size_t per_token = 2 * 16;
  for (size_t i = 0; i < 3 * per_token; ++i) EXPECT_EQ(before[i], after[i]) << i;
  bool changed = false;
  for (size_t i = 3 * per_token; i < 4 * per_token; ++i) changed |= before[i] != after[i];
  EXPECT_TRUE(changed);
}

TEST_P(PagedAttentionTest, RejectsBadBlockIds) {
  SPECD_SKIP_IF_UNAVAILABLE(GetParam());
  Batch b({9}, {1}, 4, 2, 2, 8, 71);
  b.tables[2] = b.num_blocks;  // position 8 maps outside the pool
  std::vector<float> out(b.out_size());
  try {
    attend(GetParam(), b.params(out.data()));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, PagedAttentionTest, ::testing::ValuesIn(testing::all_devices()),
                         testing::device_param_name);

// 16-bit caches on every ISA level: the reference widens the same stored values exactly, so
// only the summation order differs.
using KvParam = std::tuple<Backend, DType>;
class PagedAttentionKvTest : public ::testing::TestWithParam<KvParam> {};

TEST_P(PagedAttentionKvTest, MatchesReferenceOnTheStoredCache) {
  const auto [backend, dt] = GetParam();
  SPECD_USE_BACKEND(backend);
  // head_dim 64 with 4 and 8 query heads per KV head, and 128 with 2 and 4, take the grouped
  // kernels of the AVX-512 levels (attn_values_heads, attn_scores_heads); 64 and 128 with 1 or 3
  // heads per KV head (multi-head attention) their fixed-width ones (attn_scores_fixed).
  struct Shape {
    int32_t nh, nkv, hd;
  };
  for (const Shape sh : {Shape{8, 2, 32}, Shape{4, 4, 32}, Shape{8, 2, 64}, Shape{16, 2, 64}, Shape{4, 2, 128},
                         Shape{8, 2, 128}, Shape{4, 4, 64}, Shape{6, 2, 64}, Shape{3, 3, 128}, Shape{3, 1, 128}}) {
    const auto [nh, nkv, hd] = sh;
    const Batch b({23, 40, 37, 1}, {23, 1, 5, 1}, 4, nh, nkv, hd, 81);
    const StoredCache cache(b, dt);
    std::vector<float> got(b.out_size()), want(b.out_size());
    PagedAttentionParams p = cache.params(b, got.data());
    attend(backend.device, p);
    p.out = want.data();
    reference::paged_attention(p);
    EXPECT_LT(max_rel_error(got, want), 1e-5) << nh << "/" << nkv << " head_dim " << hd;
  }
}

// A run of new tokens (k + 1 scoring rows, a prefill chunk) shares its keys' common prefix in
// one pass over the cache; each token's output must still be, bit for bit, what it gets alone as
// a decode token (greedy speculation depends on it). 9 new tokens over contexts that end inside
// and on block boundaries, every head_dim with a fixed-width kernel and one without, GQA, MHA and
// MQA (one KV head: shorter runs, so that the items keep both threads busy).
TEST_P(PagedAttentionKvTest, RunOfNewTokensEqualsEachTokenAloneBitForBit) {
  const auto [backend, dt] = GetParam();
  if (backend.device != Device::kCpu) GTEST_SKIP() << "the runs are the CPU's";
  SPECD_USE_BACKEND(backend);
  struct Shape {
    int32_t nh, nkv, hd;
  };
  for (const Shape sh :
       {Shape{8, 2, 64}, Shape{4, 4, 64}, Shape{4, 2, 128}, Shape{3, 3, 128}, Shape{6, 2, 32}, Shape{4, 1, 64}})
    for (const int32_t ctx : {9, 16, 45, 64}) {
      const auto [nh, nkv, hd] = sh;
      const int32_t n_new = 9;
      const Batch b({ctx}, {n_new}, 16, nh, nkv, hd, 131);
      const StoredCache cache(b, dt);
      std::vector<float> run(b.out_size()), alone(b.out_size());
      PagedAttentionParams p = cache.params(b, run.data());
      paged_attention(Device::kCpu, p);
      const size_t per_token = static_cast<size_t>(nh) * hd;
      for (int32_t t = 0; t < n_new; ++t) {  // token t alone: a decode at context ctx - n_new + t + 1
        const int32_t one_ctx = ctx - n_new + t + 1, one_start[2] = {0, 1};
        PagedAttentionParams d = p;
        d.q = b.q.data() + t * per_token;
        d.out = alone.data() + t * per_token;
        d.context_lens = &one_ctx;
        d.query_start = one_start;
        paged_attention(Device::kCpu, d);
      }
      for (size_t i = 0; i < run.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(run[i]), std::bit_cast<uint32_t>(alone[i]))
            << nh << "/" << nkv << " head_dim " << hd << " context " << ctx << ", token " << i / per_token << ": "
            << run[i] << " vs " << alone[i];
    }
}

TEST_P(PagedAttentionKvTest, WriteKvRotatesKeysAndStoresInTheCacheDtype) {
  const auto [backend, dt] = GetParam();
  SPECD_USE_BACKEND(backend);
  const int64_t n = 3, nkv = 2, hd = 8, half = hd / 2, row = nkv * hd;
  const auto k = random_vector(static_cast<size_t>(n * row), 91), v = random_vector(static_cast<size_t>(n * row), 92);
  const auto cos = random_vector(static_cast<size_t>(n * half), 93),
             sin = random_vector(static_cast<size_t>(n * half), 94);
  const std::vector<int64_t> slots = {5, 0, 2};
  const size_t elem = dt == DType::kF32 ? 4 : 2;
  const Device dev = backend.device;
  const testing::Mirror<float> dk(dev, k), dv(dev, v), dcos(dev, cos), dsin(dev, sin);
  const testing::Mirror<int64_t> dslots(dev, slots);
  const testing::Mirror<uint8_t> dkc(dev, std::vector<uint8_t>(6 * row * elem)),
      dvc(dev, std::vector<uint8_t>(6 * row * elem));
  write_kv(dev, dk.get(), dv.get(), n, nkv, hd, dcos.get(), dsin.get(), dslots.get(), dt, dkc.get(), dvc.get());
  const std::vector<uint8_t> kc = dkc.read(), vc = dvc.read();
  for (int64_t t = 0; t < n; ++t) {
    std::vector<float> want_k(static_cast<size_t>(row)), got_k(static_cast<size_t>(row)),
        got_v(static_cast<size_t>(row));
    for (int64_t h = 0; h < nkv; ++h)
      for (int64_t j = 0; j < half; ++j) {
        const float x0 = k[t * row + h * hd + j], x1 = k[t * row + h * hd + j + half];
        want_k[h * hd + j] = x0 * cos[t * half + j] - x1 * sin[t * half + j];
        want_k[h * hd + j + half] = x1 * cos[t * half + j] + x0 * sin[t * half + j];
      }
    const size_t off = static_cast<size_t>(slots[static_cast<size_t>(t)]) * row * elem;
    to_f32(Device::kCpu, dt, kc.data() + off, got_k.data(), row);
    to_f32(Device::kCpu, dt, vc.data() + off, got_v.data(), row);
    const double tol = dt == DType::kF32 ? 1e-6 : (dt == DType::kF16 ? 1e-3 : 8e-3);
    for (int64_t i = 0; i < row; ++i) {
      EXPECT_NEAR(got_k[i], want_k[i], tol * (1 + std::abs(want_k[i]))) << dtype_name(dt) << " t=" << t << " i=" << i;
      EXPECT_NEAR(got_v[i], v[t * row + i], tol * (1 + std::abs(v[t * row + i]))) << dtype_name(dt);
    }
  }
}

// A draft tree scored in one call: every node's output is bit for bit that of its path laid out
// as a chain (prefix, then the ancestors root first, then the node) and queried as one decode
// token, on every ISA level and cache dtype; and it matches the reference. The region's first two
// nodes were cached by an earlier call (a tree drafted level by level); two roots.
TEST_P(PagedAttentionKvTest, TreeNodesEqualTheirPathAsAChain) {
  const auto [backend, dt] = GetParam();
  SPECD_USE_BACKEND(backend);
  const std::vector<int32_t> parents = {-1, 0, 1, 1, 0, 3, 2, 5, -1, 8, 4};  // region of 11
  const int32_t prefix = 13, m = 11, n_new = 9, ctx = prefix + m, bs = 4, nh = 8, nkv = 2, hd = 32;
  const Batch b({ctx}, {n_new}, bs, nh, nkv, hd, 97);
  const size_t elem = dt == DType::kF32 ? 4 : 2;
  std::vector<uint8_t> k(b.k.size() * elem), v(b.v.size() * elem);
  from_f32(Device::kCpu, b.k.data(), dt, k.data(), static_cast<int64_t>(b.k.size()));
  from_f32(Device::kCpu, b.v.data(), dt, v.data(), static_cast<int64_t>(b.v.size()));
  const std::vector<int32_t> offsets = {0, m};
  std::vector<float> got(b.out_size()), want(b.out_size());
  PagedAttentionParams p = b.params(got.data());
  p.k_cache = k.data();
  p.v_cache = v.data();
  p.kv_dtype = dt;
  p.tree_offsets = offsets.data();
  p.tree_parents = parents.data();
  attend(backend.device, p);
  p.out = want.data();
  reference::paged_attention(p);
  EXPECT_LT(max_rel_error(got, want), 1e-5);

  const size_t row_bytes = static_cast<size_t>(nkv) * hd * elem;
  auto row_at = [&](std::vector<uint8_t>& cache, int32_t pos) {
    return cache.data() + (static_cast<size_t>(b.tables[static_cast<size_t>(pos / bs)]) * bs + pos % bs) * row_bytes;
  };
  const size_t per_token = static_cast<size_t>(nh) * hd;
  for (int32_t i = 0; i < n_new; ++i) {
    const int32_t r = m - n_new + i;
    std::vector<int32_t> path;
    for (int32_t x = r; x >= 0; x = parents[static_cast<size_t>(x)]) path.insert(path.begin(), x);
    std::vector<uint8_t> ck = k, cv = v;
    for (size_t d = 0; d < path.size(); ++d) {
      const int32_t from = prefix + path[d], to = prefix + static_cast<int32_t>(d);
      std::memcpy(row_at(ck, to), row_at(k, from), row_bytes);
      std::memcpy(row_at(cv, to), row_at(v, from), row_bytes);
    }
    std::vector<float> chain(per_token);
    PagedAttentionParams c = b.params(chain.data());
    const std::vector<int32_t> qs = {0, 1}, lens = {prefix + static_cast<int32_t>(path.size())};
    c.q = b.q.data() + static_cast<size_t>(i) * per_token;
    c.query_start = qs.data();
    c.context_lens = lens.data();
    c.k_cache = ck.data();
    c.v_cache = cv.data();
    c.kv_dtype = dt;
    attend(backend.device, c);
    EXPECT_EQ(0, std::memcmp(chain.data(), got.data() + static_cast<size_t>(i) * per_token, per_token * 4))
        << "node " << r;
  }
}

// Sliding windows (not aligned with the cache blocks) and soft-capping, on every ISA level and
// cache dtype: the reference agrees, on a linear batch and on a tree; keys older than a token's
// window do not reach it (changing them changes nothing, bit for bit), keys inside do; a window
// as long as the context is no window at all.
TEST_P(PagedAttentionKvTest, SlidingWindowAndSoftCap) {
  const auto [backend, dt] = GetParam();
  SPECD_USE_BACKEND(backend);
  Batch b({23, 40, 37, 1}, {23, 1, 5, 1}, 4, 8, 2, 32, 83);
  const size_t elem = dt == DType::kF32 ? 4 : 2;
  auto stored = [&](const std::vector<float>& x) {
    std::vector<uint8_t> out(x.size() * elem);
    from_f32(Device::kCpu, x.data(), dt, out.data(), static_cast<int64_t>(x.size()));
    return out;
  };
  std::vector<uint8_t> k = stored(b.k), v = stored(b.v);
  auto run = [&](int32_t window, float softcap, std::vector<uint8_t>& kc, bool reference_too) {
    std::vector<float> got(b.out_size()), want(b.out_size());
    PagedAttentionParams p = b.params(got.data());
    p.k_cache = kc.data();
    p.v_cache = v.data();
    p.kv_dtype = dt;
    p.window = window;
    p.softcap = softcap;
    attend(backend.device, p);
    if (reference_too) {
      p.out = want.data();
      reference::paged_attention(p);
      EXPECT_LT(max_rel_error(got, want), 1e-5) << "window " << window << " softcap " << softcap;
    }
    return got;
  };
  for (const auto& [window, cap] : {std::pair{5, 0.0f}, std::pair{1, 0.0f}, std::pair{9, 2.0f}, std::pair{0, 2.0f}})
    run(window, cap, k, true);
  EXPECT_EQ(run(40, 0.0f, k, false), run(0, 0.0f, k, false));
  EXPECT_NE(run(0, 2.0f, k, false), run(0, 0.0f, k, false)) << "a soft cap of 2 must change scores of this size";
  // Sequence 1 decodes at position 39 with a window of 5: it sees positions 35..39 only.
  const std::vector<float> before = run(5, 0.0f, k, false);
  const size_t token = 23, per_token = static_cast<size_t>(b.num_heads) * b.head_dim;
  const size_t row_bytes = static_cast<size_t>(b.num_kv_heads) * b.head_dim * elem;
  auto bump = [&](int32_t pos) {
    std::vector<uint8_t> kc = k;
    uint8_t* row =
        kc.data() + (static_cast<size_t>(b.tables[static_cast<size_t>(b.stride + pos / 4)]) * 4 + pos % 4) * row_bytes;
    std::vector<float> x(static_cast<size_t>(b.num_kv_heads) * b.head_dim, 3.0f);
    from_f32(Device::kCpu, x.data(), dt, row, static_cast<int64_t>(x.size()));
    return run(5, 0.0f, kc, false);
  };
  const std::vector<float> old_key = bump(34), in_window = bump(35);
  EXPECT_EQ(0, std::memcmp(old_key.data() + token * per_token, before.data() + token * per_token, per_token * 4));
  EXPECT_NE(0, std::memcmp(in_window.data() + token * per_token, before.data() + token * per_token, per_token * 4));

  // A tree with a window of 3: a node sees its last 3 ancestors-or-self and prefix positions.
  const std::vector<int32_t> parents = {-1, 0, 1, 1, 0, 3, 2, 5, -1, 8, 4};
  const Batch t({24}, {9}, 4, 8, 2, 32, 97);
  std::vector<uint8_t> tk = stored(t.k), tv = stored(t.v);
  const std::vector<int32_t> offsets = {0, 11};
  std::vector<float> got(t.out_size()), want(t.out_size());
  PagedAttentionParams p = t.params(got.data());
  p.k_cache = tk.data();
  p.v_cache = tv.data();
  p.kv_dtype = dt;
  p.tree_offsets = offsets.data();
  p.tree_parents = parents.data();
  p.window = 3;
  attend(backend.device, p);
  p.out = want.data();
  reference::paged_attention(p);
  EXPECT_LT(max_rel_error(got, want), 1e-5);
}

// A plan laid out once serves calls of any window (layers of a model differ in it), bit for bit
// what each call gives on its own, on a tree batch; a call of another batch is refused.
TEST_P(PagedAttentionKvTest, APlanGivesWhatEachCallGivesForEveryWindow) {
  const auto [backend, dt] = GetParam();
  SPECD_USE_BACKEND(backend);
  const std::vector<int32_t> parents = {-1, 0, 1, 1, 0, 3, 2, 5, -1, 8, 4}, offsets = {0, 0, 11};
  const Batch b({30, 24}, {4, 9}, 4, 8, 2, 32, 71);
  const StoredCache c(b, dt);
  for (int32_t window : {0, 3, 7}) {
    std::vector<float> alone(b.out_size()), planned(b.out_size());
    PagedAttentionParams p = c.params(b, alone.data());
    p.tree_offsets = offsets.data();
    p.tree_parents = parents.data();
    p.window = window;
    attend(backend.device, p);
    AttentionPlan plan;
    p.out = planned.data();
    attend(backend.device, p, &plan);
    EXPECT_EQ(alone, planned) << "window " << window;
  }
  std::vector<float> out(b.out_size());
  AttentionPlan plan;
  PagedAttentionParams p = c.params(b, out.data());
  plan.prepare(Device::kCpu, p);
  p.num_seqs = 1;
  EXPECT_THROW(paged_attention(Device::kCpu, p, plan), Error);
}

TEST(PagedAttentionTree, RejectsAParentThatIsNotEarlier) {
  const Batch b({10}, {3}, 4, 2, 2, 8, 99);
  std::vector<float> out(b.out_size());
  PagedAttentionParams p = b.params(out.data());
  const std::vector<int32_t> offsets = {0, 3}, parents = {-1, 2, 0};
  p.tree_offsets = offsets.data();
  p.tree_parents = parents.data();
  try {
    paged_attention(Device::kCpu, p);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tree node 1 has parent 2"), std::string::npos) << e.what();
  }
  std::vector<int32_t> depth(4);
  const std::vector<int32_t> ok = {-1, 0, 0, 2};
  tree_depths(ok.data(), 4, depth.data());
  EXPECT_EQ(depth, (std::vector<int32_t>{0, 1, 1, 2}));
}

INSTANTIATE_TEST_SUITE_P(All, PagedAttentionKvTest,
                         ::testing::Combine(::testing::ValuesIn(testing::all_backends()),
                                            ::testing::Values(DType::kF32, DType::kF16, DType::kBF16)),
                         [](const ::testing::TestParamInfo<KvParam>& info) {
                           std::string name = testing::backend_name(std::get<0>(info.param));
                           name += '_';
                           name += dtype_name(std::get<1>(info.param));
                           return name;
                         });

}  // namespace
}  // namespace specd::kernels

// A fake specd_model_services table for testing model-backed proposer plugins without a model
// runtime. Each "model" is a deterministic function of its whole cached context, so a proposer
// that lets its KV drift from the sequence gets different logits and fails exact checks:
//  - causal LMs (target, draft checkpoints, self-drafts): the cache is a token list; after
//    context c the logits are -scale·|v - center(c)| with center = hash(salt, c) mod vocab,
//    so the greedy token is center(c) (unique) and softmax is far from one-hot;
//  - MTP modules: the cache is a list of (token, input hidden) entries; the output hidden state
//    and logits after entries e are hash(module, e)-derived (hidden values are small integers,
//    exact in float).
// The reference functions (causal_logits, mtp_eval, ...) are public so tests compute expected
// drafts from scratch; ProposerHarness (below) drives a plugin through the registry. One
// FakeModels instance is "current" at a time (the table's functions receive the registry's host
// context, not ours).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "plugin/registry.hpp"
#include "specd/sdk/abi.h"

namespace specd::testing {

struct FakeCheckpoint {
  int32_t vocab_size = 50;
  int32_t hidden_size = 4;
  int32_t num_layers = 4;
  int32_t max_context = 1 << 20;
  int32_t num_mtp_modules = 0;
};

struct FakeEntry {
  int32_t token = 0;
  std::vector<float> x;  // MTP input hidden state; empty for causal models
  bool operator==(const FakeEntry&) const = default;
};

struct ForwardRecord {
  std::vector<uint64_t> seq_ids;
  std::vector<int32_t> num_new;
  int32_t all_logits = 0;
  bool logits = true;       // a logits buffer was given (ABI 1.7: none = no logits)
  bool hidden_all = false;  // ABI 1.7: a hidden row for every new token
};

struct FakeModel {
  bool mtp = false;
  std::string path;        // "" = the target
  int32_t num_layers = 0;  // > 0: self-draft of the first layers
  int32_t module = -1;     // MTP module index
  FakeCheckpoint ckpt;
  uint64_t salt = 0;
  bool released = false;
  int release_calls = 0;  // must end at exactly 1
  std::map<uint64_t, std::vector<FakeEntry>> kv;
  std::vector<ForwardRecord> forwards;
};

struct MtpOutput {
  std::vector<float> hidden;
  std::vector<float> logits;
};

class FakeModels {
 public:
  explicit FakeModels(FakeCheckpoint target) : target_(target) {
    current() = this;
    table_.struct_size = sizeof(table_);
    table_.load = &load;
    table_.load_mtp = &load_mtp;
    table_.release = &release;
    table_.info = &info;
    table_.forward = &forward;
    table_.seq_length = &seq_length;
    table_.truncate = &truncate;
    table_.drop_sequence = &drop_sequence;
  }
  ~FakeModels() {
    if (current() == this) current() = nullptr;
  }
  FakeModels(const FakeModels&) = delete;
  FakeModels& operator=(const FakeModels&) = delete;

  const specd_model_services* services() const { return &table_; }
  void add_checkpoint(const std::string& path, FakeCheckpoint ckpt) { checkpoints_[path] = ckpt; }

  // Every model ever loaded, in load order.
  const std::vector<std::unique_ptr<FakeModel>>& models() const { return models_; }
  int live_models() const {
    return static_cast<int>(std::count_if(models_.begin(), models_.end(), [](const auto& m) { return !m->released; }));
  }
  // The (single) live model matching a predicate-ish description.
  FakeModel* live_causal(const std::string& path, int32_t num_layers) const {
    for (const auto& m : models_)
      if (!m->released && !m->mtp && m->path == path && m->num_layers == num_layers) return m.get();
    return nullptr;
  }
  FakeModel* live_mtp(int32_t module) const {
    for (const auto& m : models_)
      if (!m->released && m->mtp && m->module == module) return m.get();
    return nullptr;
  }
  static int64_t cached(const FakeModel* m, uint64_t seq) {
    auto it = m->kv.find(seq);
    return it == m->kv.end() ? 0 : static_cast<int64_t>(it->second.size());
  }
  static std::vector<int32_t> cached_tokens(const FakeModel* m, uint64_t seq) {
    std::vector<int32_t> out;
    auto it = m->kv.find(seq);
    if (it != m->kv.end())
      for (const auto& e : it->second) out.push_back(e.token);
    return out;
  }

  // ---- reference functions -----------------------------------------------------------------
  static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 29);
  }
  static uint64_t causal_salt(const std::string& path, int32_t num_layers) {
    uint64_t h = 0x1234567ull;
    for (char c : path) h = mix(h, static_cast<uint8_t>(c));
    return mix(h, static_cast<uint64_t>(num_layers) + 1000);
  }
  static uint64_t context_hash(uint64_t salt, std::span<const int32_t> ctx) {
    uint64_t h = salt;
    for (int32_t t : ctx) h = mix(h, static_cast<uint32_t>(t));
    return mix(h, ctx.size());
  }
  static std::vector<float> logits_from_hash(uint64_t h, int32_t vocab) {
    const int32_t center = static_cast<int32_t>(h % static_cast<uint64_t>(vocab));
    const float scale = 0.3f + 0.1f * static_cast<float>((h >> 32) % 5);
    std::vector<float> out(static_cast<size_t>(vocab));
    for (int32_t v = 0; v < vocab; ++v) out[static_cast<size_t>(v)] = -scale * static_cast<float>(std::abs(v - center));
    return out;
  }
  // Logits of a causal model after context ctx; the greedy token is greedy_next().
  static std::vector<float> causal_logits(uint64_t salt, std::span<const int32_t> ctx, int32_t vocab) {
    return logits_from_hash(context_hash(salt, ctx), vocab);
  }
  static int32_t greedy_next(uint64_t salt, std::span<const int32_t> ctx, int32_t vocab) {
    return static_cast<int32_t>(context_hash(salt, ctx) % static_cast<uint64_t>(vocab));
  }
  static std::vector<float> hidden_from_hash(uint64_t h, int32_t hidden) {
    std::vector<float> out(static_cast<size_t>(hidden));
    for (int32_t d = 0; d < hidden; ++d) {
      h = mix(h, static_cast<uint64_t>(d));
      out[static_cast<size_t>(d)] = static_cast<float>(static_cast<int64_t>(h % 201) - 100);
    }
    return out;
  }
  // MTP module `module` after entries e (its KV including the newest entry).
  static MtpOutput mtp_eval(int32_t module, std::span<const FakeEntry> e, int32_t vocab, int32_t hidden) {
    uint64_t h = mix(0xabcdefull, static_cast<uint64_t>(module));
    for (const auto& entry : e) {
      h = mix(h, static_cast<uint32_t>(entry.token));
      for (float v : entry.x) {
        uint32_t bits;
        std::memcpy(&bits, &v, sizeof(bits));
        h = mix(h, bits);
      }
    }
    h = mix(h, e.size());
    return {hidden_from_hash(h, hidden), logits_from_hash(h, vocab)};
  }

 private:
  static FakeModels*& current() {
    static FakeModels* instance = nullptr;
    return instance;
  }
  static FakeModel* model(const specd_model* m) { return reinterpret_cast<FakeModel*>(const_cast<specd_model*>(m)); }
  static int32_t fail(specd_error* err, int32_t code, const std::string& message) {
    if (err != nullptr && err->message != nullptr && err->capacity > 0) {
      const size_t n = std::min<size_t>(message.size(), err->capacity - 1);
      std::memcpy(err->message, message.data(), n);
      err->message[n] = '\0';
    }
    return code;
  }

  static int32_t load(void*, const specd_model_load_options* options, specd_model** out, specd_error* err) {
    FakeModels* self = current();
    const std::string path = options->path != nullptr ? options->path : "";
    auto m = std::make_unique<FakeModel>();
    m->path = path;
    m->num_layers = options->num_layers;
    if (path.empty()) {
      m->ckpt = self->target_;
      if (options->num_layers > self->target_.num_layers)
        return fail(err, SPECD_ERR_INVALID_ARGUMENT, "fake: more layers than the target has");
      if (options->num_layers > 0) {
        m->ckpt.num_layers = options->num_layers;
        m->ckpt.num_mtp_modules = 0;
      }
    } else {
      auto it = self->checkpoints_.find(path);
      if (it == self->checkpoints_.end()) return fail(err, SPECD_ERR_NOT_FOUND, "fake: no checkpoint at " + path);
      m->ckpt = it->second;
    }
    m->salt = causal_salt(path, options->num_layers);
    *out = reinterpret_cast<specd_model*>(m.get());
    self->models_.push_back(std::move(m));
    return SPECD_OK;
  }
  // target == nullptr: the engine's target (as the real host does).
  static int32_t load_mtp(void*, specd_model* target, int32_t module, specd_model** out, specd_error* err) {
    FakeModels* self = current();
    const bool target_is_mtp = target != nullptr && model(target)->mtp;
    const auto& ckpt = target != nullptr ? model(target)->ckpt : self->target_;
    if (target_is_mtp || module < 0 || module >= ckpt.num_mtp_modules)
      return fail(err, SPECD_ERR_NOT_FOUND, "fake: no such MTP module");
    auto m = std::make_unique<FakeModel>();
    m->mtp = true;
    m->module = module;
    m->ckpt = ckpt;
    *out = reinterpret_cast<specd_model*>(m.get());
    self->models_.push_back(std::move(m));
    return SPECD_OK;
  }
  static void release(void*, specd_model* m) {
    ++model(m)->release_calls;
    model(m)->released = true;
  }
  static int32_t info(void*, const specd_model* m, specd_model_info* out) {
    const bool mtp = m != nullptr && model(m)->mtp;
    const auto& ckpt = m != nullptr ? model(m)->ckpt : current()->target_;  // NULL = the target
    out->vocab_size = ckpt.vocab_size;
    out->hidden_size = ckpt.hidden_size;
    out->num_layers = ckpt.num_layers;
    out->max_context = ckpt.max_context;
    out->num_mtp_modules = mtp ? 0 : ckpt.num_mtp_modules;
    out->device = {SPECD_DEVICE_CPU, 0};
    return SPECD_OK;
  }
  static int32_t forward(void*, specd_model* m, const specd_forward_batch* b, specd_error* err) {
    FakeModel* f = model(m);
    if (f->released) return fail(err, SPECD_ERR_INVALID_ARGUMENT, "fake: forward on a released model");
    if (b->num_seqs <= 0) return fail(err, SPECD_ERR_INVALID_ARGUMENT, "fake: empty batch");
    // As the host (ABI 1.7): NULL logits = none (all_logits must be 0); hidden_all = a hidden
    // row for every new token, logits rows as all_logits says.
    if (b->logits == nullptr && b->all_logits != 0)
      return fail(err, SPECD_ERR_INVALID_ARGUMENT, "fake: all_logits without a logits buffer");
    const bool hidden_all =
        b->struct_size >= offsetof(specd_forward_batch, hidden_all) + sizeof(int32_t) && b->hidden_all != 0;
    if (hidden_all && b->hidden == nullptr)
      return fail(err, SPECD_ERR_INVALID_ARGUMENT, "fake: hidden_all without a hidden buffer");
    if (f->mtp != (b->input_hidden != nullptr))
      return fail(err, SPECD_ERR_INVALID_ARGUMENT, "fake: input_hidden must be given exactly for MTP modules");
    const int32_t vocab = f->ckpt.vocab_size;
    const int32_t hidden = f->ckpt.hidden_size;
    ForwardRecord record;
    record.all_logits = b->all_logits;
    record.logits = b->logits != nullptr;
    record.hidden_all = hidden_all;
    int64_t token = 0;
    int64_t row = 0, hidden_row = 0;
    for (int32_t i = 0; i < b->num_seqs; ++i) {
      const int32_t n = b->num_new[i];
      if (n < 1) return fail(err, SPECD_ERR_INVALID_ARGUMENT, "fake: num_new < 1");
      for (int32_t j = 0; j < i; ++j)
        if (b->seq_ids[j] == b->seq_ids[i])
          return fail(err, SPECD_ERR_INVALID_ARGUMENT, "fake: sequence twice in a batch");
      record.seq_ids.push_back(b->seq_ids[i]);
      record.num_new.push_back(n);
      auto& kv = f->kv[b->seq_ids[i]];
      if (static_cast<int64_t>(kv.size()) + n > f->ckpt.max_context)
        return fail(err, SPECD_ERR_INVALID_ARGUMENT, "fake: past max_context");
      for (int32_t t = 0; t < n; ++t, ++token) {
        FakeEntry e;
        e.token = b->tokens[token];
        if (e.token < 0 || e.token >= vocab) return fail(err, SPECD_ERR_INVALID_ARGUMENT, "fake: token out of range");
        if (f->mtp) e.x.assign(b->input_hidden + token * hidden, b->input_hidden + (token + 1) * hidden);
        kv.push_back(std::move(e));
        const bool logits_row = b->logits != nullptr && (b->all_logits != 0 || t == n - 1);
        if (!logits_row && !hidden_all) continue;
        std::vector<float> logits, hid;
        if (f->mtp) {
          MtpOutput o = mtp_eval(f->module, kv, vocab, hidden);
          logits = std::move(o.logits);
          hid = std::move(o.hidden);
        } else {
          std::vector<int32_t> ctx;
          for (const auto& c : kv) ctx.push_back(c.token);
          const uint64_t h = context_hash(f->salt, ctx);
          logits = logits_from_hash(h, vocab);
          hid = hidden_from_hash(h, hidden);
        }
        if (logits_row) std::copy(logits.begin(), logits.end(), b->logits + row * vocab);
        if (hidden_all) {
          std::copy(hid.begin(), hid.end(), b->hidden + hidden_row++ * hidden);
        } else if (logits_row && b->hidden != nullptr) {
          std::copy(hid.begin(), hid.end(), b->hidden + row * hidden);
        }
        if (logits_row) ++row;
      }
    }
    f->forwards.push_back(std::move(record));
    return SPECD_OK;
  }
  static int64_t seq_length(void*, const specd_model* m, uint64_t seq) { return cached(model(m), seq); }
  static int32_t truncate(void*, specd_model* m, uint64_t seq, int64_t new_length, specd_error* err) {
    auto& kv = model(m)->kv[seq];
    if (new_length < 0 || new_length > static_cast<int64_t>(kv.size()))
      return fail(err, SPECD_ERR_INVALID_ARGUMENT, "fake: truncate past the cached length");
    kv.resize(static_cast<size_t>(new_length));
    return SPECD_OK;
  }
  static void drop_sequence(void*, specd_model* m, uint64_t seq) { model(m)->kv.erase(seq); }

  FakeCheckpoint target_;
  std::map<std::string, FakeCheckpoint> checkpoints_;
  std::vector<std::unique_ptr<FakeModel>> models_;
  specd_model_services table_{};
};

// ---------------------------------------------------------------------------------------------

struct TestSeq {
  uint64_t id = 0;
  std::vector<int32_t> tokens;  // prompt + emitted
  int64_t num_prompt = 0;
  uint64_t seed = 7;
  uint64_t step = 0;
  float temperature = 0;
};

struct ProposeResult {
  std::vector<std::vector<int32_t>> drafts;
  std::vector<float> probs;  // [num_seqs, k_max, vocab] when the proposer produces them
  int32_t k_max = 0;
  int32_t vocab = 0;
  // Draft-probability row of sequence i, draft j.
  std::vector<float> row(size_t i, int32_t j) const {
    const auto first = probs.begin() + static_cast<int64_t>((i * static_cast<size_t>(k_max) + static_cast<size_t>(j)) *
                                                            static_cast<size_t>(vocab));
    return {first, first + vocab};
  }
};

// Drives a proposer plugin through the registry the way the engine's speculative step does:
// prefill chunks, propose with per-sequence k, on_accept with the verifier's outcome, release.
class ProposerHarness {
 public:
  ProposerHarness(const std::filesystem::path& plugin, const std::string& name,
                  const std::vector<std::pair<std::string, std::string>>& params, const specd_model_services* models) {
    registry_.load(plugin);
    proposer_ = registry_.create_proposer(name, plugin::Params::from_pairs(params), models);
  }

  plugin::ProposerInstance& instance() { return *proposer_; }
  const specd_proposer_caps& caps() const { return proposer_->capabilities(); }
  void destroy() { proposer_.reset(); }

  // One prefill call: seqs[i]'s chunk is its last num_new[i] tokens; hidden rows (if any) are
  // [sum(num_new), hidden_size].
  void prefill(const std::vector<const TestSeq*>& seqs, const std::vector<int32_t>& num_new,
               const std::vector<float>& hidden = {}, int64_t hidden_size = 0) {
    std::vector<specd_sequence> raw = to_raw(seqs);
    specd_prefill_batch b{};
    b.struct_size = sizeof(b);
    b.num_seqs = static_cast<int32_t>(seqs.size());
    b.seqs = raw.data();
    b.num_new = num_new.data();
    b.target_hidden = view(hidden, hidden_size);
    proposer_->on_prefill(b);
  }

  ProposeResult propose(const std::vector<const TestSeq*>& seqs, const std::vector<int32_t>& k, int32_t vocab,
                        const std::vector<int32_t>& num_hidden = {}, const std::vector<float>& hidden = {},
                        int64_t hidden_size = 0) {
    std::vector<specd_sequence> raw = to_raw(seqs);
    ProposeResult out;
    out.k_max = std::max(1, *std::max_element(k.begin(), k.end()));
    out.vocab = vocab;
    std::vector<int32_t> drafts(seqs.size() * static_cast<size_t>(out.k_max), -1), counts(seqs.size(), 0);
    if (caps().produces_draft_probs) out.probs.assign(drafts.size() * static_cast<size_t>(vocab), -1.0f);
    specd_propose_batch b{};
    b.struct_size = sizeof(b);
    b.num_seqs = static_cast<int32_t>(seqs.size());
    b.seqs = raw.data();
    b.max_draft = k.data();
    b.k_max = out.k_max;
    b.vocab_size = vocab;
    b.num_hidden = num_hidden.empty() ? nullptr : num_hidden.data();
    b.target_hidden = view(hidden, hidden_size);
    b.draft_tokens = drafts.data();
    b.num_drafted = counts.data();
    b.draft_probs = out.probs.empty() ? nullptr : out.probs.data();
    proposer_->propose(b);
    for (size_t i = 0; i < seqs.size(); ++i) {
      out.drafts.emplace_back(drafts.begin() + static_cast<int64_t>(i * static_cast<size_t>(out.k_max)),
                              drafts.begin() + static_cast<int64_t>(i * static_cast<size_t>(out.k_max)) + counts[i]);
      for (int32_t j = counts[i]; j < out.k_max; ++j)
        EXPECT_EQ(drafts[i * static_cast<size_t>(out.k_max) + static_cast<size_t>(j)], -1) << "wrote past num_drafted";
    }
    return out;
  }

  // The verifier accepted `accepted` of `drafts` and then emitted `target_token`; the sequence
  // grows by the accepted drafts and that token.
  void accept(TestSeq& seq, const std::vector<int32_t>& drafts, int32_t accepted, int32_t target_token) {
    std::vector<int32_t> emitted(drafts.begin(), drafts.begin() + accepted);
    emitted.push_back(target_token);
    proposer_->on_accept(seq.id, accepted, {emitted.data(), static_cast<int64_t>(emitted.size())});
    seq.tokens.insert(seq.tokens.end(), emitted.begin(), emitted.end());
    ++seq.step;
  }

 private:
  static std::vector<specd_sequence> to_raw(const std::vector<const TestSeq*>& seqs) {
    std::vector<specd_sequence> raw(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) {
      raw[i].struct_size = sizeof(specd_sequence);
      raw[i].seq_id = seqs[i]->id;
      raw[i].tokens = {seqs[i]->tokens.data(), static_cast<int64_t>(seqs[i]->tokens.size())};
      raw[i].num_prompt = seqs[i]->num_prompt;
      raw[i].seed = seqs[i]->seed;
      raw[i].step = seqs[i]->step;
      raw[i].temperature = seqs[i]->temperature;
    }
    return raw;
  }
  static specd_tensor_view view(const std::vector<float>& data, int64_t cols) {
    specd_tensor_view v{};
    v.struct_size = sizeof(v);
    if (data.empty() || cols == 0) return v;
    v.data = const_cast<float*>(data.data());
    v.dtype = SPECD_DTYPE_F32;
    v.device = {SPECD_DEVICE_CPU, 0};
    v.ndim = 2;
    v.shape[0] = static_cast<int64_t>(data.size()) / cols;
    v.shape[1] = cols;
    return v;
  }

  plugin::Registry registry_;
  std::unique_ptr<plugin::ProposerInstance> proposer_;
};

}  // namespace specd::testing

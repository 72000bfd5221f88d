#include "spec/speculator.hpp"

#include <algorithm>

#include "sampling/sampling.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"

namespace specd::spec {

Speculator::Speculator(const config::EngineConfig& cfg, std::shared_ptr<const model::LlamaWeights> target,
                       int32_t block_size, int64_t max_model_len, int64_t vocab_size)
    : default_k_(cfg.speculative.num_speculative_tokens), vocab_(vocab_size), hidden_size_(target->config().hidden_size) {
  registry_.scan(plugin::Registry::search_path(cfg.plugins.paths));
  host_ = std::make_unique<ModelHost>(std::move(target), block_size, max_model_len, cfg.kv_cache.dtype,
                                      cfg.model.mmap ? model::WeightPlacement::kMap : model::WeightPlacement::kCopy);
  proposer_ = registry_.create_proposer(cfg.speculative.proposer.name, cfg.speculative.proposer.params,
                                        host_->binding());
  verifier_ = registry_.create_verifier(cfg.speculative.verifier.name, cfg.speculative.verifier.params);
  const auto& caps = proposer_->capabilities();
  if (verifier_->capabilities().needs_draft_probs == 0 && caps.produces_draft_probs != 0)
    log::get("spec").info("verifier '{}' ignores the draft probabilities proposer '{}' produces", verifier_->name(),
                          proposer_->name());
  log::get("spec").info("speculative decoding: proposer {}, verifier {}, k = {}", proposer_->name(),
                        verifier_->name(), default_k_);
}

Speculator::~Speculator() = default;

void Speculator::fill_sequences(std::span<const Item> items) {
  seqs_.resize(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const sched::Sequence& s = *items[i].seq;
    specd_sequence& r = seqs_[i];
    r = {};
    r.struct_size = sizeof(r);
    r.seq_id = s.id;
    r.tokens = {s.tokens.data(), static_cast<int64_t>(s.tokens.size())};
    r.num_prompt = s.num_prompt;
    r.seed = s.seed;
    r.step = s.step;
    r.temperature = s.params.temperature;
  }
}

namespace {

specd_tensor_view hidden_view(float* data, int64_t rows, int64_t hidden) {
  specd_tensor_view v{};
  v.struct_size = sizeof(v);
  v.data = data;
  v.dtype = SPECD_DTYPE_F32;
  v.device = {SPECD_DEVICE_CPU, 0};
  v.ndim = 2;
  v.shape[0] = rows;
  v.shape[1] = hidden;
  return v;
}

}  // namespace

bool Speculator::in_prefill(RequestId id) const {
  const auto it = hidden_.find(id);
  return it == hidden_.end() || !it->second.prefilled;
}

void Speculator::prefill(std::span<const PrefillChunk> chunks) {
  if (chunks.empty()) return;
  const size_t H = static_cast<size_t>(hidden_size_);
  prefill_seqs_.resize(chunks.size());
  prefill_new_.resize(chunks.size());
  hidden_buf_.clear();
  for (size_t i = 0; i < chunks.size(); ++i) {
    const PrefillChunk& c = chunks[i];
    const sched::Sequence& s = *c.seq;
    HiddenState& st = hidden_[s.id];
    SPECD_CHECK(c.start == st.next_pos && st.rows.empty(), ErrorCode::kInternal,
                "speculator: prefill chunk of sequence " + std::to_string(s.id) + " starts at " +
                    std::to_string(c.start) + ", hidden states were received up to " + std::to_string(st.next_pos));
    specd_sequence& r = prefill_seqs_[i];
    r = {};
    r.struct_size = sizeof(r);
    r.seq_id = s.id;
    // The prompt processed so far: the chunk is the last n tokens.
    r.tokens = {s.tokens.data(), static_cast<int64_t>(c.start) + c.n};
    r.num_prompt = s.num_prompt;
    r.seed = s.seed;
    r.step = s.step;
    r.temperature = s.params.temperature;
    prefill_new_[i] = c.n;
    hidden_buf_.insert(hidden_buf_.end(), c.hidden, c.hidden + static_cast<size_t>(c.n) * H);
  }
  specd_prefill_batch batch{};
  batch.struct_size = sizeof(batch);
  batch.num_seqs = static_cast<int32_t>(chunks.size());
  batch.seqs = prefill_seqs_.data();
  batch.num_new = prefill_new_.data();
  batch.target_hidden = hidden_view(hidden_buf_.data(), static_cast<int64_t>(hidden_buf_.size() / H), hidden_size_);
  proposer_->on_prefill(batch);
  for (const PrefillChunk& c : chunks) {
    HiddenState& st = hidden_[c.seq->id];
    st.next_pos = c.start + c.n;
    if (c.last) st.prefilled = true;
  }
}

void Speculator::add_hidden(const sched::Sequence& seq, int64_t pos, const float* rows, int32_t n) {
  HiddenState& st = hidden_[seq.id];
  SPECD_CHECK(pos == st.next_pos, ErrorCode::kInternal,
              "speculator: hidden states of sequence " + std::to_string(seq.id) + " for position " +
                  std::to_string(pos) + ", expected position " + std::to_string(st.next_pos));
  st.rows.insert(st.rows.end(), rows, rows + static_cast<size_t>(n) * static_cast<size_t>(hidden_size_));
  st.next_pos = pos + n;
}

void Speculator::propose(std::span<Item> items) {
  const size_t b = items.size();
  k_max_ = 1;
  for (const Item& it : items) k_max_ = std::max(k_max_, it.max_draft);
  fill_sequences(items);
  max_draft_.resize(b);
  for (size_t i = 0; i < b; ++i) max_draft_[i] = items[i].max_draft;
  draft_tokens_.assign(b * static_cast<size_t>(k_max_), -1);
  num_drafted_.assign(b, 0);
  const bool with_probs = proposer_->capabilities().produces_draft_probs != 0;
  if (with_probs) draft_probs_.resize(b * static_cast<size_t>(k_max_) * static_cast<size_t>(vocab_));

  specd_propose_batch batch{};
  batch.struct_size = sizeof(batch);
  batch.num_seqs = static_cast<int32_t>(b);
  batch.seqs = seqs_.data();
  batch.max_draft = max_draft_.data();
  batch.k_max = k_max_;
  batch.vocab_size = static_cast<int32_t>(vocab_);
  batch.draft_tokens = draft_tokens_.data();
  batch.num_drafted = num_drafted_.data();
  batch.draft_probs = with_probs ? draft_probs_.data() : nullptr;
  if (wants_hidden()) {
    const size_t H = static_cast<size_t>(hidden_size_);
    num_hidden_.assign(b, 0);
    hidden_buf_.clear();
    for (size_t i = 0; i < b; ++i) {
      const sched::Sequence& s = *items[i].seq;
      auto it = hidden_.find(s.id);
      if (it == hidden_.end()) continue;
      const auto L = static_cast<int64_t>(s.tokens.size());
      SPECD_CHECK(it->second.next_pos == L - 1, ErrorCode::kInternal,
                  "speculator: sequence " + std::to_string(s.id) + " of length " + std::to_string(L) +
                      " has target hidden states up to position " + std::to_string(it->second.next_pos));
      num_hidden_[i] = static_cast<int32_t>(it->second.rows.size() / H);
      hidden_buf_.insert(hidden_buf_.end(), it->second.rows.begin(), it->second.rows.end());
    }
    batch.num_hidden = num_hidden_.data();
    batch.target_hidden = hidden_view(hidden_buf_.data(), static_cast<int64_t>(hidden_buf_.size() / H), hidden_size_);
  }
  proposer_->propose(batch);
  if (wants_hidden()) {
    // The proposer keeps what it was given (ABI: "committed since the previous call").
    for (size_t i = 0; i < b; ++i)
      if (auto it = hidden_.find(items[i].seq->id); it != hidden_.end()) it->second.rows.clear();
  }

  for (size_t i = 0; i < b; ++i) {
    const int32_t n = num_drafted_[i];
    if (n < 0 || n > items[i].max_draft)
      throw Error(ErrorCode::kPluginCall, "proposer '" + proposer_->name() + "' drafted " + std::to_string(n) +
                                              " tokens for sequence " + std::to_string(items[i].seq->id) +
                                              ", allowed 0.." + std::to_string(items[i].max_draft));
    for (int32_t j = 0; j < n; ++j) {
      const int32_t t = draft_tokens_[i * static_cast<size_t>(k_max_) + static_cast<size_t>(j)];
      if (t < 0 || t >= vocab_)
        throw Error(ErrorCode::kPluginCall, "proposer '" + proposer_->name() + "' drafted token id " +
                                                std::to_string(t) + " outside the vocabulary [0, " +
                                                std::to_string(vocab_) + ") for sequence " +
                                                std::to_string(items[i].seq->id));
    }
    items[i].num_drafted = n;
    items[i].slot = i;
  }
}

std::span<const int32_t> Speculator::drafts(size_t item) const {
  return {draft_tokens_.data() + item * static_cast<size_t>(k_max_), static_cast<size_t>(num_drafted_[item])};
}

void Speculator::verify(std::span<const Item> items, const model::ForwardOutput& fwd,
                        std::span<const int32_t> first_row) {
  const size_t b = items.size();
  int32_t k = 0;
  for (const Item& it : items) k = std::max(k, it.num_drafted);
  const size_t V = static_cast<size_t>(vocab_);
  const size_t rows = static_cast<size_t>(k) + 1;
  target_probs_.resize(b * rows * V);
  // Compact the drafts (stride k_max_ → k) and, when present, their probabilities.
  std::vector<int32_t>& drafts = verify_drafts_;
  std::vector<int32_t>& counts = verify_counts_;
  drafts.assign(b * static_cast<size_t>(std::max(k, 1)), -1);
  counts.resize(b);
  const bool with_probs = proposer_->capabilities().produces_draft_probs != 0 &&
                          verifier_->capabilities().needs_draft_probs != 0 && k > 0;
  std::vector<float>& q = verify_q_;
  if (with_probs) q.resize(b * static_cast<size_t>(k) * V);
  seeds_.resize(b);
  steps_.resize(b);
  for (size_t i = 0; i < b; ++i) {
    const sched::Sequence& s = *items[i].seq;
    counts[i] = items[i].num_drafted;
    seeds_[i] = s.seed;
    steps_[i] = s.step;
    const size_t slot = items[i].slot;
    for (int32_t j = 0; j < counts[i]; ++j) {
      drafts[i * static_cast<size_t>(k) + static_cast<size_t>(j)] =
          draft_tokens_[slot * static_cast<size_t>(k_max_) + static_cast<size_t>(j)];
      if (with_probs)
        std::copy_n(draft_probs_.data() + (slot * static_cast<size_t>(k_max_) + static_cast<size_t>(j)) * V, V,
                    q.data() + (i * static_cast<size_t>(k) + static_cast<size_t>(j)) * V);
    }
    for (int32_t j = 0; j <= counts[i]; ++j)
      sampling::transform_logits_to_probs(fwd.logits_row(first_row[i] + j), s.params,
                                          {target_probs_.data() + (i * rows + static_cast<size_t>(j)) * V, V});
  }
  out_tokens_.assign(b * rows, -1);
  num_accepted_.assign(b, 0);
  specd_verify_batch vb{};
  vb.struct_size = sizeof(vb);
  vb.device = {SPECD_DEVICE_CPU, 0};
  vb.num_seqs = static_cast<int32_t>(b);
  vb.k_max = k;
  vb.vocab_size = static_cast<int32_t>(vocab_);
  vb.num_drafted = counts.data();
  vb.draft_tokens = drafts.data();
  vb.target_probs = target_probs_.data();
  vb.draft_probs = with_probs ? q.data() : nullptr;
  vb.seeds = seeds_.data();
  vb.steps = steps_.data();
  vb.out_tokens = out_tokens_.data();
  vb.num_accepted = num_accepted_.data();
  verifier_->verify(vb);
  k_verify_ = k;
  for (size_t i = 0; i < b; ++i) {
    const int32_t a = num_accepted_[i];
    if (a < 0 || a > counts[i] || out_tokens_[i * rows + static_cast<size_t>(a)] < 0 ||
        out_tokens_[i * rows + static_cast<size_t>(a)] >= vocab_)
      throw Error(ErrorCode::kPluginCall, "verifier '" + verifier_->name() + "' returned an invalid result for sequence " +
                                              std::to_string(items[i].seq->id) + " (accepted " + std::to_string(a) +
                                              " of " + std::to_string(counts[i]) + ")");
  }
}

std::span<const int32_t> Speculator::emitted(size_t item) const {
  const size_t rows = static_cast<size_t>(k_verify_) + 1;
  return {out_tokens_.data() + item * rows, static_cast<size_t>(num_accepted_[item]) + 1};
}

void Speculator::on_accept(const sched::Sequence& seq, int32_t num_accepted, std::span<const int32_t> emitted) {
  proposer_->on_accept(seq.id, num_accepted, {emitted.data(), static_cast<int64_t>(emitted.size())});
}

void Speculator::release(RequestId id) {
  hidden_.erase(id);
  proposer_->on_release(id);
  host_->drop_sequence_everywhere(static_cast<kv::SeqId>(id));
}

}  // namespace specd::spec

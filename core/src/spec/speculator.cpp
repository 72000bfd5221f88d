#include "spec/speculator.hpp"

#include <algorithm>

#include "sampling/sampling.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"

namespace specd::spec {

Speculator::Speculator(const config::EngineConfig& cfg, std::shared_ptr<const model::LlamaWeights> target,
                       int32_t block_size, int64_t max_model_len, int64_t vocab_size)
    : default_k_(cfg.speculative.num_speculative_tokens), vocab_(vocab_size) {
  registry_.scan(plugin::Registry::search_path(cfg.plugins.paths));
  host_ = std::make_unique<ModelHost>(std::move(target), block_size, max_model_len);
  proposer_ = registry_.create_proposer(cfg.speculative.proposer.name, cfg.speculative.proposer.params,
                                        host_->binding());
  verifier_ = registry_.create_verifier(cfg.speculative.verifier.name, cfg.speculative.verifier.params);
  const auto& caps = proposer_->capabilities();
  if (caps.needs_target_hidden)
    throw Error(ErrorCode::kUnsupported, "proposer '" + proposer_->name() +
                                             "' needs the target's hidden states, which this engine does not pass to "
                                             "proposers yet");
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
  proposer_->propose(batch);

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
  proposer_->on_release(id);
  host_->drop_sequence_everywhere(static_cast<kv::SeqId>(id));
}

}  // namespace specd::spec

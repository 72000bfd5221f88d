// C++ views over the ABI's batch structs (prefill, propose, score, verify) for plugin authors:
// index arithmetic and bounds of the flat host-owned buffers, nothing copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specd/sdk/abi.h"
#include "specd/sdk/error.hpp"

namespace specd::sdk {

struct Sequence {
  uint64_t id;
  std::span<const int32_t> tokens;  // prompt + emitted
  int64_t num_prompt;
  uint64_t seed;
  uint64_t step;
  float temperature;
  uint64_t tenant;  // ABI 1.4: whose text it is (0: shared with nobody; also from older hosts)
  static Sequence from(const specd_sequence& s) {
    const bool has_tenant = s.struct_size >= offsetof(specd_sequence, tenant) + sizeof(uint64_t);
    return {s.seq_id,
            {s.tokens.data, static_cast<size_t>(s.tokens.size)},
            s.num_prompt,
            s.seed,
            s.step,
            s.temperature,
            has_tenant ? s.tenant : 0};
  }
};

// Rows [first, first + count) of a [rows, cols] float tensor; empty when absent.
inline std::span<const float> tensor_rows(const specd_tensor_view& t, int64_t first, int64_t count) {
  if (t.data == nullptr || t.ndim < 2 || count <= 0) return {};
  const int64_t cols = t.shape[t.ndim - 1];
  return {static_cast<const float*>(t.data) + first * cols, static_cast<size_t>(count * cols)};
}

// Positions [first, first + count) of a [positions, layers, hidden] tensor; empty when absent.
inline std::span<const float> aux_rows(const specd_tensor_view& t, int64_t first, int64_t count) {
  if (t.data == nullptr || t.ndim != 3 || count <= 0) return {};
  const int64_t per = t.shape[1] * t.shape[2];
  return {static_cast<const float*>(t.data) + first * per, static_cast<size_t>(count * per)};
}

class PrefillBatch {
 public:
  explicit PrefillBatch(const specd_prefill_batch* raw) : raw_(raw) {
    offsets_.resize(static_cast<size_t>(raw->num_seqs) + 1, 0);
    for (int32_t i = 0; i < raw->num_seqs; ++i) offsets_[i + 1] = offsets_[i] + raw->num_new[i];
  }
  int32_t size() const { return raw_->num_seqs; }
  Sequence seq(int32_t i) const { return Sequence::from(raw_->seqs[i]); }
  int32_t num_new(int32_t i) const { return raw_->num_new[i]; }
  // Hidden states of sequence i's chunk positions, [num_new(i) * hidden] (empty if absent).
  std::span<const float> target_hidden(int32_t i) const {
    return tensor_rows(raw_->target_hidden, offsets_[i], raw_->num_new[i]);
  }
  int64_t hidden_size() const { return raw_->target_hidden.data ? raw_->target_hidden.shape[1] : 0; }
  // ABI 1.3: sequence i's chunk positions' auxiliary hidden states, [num_new(i) * layers * hidden].
  std::span<const float> target_aux_hidden(int32_t i) const {
    if (raw_->struct_size < offsetof(specd_prefill_batch, target_aux_hidden) + sizeof(specd_tensor_view)) return {};
    return aux_rows(raw_->target_aux_hidden, offsets_[i], raw_->num_new[i]);
  }
  const specd_prefill_batch* raw() const { return raw_; }

 private:
  const specd_prefill_batch* raw_;
  std::vector<int64_t> offsets_;
};

class ProposeBatch {
 public:
  explicit ProposeBatch(specd_propose_batch* raw) : raw_(raw) {
    offsets_.resize(static_cast<size_t>(raw->num_seqs) + 1, 0);
    if (raw->num_hidden != nullptr)
      for (int32_t i = 0; i < raw->num_seqs; ++i) offsets_[i + 1] = offsets_[i] + raw->num_hidden[i];
  }
  int32_t size() const { return raw_->num_seqs; }
  int32_t k_max() const { return raw_->k_max; }
  int32_t vocab_size() const { return raw_->vocab_size; }
  Sequence seq(int32_t i) const { return Sequence::from(raw_->seqs[i]); }
  int32_t max_draft(int32_t i) const { return raw_->max_draft[i]; }
  // Number of new hidden-state rows for sequence i (positions [L-1-n, L-1)); 0 if none.
  int32_t num_hidden(int32_t i) const { return raw_->num_hidden != nullptr ? raw_->num_hidden[i] : 0; }
  std::span<const float> target_hidden(int32_t i) const {
    return tensor_rows(raw_->target_hidden, offsets_[i], num_hidden(i));
  }
  int64_t hidden_size() const { return raw_->target_hidden.data ? raw_->target_hidden.shape[1] : 0; }
  // ABI 1.3: the auxiliary hidden states of the same positions, [num_hidden(i) * layers * hidden].
  std::span<const float> target_aux_hidden(int32_t i) const {
    if (raw_->struct_size < offsetof(specd_propose_batch, target_aux_hidden) + sizeof(specd_tensor_view)) return {};
    return aux_rows(raw_->target_aux_hidden, offsets_[i], num_hidden(i));
  }
  // Sets the draft of sequence i (at most max_draft(i) tokens; extra tokens are an error).
  void set_draft(int32_t i, std::span<const int32_t> tokens) {
    if (static_cast<int64_t>(tokens.size()) > raw_->max_draft[i])
      throw Error(detail::concat("draft of sequence ", i, " has ", tokens.size(), " tokens, at most ",
                                 raw_->max_draft[i], " allowed"),
                  SPECD_ERR_INTERNAL);
    for (size_t j = 0; j < tokens.size(); ++j)
      raw_->draft_tokens[static_cast<int64_t>(i) * raw_->k_max + j] = tokens[j];
    raw_->num_drafted[i] = static_cast<int32_t>(tokens.size());
  }
  // Whether this call takes trees (the proposer declared drafts_trees and the host is 1.3+).
  bool takes_trees() const {
    return raw_->struct_size >= offsetof(specd_propose_batch, draft_parents) + sizeof(int32_t*) &&
           raw_->draft_parents != nullptr;
  }
  // Sets the draft of sequence i as a tree: node j has token tokens[j] and parent parents[j]
  // (a node below j, or -1 for a child of the last committed token). Only when takes_trees().
  void set_tree(int32_t i, std::span<const int32_t> tokens, std::span<const int32_t> parents) {
    if (!takes_trees()) throw Error("set_tree: this propose call takes chains only", SPECD_ERR_INTERNAL);
    if (parents.size() != tokens.size())
      throw Error(
          detail::concat("tree of sequence ", i, ": ", tokens.size(), " tokens but ", parents.size(), " parents"),
          SPECD_ERR_INTERNAL);
    for (size_t j = 0; j < parents.size(); ++j)
      if (parents[j] < -1 || parents[j] >= static_cast<int32_t>(j))
        throw Error(
            detail::concat("tree of sequence ", i, ": node ", j, " has parent ", parents[j], ", outside [-1, ", j, ")"),
            SPECD_ERR_INTERNAL);
    set_draft(i, tokens);
    for (size_t j = 0; j < parents.size(); ++j)
      raw_->draft_parents[static_cast<int64_t>(i) * raw_->k_max + j] = parents[j];
  }
  // ABI 1.6: whether this call takes confidences (the proposer declared reports_confidence and
  // the host may cut this call's drafts by them).
  bool takes_confidence() const {
    return raw_->struct_size >= offsetof(specd_propose_batch, draft_confidence) + sizeof(float*) &&
           raw_->draft_confidence != nullptr;
  }
  // Sets the confidence of sequence i's drafts 0..n-1 (each clamped to [0, 1]; after set_draft,
  // at most num_drafted). Only when takes_confidence().
  void set_confidence(int32_t i, std::span<const float> confidence) {
    if (!takes_confidence()) throw Error("set_confidence: this propose call takes no confidences", SPECD_ERR_INTERNAL);
    if (static_cast<int64_t>(confidence.size()) > raw_->num_drafted[i])
      throw Error(detail::concat("confidence of sequence ", i, " has ", confidence.size(), " entries for ",
                                 raw_->num_drafted[i], " drafts"),
                  SPECD_ERR_INTERNAL);
    for (size_t j = 0; j < confidence.size(); ++j) {
      const float c = confidence[j];
      raw_->draft_confidence[static_cast<int64_t>(i) * raw_->k_max + j] = c >= 0 ? (c <= 1 ? c : 1.0f) : 0.0f;
    }
  }
  // Row of draft probabilities for sequence i, draft position j ([vocab]); only when the
  // proposer declared produces_draft_probs.
  std::span<float> draft_probs(int32_t i, int32_t j) {
    if (raw_->draft_probs == nullptr) throw Error("draft_probs requested but not allocated", SPECD_ERR_INTERNAL);
    return {raw_->draft_probs + (static_cast<int64_t>(i) * raw_->k_max + j) * raw_->vocab_size,
            static_cast<size_t>(raw_->vocab_size)};
  }
  specd_propose_batch* raw() { return raw_; }

 private:
  specd_propose_batch* raw_;
  std::vector<int64_t> offsets_;
};

// A scorer's batch: for sequence i, score its last token and drafts(i) on target().
class ScoreBatch {
 public:
  explicit ScoreBatch(specd_score_batch* raw) : raw_(raw) {}
  int32_t size() const { return raw_->num_seqs; }
  int32_t k_max() const { return raw_->k_max; }
  int32_t vocab_size() const { return raw_->vocab_size; }
  Sequence seq(int32_t i) const { return Sequence::from(raw_->seqs[i]); }
  std::span<const int32_t> drafts(int32_t i) const {
    return {raw_->draft_tokens + static_cast<int64_t>(i) * raw_->k_max, static_cast<size_t>(raw_->num_drafted[i])};
  }
  // Parents of sequence i's draft nodes (ABI 1.3 trees), or empty when the drafts are chains.
  std::span<const int32_t> parents(int32_t i) const {
    if (raw_->struct_size < offsetof(specd_score_batch, draft_parents) + sizeof(int32_t*) ||
        raw_->draft_parents == nullptr)
      return {};
    return {raw_->draft_parents + static_cast<int64_t>(i) * raw_->k_max, static_cast<size_t>(raw_->num_drafted[i])};
  }
  // The engine's target model (model services handle, valid during the call).
  specd_model* target() const { return raw_->target; }
  // Output row of sequence i, position j (0 = the last token, j = draft j-1): [vocab].
  std::span<float> target_logits(int32_t i, int32_t j) {
    return {raw_->target_logits + (static_cast<int64_t>(i) * (raw_->k_max + 1) + j) * raw_->vocab_size,
            static_cast<size_t>(raw_->vocab_size)};
  }
  bool wants_hidden() const { return raw_->target_hidden != nullptr; }
  // Hidden-state row of sequence i, position j: [hidden] (only when wants_hidden()).
  std::span<float> target_hidden(int32_t i, int32_t j, int64_t hidden) {
    if (raw_->target_hidden == nullptr) throw Error("target_hidden requested but not allocated", SPECD_ERR_INTERNAL);
    return {raw_->target_hidden + (static_cast<int64_t>(i) * (raw_->k_max + 1) + j) * hidden,
            static_cast<size_t>(hidden)};
  }
  specd_score_batch* raw() { return raw_; }

 private:
  specd_score_batch* raw_;
};

// The verifier sees the raw struct: it is a flat, device-resident layout that kernels index
// directly. Helpers here only add the index arithmetic.
class VerifyBatch {
 public:
  explicit VerifyBatch(const specd_verify_batch* raw) : raw_(raw) {}
  const specd_verify_batch& raw() const { return *raw_; }
  bool on_cuda() const { return raw_->device.type == SPECD_DEVICE_CUDA; }

 private:
  const specd_verify_batch* raw_;
};

}  // namespace specd::sdk

// The batched, variable-length forward's inputs and outputs.
//
// One call handles any mix of prefill chunks, single-token decodes and multi-token scoring
// (n new tokens per sequence, causal among themselves, over the sequence's paged history):
// speculative scoring of k drafts is a sequence with k+1 new tokens and LogitsMode::kAll
// (multi-query), or k+1 rows of one token each (batch expansion): a sequence may appear in
// several rows, each continuing the previous one, and every layer writes all new K/V before
// attending, so a row sees the positions its sequence's earlier rows add in the same call.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_cache.hpp"

namespace specd::model {

enum class LogitsMode {
  kNone,  // only fill the KV cache (e.g. a prefill chunk that is not the prompt's last)
  kLast,  // the row of the last new token
  kAll,   // one row per new token
};

struct SequenceInput {
  kv::SeqId seq = 0;
  // New tokens, placed at positions [kv.num_tokens(seq), kv.num_tokens(seq) + size). The KV
  // cache must have room reserved for them (KvCache::reserve) before the call.
  std::span<const int32_t> tokens;
  LogitsMode logits = LogitsMode::kLast;
  // Tree attention (speculative draft trees): when not empty, the parents of the sequence's last
  // tree.size() positions after this call (nodes cached by earlier calls, then the new tokens):
  // an index into that region below its own, or -1 for a node that follows the linear prefix.
  // A node attends to the prefix, its ancestors and itself, at rotary position prefix + depth;
  // its K/V is stored at its own cache position (kernels/attention.hpp). Empty: causal. A
  // sequence with a tree appears in one row only.
  std::span<const int32_t> tree = {};
};

struct ForwardBatch {
  std::vector<SequenceInput> seqs;
  bool return_hidden = false;  // also return final hidden states (after the final norm)
  // With return_hidden: hidden states of EVERY new token (rows in token order, see
  // ForwardOutput::token_start) instead of only the logits rows. Logits are unaffected.
  bool hidden_all = false;
  // With return_hidden and hidden_all: also the residual stream of these layers for every new
  // token (ForwardOutput::aux_hidden). Index l in [0, num_layers]: the stream entering decoder
  // layer l, before its norm (0: the token embeddings; num_layers: the last layer's output
  // before the final norm), i.e. EAGLE-3's auxiliary hidden states.
  std::span<const int32_t> aux_layers;
  // MTP modules only (LlamaWeights::is_mtp()): [total new tokens, hidden], the previous
  // depth's hidden state paired with each new token, in token order. Must be null otherwise.
  const float* input_hidden = nullptr;
  // Width of input_hidden's rows: 0 = hidden_size. An EAGLE-3 head (LlamaWeights::is_eagle3)
  // also takes 3 * the target's hidden size: the target's three auxiliary states, fused by fc.
  int64_t input_hidden_width = 0;
};

// Rows are the requested positions, sequence by sequence in batch order. Reuse one
// ForwardOutput across calls to avoid reallocating.
struct ForwardOutput {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  std::vector<int32_t> row_start;    // [num_seqs + 1]: rows of seqs[s] are [row_start[s], row_start[s+1])
  std::vector<float> logits;         // [num_rows, vocab_size]
  std::vector<float> hidden;         // [num_rows, hidden_size] when return_hidden; with hidden_all
                                     // [num_tokens, hidden_size], rows indexed like token_start
  std::vector<float> aux_hidden;     // [num_tokens, aux_layers.size(), hidden_size] (aux_layers)
  std::vector<int32_t> token_start;  // [num_seqs + 1]: new tokens of seqs[s] are
                                     // [token_start[s], token_start[s+1]) in batch token order

  int32_t num_rows() const { return row_start.empty() ? 0 : row_start.back(); }
  std::span<const float> logits_row(int32_t row) const {
    return {logits.data() + static_cast<int64_t>(row) * vocab_size, static_cast<size_t>(vocab_size)};
  }
  std::span<const float> hidden_row(int32_t row) const {
    return {hidden.data() + static_cast<int64_t>(row) * hidden_size, static_cast<size_t>(hidden_size)};
  }
};

}  // namespace specd::model

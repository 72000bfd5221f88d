// batch_expansion: the scorer of vLLM's first SpecDecodeWorker (BatchExpansionTop1Scorer). A
// sequence with m drafts is scored as m+1 single-token sequences, [t_L-1], [d_0], ...,
// [d_{m-1}], one batched target forward for the whole batch; each row attends over the
// sequence's cached positions plus the ones the earlier rows of the same forward write, so row j
// gives the target's distribution after d_{j-1}. It exists to compare with the built-in
// multi-query scorer (one row of m+1 tokens per sequence), which reads each sequence's KV once
// and does not pay for m+1 rows of bookkeeping; both leave the same KV and the same logits up to
// float rounding, so greedy output is identical.
//
// Built only against the SDK, on model services (ABI 1.1: several rows per sequence in one
// forward).
#include <specd/sdk/model_client.hpp>
#include <specd/sdk/plugin.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace {

namespace sdk = specd::sdk;

class BatchExpansionScorer : public sdk::Scorer {
 public:
  // No parameters: any key under speculative.scorer is reported as unknown.
  BatchExpansionScorer(sdk::Host host, sdk::Params& /*params*/) {
    if (host.models() == nullptr)
      throw sdk::Error("batch_expansion scorer needs the host's model services, and this host provides none",
                       SPECD_ERR_UNSUPPORTED);
    if (host.host_abi_minor() < 1)
      throw sdk::Error(sdk::detail::concat("batch_expansion scorer needs plugin ABI 1.1 (several rows per sequence "
                                           "in one forward); this host has 1.",
                                           host.host_abi_minor()),
                       SPECD_ERR_UNSUPPORTED);
    client_.emplace(*host.models(), host.host_ctx(), "batch_expansion");
    hidden_size_ = client_->info(nullptr).hidden_size;
  }
  static void validate(sdk::Params& /*params*/) {}

  void score(sdk::ScoreBatch& batch) override {
    const auto V = static_cast<size_t>(batch.vocab_size());
    seq_ids_.clear();
    tokens_.clear();
    for (int32_t i = 0; i < batch.size(); ++i) {
      const sdk::Sequence seq = batch.seq(i);
      if (seq.tokens.empty()) throw sdk::Error(sdk::detail::concat("sequence ", seq.id, " has no tokens"));
      seq_ids_.push_back(seq.id);
      tokens_.push_back(seq.tokens.back());
      for (const int32_t d : batch.drafts(i)) {
        seq_ids_.push_back(seq.id);
        tokens_.push_back(d);
      }
    }
    const size_t rows = tokens_.size();
    num_new_.assign(rows, 1);
    logits_.resize(rows * V);
    hidden_.resize(batch.wants_hidden() ? rows * static_cast<size_t>(hidden_size_) : 0);
    specd_forward_batch fb{};
    fb.struct_size = sizeof(fb);
    fb.num_seqs = static_cast<int32_t>(rows);
    fb.seq_ids = seq_ids_.data();
    fb.num_new = num_new_.data();
    fb.tokens = tokens_.data();
    fb.all_logits = 0;  // one token per row: its logits
    fb.logits = logits_.data();
    fb.hidden = batch.wants_hidden() ? hidden_.data() : nullptr;
    client_->forward(batch.target(), fb);

    size_t row = 0;  // contract the rows back into [num_seqs, k_max + 1, ...]
    for (int32_t i = 0; i < batch.size(); ++i) {
      const auto positions = static_cast<int32_t>(batch.drafts(i).size()) + 1;
      for (int32_t j = 0; j < positions; ++j, ++row) {
        std::memcpy(batch.target_logits(i, j).data(), logits_.data() + row * V, V * sizeof(float));
        if (batch.wants_hidden())
          std::memcpy(batch.target_hidden(i, j, hidden_size_).data(), hidden_.data() + row * hidden_size_,
                      static_cast<size_t>(hidden_size_) * sizeof(float));
      }
    }
  }

 private:
  std::optional<sdk::ModelClient> client_;
  int64_t hidden_size_ = 0;
  // Per-call buffers, reused.
  std::vector<uint64_t> seq_ids_;
  std::vector<int32_t> num_new_, tokens_;
  std::vector<float> logits_, hidden_;
};

}  // namespace

SPECD_PLUGIN(
    "batch_expansion", "1.0.0",
    specd::sdk::scorer<BatchExpansionScorer>("batch_expansion",
                                             "Batch expansion: each draft scored as its own one-token sequence (vLLM's "
                                             "first SpecDecodeWorker scorer), for comparison with the built-in mqa"))

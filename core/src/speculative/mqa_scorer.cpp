#include <algorithm>

#include "specd/error.hpp"
#include "specd/log.hpp"
#include "speculative/scorer.hpp"

namespace specd::speculative {
namespace {

// A chunk of prompt positions of a request that asks for prompt logprobs: logits of every position.
bool wants_prompt_logits(const sched::StepRow& row) {
  return row.seq->params.prompt_logprobs >= 0 && !row.drafted() && row.start < row.seq->num_prompt;
}

}  // namespace

void MqaScorer::forward(sched::StepBatch& batch, bool want_hidden, bool skip_speculating) {
  auto selected = [&](const sched::StepRow& row) { return !row.failed() && !(skip_speculating && row.speculates()); };
  // Drafted rows feed [chunk..., drafts...] from one buffer, sized before any span into it.
  size_t extra = 0, tree = 0;
  for (const sched::StepRow& row : batch.rows) {
    if (selected(row) && row.drafted()) extra += static_cast<size_t>(row.n) + row.drafts.size();
    if (selected(row) && row.tree()) tree += 1 + row.drafts.size();
  }
  inputs_.resize(extra);
  trees_.resize(tree);
  size_t tree_offset = 0;
  rows_.clear();
  batch_.seqs.clear();
  size_t offset = 0;
  for (sched::StepRow& row : batch.rows) {
    if (!selected(row)) continue;
    const sched::Sequence& seq = *row.seq;
    std::span<const int32_t> tokens =
        std::span<const int32_t>(seq.tokens).subspan(static_cast<size_t>(row.start), static_cast<size_t>(row.n));
    model::LogitsMode mode = row.sample ? model::LogitsMode::kLast : model::LogitsMode::kNone;
    if (wants_prompt_logits(row)) mode = model::LogitsMode::kAll;
    if (row.drafted()) {
      int32_t* dst = inputs_.data() + offset;
      std::copy(tokens.begin(), tokens.end(), dst);
      std::copy(row.drafts.begin(), row.drafts.end(), dst + tokens.size());
      tokens = {dst, tokens.size() + row.drafts.size()};
      offset += tokens.size();
      mode = model::LogitsMode::kAll;
    }
    std::span<const int32_t> tree;
    if (row.tree()) {  // region: the chunk's last token (the root), then the drafts
      int32_t* dst = trees_.data() + tree_offset;
      dst[0] = -1;
      for (size_t j = 0; j < row.drafts.size(); ++j) dst[j + 1] = row.draft_parents[j] + 1;
      tree = {dst, row.drafts.size() + 1};
      tree_offset += tree.size();
    }
    batch_.seqs.push_back({static_cast<kv::SeqId>(seq.id), tokens, mode, tree});
    rows_.push_back(&row);
  }
  if (rows_.empty()) return;
  batch_.return_hidden = want_hidden;
  batch_.hidden_all = want_hidden;
  batch_.aux_layers = want_hidden ? std::span<const int32_t>(aux_layers_) : std::span<const int32_t>();
  try {
    model_.forward(batch_, kv_, out_);
  } catch (const Error& e) {
    // The forward failed as a whole (no KV length changed): its rows fail, the others go on.
    log::get("engine").error("forward failed for {} sequences: {}", rows_.size(), e.what());
    for (sched::StepRow* row : rows_) row->fail(std::string("forward failed: ") + e.what());
    return;
  }
  for (size_t b = 0; b < rows_.size(); ++b) {
    sched::StepRow& row = *rows_[b];
    const float* first = out_.logits.data() + static_cast<size_t>(out_.row_start[b]) * out_.vocab_size;
    if (wants_prompt_logits(row)) {
      row.chunk_logits = first;
      if (row.sample) row.logits = first + static_cast<size_t>(row.n - 1) * out_.vocab_size;
    } else if (row.sample) {
      row.logits = first;
    }
    if (want_hidden) row.hidden = out_.hidden.data() + static_cast<size_t>(out_.token_start[b]) * out_.hidden_size;
    if (want_hidden && !aux_layers_.empty())
      row.aux_hidden =
          out_.aux_hidden.data() + static_cast<size_t>(out_.token_start[b]) * aux_layers_.size() * out_.hidden_size;
  }
}

}  // namespace specd::speculative

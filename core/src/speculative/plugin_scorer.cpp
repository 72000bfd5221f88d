#include <algorithm>

#include "specd/error.hpp"
#include "specd/log.hpp"
#include "speculative/abi_views.hpp"
#include "speculative/scorer.hpp"
#include "speculative/speculator.hpp"

namespace specd::speculative {

PluginScorer::PluginScorer(std::unique_ptr<plugin::ScorerInstance> plugin, specd_model* target, kv::KvCache& kv,
                           std::unique_ptr<MqaScorer> forward, int64_t vocab_size, int64_t hidden_size)
    : plugin_(std::move(plugin)),
      target_(target),
      kv_(kv),
      forward_(std::move(forward)),
      vocab_(vocab_size),
      hidden_(hidden_size) {}

void PluginScorer::score(sched::StepBatch& batch, bool want_hidden) {
  forward_->forward(batch, want_hidden, /*skip_speculating=*/true);  // prefill chunks, plain decodes
  rows_.clear();
  for (sched::StepRow& row : batch.rows)
    if (row.speculates() && !row.failed()) rows_.push_back(&row);
  if (rows_.empty()) return;
  const size_t b = rows_.size();
  int32_t k = 0;
  for (const sched::StepRow* row : rows_) k = std::max(k, static_cast<int32_t>(row->drafts.size()));
  const size_t width = static_cast<size_t>(k) + 1;
  seqs_.resize(b);
  counts_.resize(b);
  drafts_.assign(b * static_cast<size_t>(std::max(k, 1)), -1);
  bool trees = false;
  for (const sched::StepRow* row : rows_) trees = trees || row->tree();
  parents_.assign(trees ? b * static_cast<size_t>(std::max(k, 1)) : 0, -1);
  logits_.resize(b * width * static_cast<size_t>(vocab_));
  hidden_states_.resize(want_hidden ? b * width * static_cast<size_t>(hidden_) : 0);
  for (size_t i = 0; i < b; ++i) {
    const sched::StepRow& row = *rows_[i];
    seqs_[i] = abi_sequence(*row.seq, static_cast<int64_t>(row.seq->tokens.size()));
    counts_[i] = static_cast<int32_t>(row.drafts.size());
    std::copy(row.drafts.begin(), row.drafts.end(), drafts_.begin() + static_cast<ptrdiff_t>(i) * k);
    for (int32_t j = 0; trees && j < counts_[i]; ++j)  // a chain row of a tree step: parents j - 1
      parents_[i * static_cast<size_t>(k) + static_cast<size_t>(j)] =
          row.tree() ? row.draft_parents[static_cast<size_t>(j)] : j - 1;
  }
  specd_score_batch sb{};
  sb.struct_size = sizeof(sb);
  sb.num_seqs = static_cast<int32_t>(b);
  sb.seqs = seqs_.data();
  sb.draft_tokens = drafts_.data();
  sb.num_drafted = counts_.data();
  sb.k_max = k;
  sb.vocab_size = static_cast<int32_t>(vocab_);
  sb.target = target_;
  sb.target_logits = logits_.data();
  sb.target_hidden = want_hidden ? hidden_states_.data() : nullptr;
  sb.draft_parents = trees ? parents_.data() : nullptr;  // only scorers that score trees get them
  try {
    plugin_->score(sb);
  } catch (const Error& e) {
    log::get("spec").error("scorer failed for {} sequences: {}", b, e.what());
    for (sched::StepRow* row : rows_) row->fail(std::string("speculative decoding failed: ") + e.what());
    return;
  }
  for (size_t i = 0; i < b; ++i) {
    sched::StepRow& row = *rows_[i];
    row.logits = logits_.data() + i * width * static_cast<size_t>(vocab_);
    if (want_hidden) row.hidden = hidden_states_.data() + i * width * static_cast<size_t>(hidden_);
    check_kv(row);
  }
}

// The plugin must leave exactly what one multi-query forward leaves: the chunk and every draft.
void PluginScorer::check_kv(sched::StepRow& row) const {
  const auto id = static_cast<kv::SeqId>(row.seq->id);
  const int64_t want = static_cast<int64_t>(row.start) + row.n + static_cast<int64_t>(row.drafts.size());
  const int64_t have = kv_.num_tokens(id);
  if (have != want)
    row.fail("speculative decoding failed: scorer '" + name() + "' left " + std::to_string(have) +
             " tokens of sequence " + std::to_string(row.seq->id) + " in the target's KV cache, expected " +
             std::to_string(want));
}

std::unique_ptr<Scorer> Speculator::make_scorer(model::LlamaModel& model, kv::KvCache& kv) {
  auto mqa = std::make_unique<MqaScorer>(model, kv);
  mqa->set_aux_layers(aux_layers_);
  if (!on() || scorer_cfg_.name.empty() || scorer_cfg_.name == "mqa") return mqa;
  if (!aux_layers_.empty())
    throw Error(ErrorCode::kConfig, "speculative.scorer: proposer '" + proposer_->name() +
                                        "' reads the target's hidden states of named layers, which only the built-in "
                                        "mqa scorer returns (scorer '" +
                                        scorer_cfg_.name + "')");
  auto plugin = registry_.create_scorer(scorer_cfg_.name, scorer_cfg_.params, host_->binding());
  if (proposer_->capabilities().drafts_trees != 0 && plugin->capabilities().scores_trees == 0)
    throw Error(ErrorCode::kConfig, "speculative.scorer: scorer '" + plugin->name() +
                                        "' scores chains only, but proposer '" + proposer_->name() +
                                        "' drafts trees (use the built-in mqa scorer)");
  specd_model* target = host_->bind_target(model, kv);
  log::get("spec").info("scorer: plugin '{}' scores the speculating sequences", plugin->name());
  return std::make_unique<PluginScorer>(std::move(plugin), target, kv, std::move(mqa), vocab_, hidden_size_);
}

}  // namespace specd::speculative

// The scorer stage of an engine step: one target forward over every row of a StepBatch. Prefill
// chunks fill the KV cache; a row that samples runs its last token followed by its drafts and
// gets logits for each (row.logits, [1 + drafts, vocab]); with want_hidden every row also gets
// the target's final hidden states of every position it ran (row.hidden).
//
// `speculative.scorer` picks the implementation (docs/speculative.md):
//  - mqa (built in, the default and the only one without a `speculative` section): one
//    multi-query forward, a row of 1 + m new tokens per drafted sequence over the paged KV;
//  - a scorer plugin (e.g. batch_expansion): the plugin scores the rows that speculate through
//    model services on the engine's target; the other rows go through the mqa forward.
// Both leave the target's KV holding every scored position; Scheduler::commit rolls back the
// rejected drafts. A failed forward fails the rows it covered (row.error), never the step.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kv/kv_cache.hpp"
#include "model/forward.hpp"
#include "model/llama.hpp"
#include "plugin/instance.hpp"
#include "sched/scheduler.hpp"
#include "sched/step_batch.hpp"

namespace specd::speculative {

class Scorer {
 public:
  virtual ~Scorer() = default;
  virtual const std::string& name() const = 0;
  virtual void score(sched::StepBatch& batch, bool want_hidden) = 0;
};

class MqaScorer final : public Scorer {
 public:
  // model and kv are the engine's target and its cache; both must outlive the scorer.
  MqaScorer(model::LlamaModel& model, kv::KvCache& kv) : model_(model), kv_(kv) {}
  const std::string& name() const override { return name_; }
  void score(sched::StepBatch& batch, bool want_hidden) override { forward(batch, want_hidden, false); }
  // With want_hidden, rows also get these layers' hidden states (StepRow::aux_hidden).
  void set_aux_layers(std::vector<int32_t> layers) { aux_layers_ = std::move(layers); }
  // The forward over every row that has not failed, or (skip_speculating) every such row but
  // those that speculate.
  void forward(sched::StepBatch& batch, bool want_hidden, bool skip_speculating);

 private:
  model::LlamaModel& model_;
  kv::KvCache& kv_;
  std::string name_ = "mqa";
  std::vector<sched::StepRow*> rows_;  // row of each forward sequence
  std::vector<int32_t> inputs_;        // [last token, drafts...] of drafted rows
  std::vector<int32_t> trees_;         // [-1, parent + 1 ...] of tree rows (SequenceInput::tree)
  std::vector<int32_t> aux_layers_;
  model::ForwardBatch batch_;
  model::ForwardOutput out_;
};

class PluginScorer final : public Scorer {
 public:
  // target: the model services handle of the engine's target (ModelHost::bind_target); kv: the
  // target's cache, to check what the plugin left in it; forward: runs the other rows.
  PluginScorer(std::unique_ptr<plugin::ScorerInstance> plugin, specd_model* target, kv::KvCache& kv,
               std::unique_ptr<MqaScorer> forward, int64_t vocab_size, int64_t hidden_size);
  const std::string& name() const override { return plugin_->name(); }
  void score(sched::StepBatch& batch, bool want_hidden) override;

 private:
  void check_kv(sched::StepRow& row) const;

  std::unique_ptr<plugin::ScorerInstance> plugin_;
  specd_model* target_;
  kv::KvCache& kv_;
  std::unique_ptr<MqaScorer> forward_;
  int64_t vocab_;
  int64_t hidden_;
  std::vector<sched::StepRow*> rows_;
  std::vector<specd_sequence> seqs_;
  std::vector<int32_t> drafts_, counts_, parents_;
  std::vector<float> logits_, hidden_states_;
};

}  // namespace specd::speculative

#include "server/engine_exporter.hpp"

#include <utility>

namespace specd::server {

EngineExporter::EngineExporter(MetricsRegistry& r)
    : kv_blocks_(r.gauge("specd_kv_cache_blocks", "KV cache blocks of the target model.").with({})),
      kv_blocks_used_(r.gauge("specd_kv_cache_blocks_used", "KV cache blocks holding sequences.").with({})),
      kv_usage_(r.gauge("specd_kv_cache_usage_ratio", "Fraction of KV cache blocks in use.").with({})),
      kv_blocks_cached_(r.gauge("specd_prefix_cache_blocks",
                                "Free KV cache blocks that keep a cached prefix (evicted least recently used first).")
                            .with({})),
      preemptions_(r.counter("specd_preemptions_total", "Sequences preempted to free KV blocks.").with({})),
      prefix_queries_(r.counter("specd_prefix_cache_queries_total",
                                "Prompt tokens of admitted sequences looked up in the prefix "
                                "cache.")
                          .with({})),
      prefix_hits_(
          r.counter("specd_prefix_cache_hits_total", "Prompt tokens whose KV the prefix cache held.").with({})),
      step_seconds_(r.counter("specd_step_seconds_total",
                              "Engine step time by phase (StepStats, docs/scheduling.md): wall, forward (the "
                              "target's), propose, verify, commit, schedule, output; with async scheduling "
                              "in_flight, overlap (worker busy meanwhile) and wait.",
                              {"phase"})),
      structured_requests_(
          r.counter("specd_structured_requests_total", "Requests with structured output (docs/structured-output.md).")
              .with({})),
      grammar_masks_(r.counter("specd_grammar_masks_total",
                               "Grammar token masks: computed (a vocabulary-trie walk) or taken from the cache.",
                               {"source"})),
      grammar_mask_seconds_(
          r.counter("specd_grammar_mask_seconds_total", "Time spent computing grammar token masks.").with({})),
      grammar_drafts_(r.counter("specd_grammar_draft_tokens_total",
                                "Draft tokens the grammar cut before scoring (cut) or added from forced text (forced).",
                                {"kind"})),
      moe_layer_passes_(r.counter("specd_moe_layer_passes_total",
                                  "Mixture-of-experts layers run by the target's forwards (one per layer per forward).")
                            .with({})),
      moe_experts_read_(r.counter("specd_moe_experts_read_total",
                                  "Experts whose weights the target read: each chosen expert once per layer pass, "
                                  "however many of the forward's rows (batch, scoring positions) chose it.")
                            .with({})),
      moe_expert_rows_(
          r.counter("specd_moe_expert_rows_total", "(token, expert) pairs the target's routers chose.").with({})),
      moe_read_ratio_(r.gauge("specd_moe_expert_read_ratio",
                              "Expert bytes read over what one row alone would read (experts read / (layer passes "
                              "* experts per token)), since start: 1 when each forward runs one token.")
                          .with({})) {}

void EngineExporter::set_engine(const EngineInfo& info) {
  kv_blocks_.set(info.kv_num_blocks);
}

void EngineExporter::collect(const EngineStats& e, const StepStats& s) {
  const int32_t used = e.kv_blocks_total - e.kv_blocks_free;
  kv_blocks_used_.set(used);
  kv_usage_.set(e.kv_blocks_total > 0 ? static_cast<double>(used) / e.kv_blocks_total : 0.0);
  kv_blocks_cached_.set(e.kv_blocks_cached);
  preemptions_.set_total(static_cast<double>(e.num_preemptions));
  prefix_queries_.set_total(static_cast<double>(e.prefix_cache_queries));
  prefix_hits_.set_total(static_cast<double>(e.prefix_cache_hits));
  structured_requests_.set_total(static_cast<double>(e.structured_requests));
  grammar_masks_.with({"computed"}).set_total(static_cast<double>(e.grammar_masks_computed));
  grammar_masks_.with({"cached"}).set_total(static_cast<double>(e.grammar_masks_cached));
  grammar_mask_seconds_.set_total(e.grammar_mask_seconds);
  grammar_drafts_.with({"cut"}).set_total(static_cast<double>(e.grammar_cut_drafts));
  grammar_drafts_.with({"forced"}).set_total(static_cast<double>(e.grammar_forced_drafts));
  if (e.moe_layer_passes > 0) {
    moe_layer_passes_.set_total(static_cast<double>(e.moe_layer_passes));
    moe_experts_read_.set_total(static_cast<double>(e.moe_experts_read));
    moe_expert_rows_.set_total(static_cast<double>(e.moe_expert_rows));
    moe_read_ratio_.set(static_cast<double>(e.moe_experts_read) /
                        (static_cast<double>(e.moe_layer_passes) * e.moe_experts_per_token));
  }
  const std::pair<const char*, double> phases[] = {
      {"wall", s.wall},       {"forward", s.forward},   {"propose", s.propose}, {"verify", s.verify},
      {"commit", s.commit},   {"schedule", s.schedule}, {"output", s.output},   {"in_flight", s.in_flight},
      {"overlap", s.overlap}, {"wait", s.wait}};
  for (const auto& [phase, seconds] : phases) step_seconds_.with({phase}).set_total(seconds);
}

}  // namespace specd::server

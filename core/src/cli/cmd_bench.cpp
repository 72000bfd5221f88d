// specd bench (--config FILE | --model DIR) [--prompt-tokens N] [--gen-tokens N] [--batch 1,8]
//             [--prompt TEXT | --prompt-file FILE] [--score-k K] [--dtype f32,bf16,q8_0,...]
//             [--scorers mqa,batch_expansion] [--compare-k plain,2,4,8,dynamic [--drop-below R] [--interleave
//             runs|steps]]
// Throughput of the engine on synthetic prompts, per weight dtype (one engine each): prefill
// tokens/s, decode tokens/s per batch size with the ratio to the memory-bandwidth floor
// (weight bytes per step divided by the read bandwidth measured before and after the runs),
// the cost of scoring k+1 new tokens per sequence relative to a one-token decode step (timed
// on the target model directly), and peak RSS.
//
// With a `speculative` config section every decode run is done twice on the same prompts and
// the same engine: plain (Request.speculative.enabled = false) and speculative, and the report
// adds the speedup, the acceptance metrics and the propose/score/verify time split (deltas of
// Engine::spec_metrics() around the speculative run). Every decode run also reports where its
// step time went (Engine::step_stats(): the target's forward against everything outside it and,
// with scheduler.async_scheduling, the overlap achieved; docs/scheduling.md).
//
// With --scorers the speculative runs are repeated once per speculative.scorer instead
// (bench_scorers.hpp), e.g. the built-in multi-query scorer against the batch_expansion plugin;
// with --compare-k once per proposal-length arm: plain, static k, dynamic (bench_compare_k.hpp).
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <vector>

#include "cli/arm_report.hpp"
#include "cli/bench_compare_k.hpp"
#include "cli/bench_decode.hpp"
#include "cli/bench_multi_turn.hpp"
#include "cli/bench_scorers.hpp"
#include "cli/bench_scoring.hpp"
#include "cli/commands.hpp"
#include "cli/model_flags.hpp"
#include "cli/policy_json.hpp"
#include "kv/kv_cache.hpp"
#include "model/checkpoint.hpp"
#include "model/forward.hpp"
#include "model/llama.hpp"
#include "model/weights.hpp"
#include "specd/engine.hpp"
#include "specd/error.hpp"
#include "specd/kernels/bandwidth.hpp"
#include "specd/kernels/parallel.hpp"

namespace specd::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchOptions {
  ModelFlags model;
  int32_t prompt_tokens = 128;
  int32_t gen_tokens = 32;
  std::vector<int32_t> batches = {1, 8};
  int32_t repeats = 2;
  double drop_below = CompareKOptions{}.drop_below;  // --compare-k racing
  std::string interleave = "runs";                   // --compare-k: runs | steps
  bool json = false;
  std::string prompt;                  // decode runs use this text (tokenized) instead of synthetic ids
  std::string prompt_file;             // same, read from a file
  int32_t score_k = 4;                 // k of the scoring-cost measurement: score(k+1) / decode(1)
  std::vector<std::string> dtypes;     // one engine per weight dtype; empty = the configured one
  std::vector<std::string> scorers;    // --scorers: compare speculative.scorer choices instead
  std::vector<std::string> compare_k;  // --compare-k: compare plain, static k and dynamic instead
  int32_t multi_turn = 0;              // --multi-turn: a chat of this many turns, prefix caching on and off
  int32_t system_tokens = MultiTurnBenchOptions{}.system_tokens;
  int32_t turn_tokens = MultiTurnBenchOptions{}.user_tokens;
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

nlohmann::json step_time_json(const StepStats& t) {
  const double steps = static_cast<double>(std::max<uint64_t>(t.steps, 1));
  return {{"steps", t.steps},
          {"wall_ms_per_step", t.wall * 1e3 / steps},
          {"forward_ms_per_step", t.forward * 1e3 / steps},
          {"outside_forward_fraction", t.wall > 0 ? 1.0 - t.forward / t.wall : 0.0},
          {"propose_s", t.propose},
          {"verify_s", t.verify},
          {"commit_s", t.commit},
          {"schedule_s", t.schedule},
          {"output_s", t.output},
          {"in_flight_s", t.in_flight},
          {"overlap_s", t.overlap},
          {"wait_s", t.wait}};
}

// "step 1.23 ms: forward 0.80 ms, 35% outside it (propose 3%, verify 2%, commit 1%, schedule 4%,
// output 5%); async overlap 0.31 ms/step"
std::string step_time_line(const StepStats& t) {
  const double steps = static_cast<double>(std::max<uint64_t>(t.steps, 1));
  auto pct = [&](double x) { return t.wall > 0 ? 100.0 * x / t.wall : 0.0; };
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "step %.3f ms: forward %.3f ms, %.0f%% outside it (propose %.0f%%, verify %.0f%%, commit %.0f%%, "
                "schedule %.0f%%, output %.0f%%)",
                t.wall * 1e3 / steps, t.forward * 1e3 / steps, t.wall > 0 ? 100.0 - pct(t.forward) : 0.0,
                pct(t.propose), pct(t.verify), pct(t.commit), pct(t.schedule), pct(t.output));
  std::string line = buf;
  if (t.in_flight > 0) {
    std::snprintf(buf, sizeof buf, "; async overlap %.3f ms/step, wait %.3f ms/step", t.overlap * 1e3 / steps,
                  t.wait * 1e3 / steps);
    line += buf;
  }
  return line;
}

// --prompt, or the text of --prompt-file; empty: synthetic prompts.
std::string bench_prompt_text(const BenchOptions& o) {
  if (o.prompt_file.empty()) return o.prompt;
  std::ifstream in(o.prompt_file, std::ios::binary);
  if (!in) throw Error(ErrorCode::kInvalidArgument, "cannot read --prompt-file " + o.prompt_file);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<int32_t> bench_prompt_ids(const BenchOptions& o, const Engine& engine) {
  const std::string text = bench_prompt_text(o);
  if (text.empty()) return {};
  std::vector<int32_t> ids = engine.encode(text);
  if (ids.empty()) throw Error(ErrorCode::kInvalidArgument, "the bench prompt encodes to no tokens");
  return ids;
}

struct SpecRow {
  DecodeResult plain;
  DecodeResult spec;
};

double bench_prefill(Engine& engine, int32_t prompt_tokens, uint64_t salt) {
  Request r;
  r.prompt_ids = synthetic_prompt(prompt_tokens, engine.info().vocab_size, salt);
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 1;
  r.sampling.ignore_eos = true;
  engine.add_request(1, r);
  const auto t0 = Clock::now();
  while (engine.has_unfinished()) {
    for (const RequestOutput& o : engine.step()) {
      if (o.finish_reason == FinishReason::kError)
        throw Error(ErrorCode::kInternal, "bench request failed: " + o.error);
    }
  }
  return prompt_tokens / seconds_since(t0);
}

nlohmann::json spec_json(const SpecRow& r) {
  const spec::SpecMetrics& m = r.spec.spec;
  const double total = m.propose_seconds + m.score_seconds + m.verify_seconds;
  const double steps = static_cast<double>(std::max<uint64_t>(m.num_steps, 1));
  nlohmann::json per_position = nlohmann::json::array();
  for (size_t i = 0; i < m.drafted_at.size(); ++i) per_position.push_back(m.acceptance_at(i));
  return {{"batch", r.plain.batch},
          {"dynamic", policy_json(m.policy)},
          {"plain", {{"tokens_per_s", r.plain.tokens_per_s}, {"step_ms", r.plain.step_ms}}},
          {"speculative",
           {{"tokens_per_s", r.spec.tokens_per_s},
            {"step_ms", r.spec.step_ms},
            {"tokens_per_step", r.spec.steps > 0 ? static_cast<double>(r.spec.tokens) / r.spec.steps : 0.0}}},
          {"speedup", r.plain.tokens_per_s > 0 ? r.spec.tokens_per_s / r.plain.tokens_per_s : 0.0},
          {"num_steps", m.num_steps},
          {"num_drafts", m.num_drafts},
          {"draft_tokens", m.draft_tokens},
          {"accepted_tokens", m.accepted_tokens},
          {"emitted_tokens", m.emitted_tokens},
          {"acceptance_rate", m.acceptance_rate()},
          {"mean_acceptance_length", m.mean_acceptance_length()},
          {"system_efficiency", m.system_efficiency()},
          {"acceptance_per_position", per_position},
          {"step_time", step_time_json(r.spec.timing)},
          {"time",
           {{"propose_s", m.propose_seconds},
            {"score_s", m.score_seconds},
            {"verify_s", m.verify_seconds},
            {"propose_ms_per_step", m.propose_seconds * 1e3 / steps},
            {"score_ms_per_step", m.score_seconds * 1e3 / steps},
            {"verify_ms_per_step", m.verify_seconds * 1e3 / steps},
            {"propose_fraction", total > 0 ? m.propose_seconds / total : 0.0},
            {"score_fraction", total > 0 ? m.score_seconds / total : 0.0},
            {"verify_fraction", total > 0 ? m.verify_seconds / total : 0.0}}}};
}

// Everything measured for one weight dtype (one engine).
struct RunResult {
  EngineInfo info;
  // Per A/B arm over all speculative runs (plain runs use no arm), with the engine-wide metrics
  // of the same runs for the shadow arms' cost per step.
  std::vector<spec::ArmMetrics> arms;
  spec::SpecMetrics spec_total;
  double load_s = 0;
  double prefill = 0;  // tokens/s
  std::vector<SpecRow> rows;
  std::vector<ScoringResult> scoring;
  double peak_rss_mib = 0;
};

RunResult run_one(const BenchOptions& o, const config::EngineConfig& cfg) {
  RunResult res;
  const auto t_load = Clock::now();
  Engine engine(cfg);
  res.load_s = seconds_since(t_load);
  res.info = engine.info();
  const bool speculative = !res.info.proposer.empty();
  const std::vector<int32_t> prompt = bench_prompt_ids(o, engine);
  const int32_t decode_prompt_tokens = prompt.empty() ? o.prompt_tokens : static_cast<int32_t>(prompt.size());
  for (int i = 0; i < std::max(1, o.repeats); ++i)
    res.prefill = std::max(res.prefill, bench_prefill(engine, o.prompt_tokens, 100 + static_cast<uint64_t>(i)));
  for (int32_t b : o.batches) {
    SpecRow best;
    for (int i = 0; i < std::max(1, o.repeats); ++i) {
      const uint64_t salt = 1000 * static_cast<uint64_t>(i + 1);
      SpeculativeOptions plain;
      plain.enabled = false;
      DecodeResult d = bench_decode(engine, b, o.prompt_tokens, o.gen_tokens, salt, prompt, plain);
      if (d.tokens_per_s > best.plain.tokens_per_s) best.plain = d;
      if (speculative) {
        DecodeResult sd = bench_decode(engine, b, o.prompt_tokens, o.gen_tokens, salt, prompt, {});
        if (sd.tokens_per_s > best.spec.tokens_per_s) best.spec = sd;
      }
    }
    res.rows.push_back(best);
  }
  res.arms = engine.arm_metrics();
  res.spec_total = engine.spec_metrics();
  // It times a whole model on this process alone: not what a tensor-parallel step costs.
  if (res.info.tensor_parallel_size == 1)
    res.scoring =
        measure_scoring(res.info, cfg.model.dtype, model::resolve_placement(cfg.model.device, 1, cfg.model.cuda_graphs),
                        o.score_k, decode_prompt_tokens, o.batches, 5);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  res.peak_rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
  return res;
}

nlohmann::json bandwidth_json(const kernels::ReadBandwidth& b) {
  return {{"median_gb_s", b.median_gbs},       {"min_gb_s", b.min_gbs}, {"max_gb_s", b.max_gbs},
          {"long_read_gb_s", b.long_read_gbs}, {"passes", b.passes},    {"buffer_bytes", b.bytes}};
}

nlohmann::json run_json(const BenchOptions& o, const RunResult& r, double floor_ms) {
  const EngineInfo& info = r.info;
  nlohmann::json d = nlohmann::json::array();
  for (const auto& row : r.rows) {
    const DecodeResult& p = row.plain;
    d.push_back({{"batch", p.batch},
                 {"tokens_per_s", p.tokens_per_s},
                 {"step_ms", p.step_ms},
                 {"step_over_floor", floor_ms > 0 ? p.step_ms / floor_ms : 0.0},
                 {"step_time", step_time_json(p.timing)}});
  }
  nlohmann::json sc = nlohmann::json::array();
  for (const auto& s : r.scoring) {
    sc.push_back({{"batch", s.batch},
                  {"decode_ms", s.decode_ms},
                  {"score_ms", s.score_ms},
                  {"ratio", s.decode_ms > 0 ? s.score_ms / s.decode_ms : 0.0}});
  }
  const nlohmann::json scoring = {{"k", o.score_k}, {"rows", sc}};
  nlohmann::json j = {{"model", info.model_dir},
                      {"architecture", info.architecture},
                      {"dtype", info.weight_dtype},
                      {"kv_dtype", info.kv_dtype},
                      {"cpu_isa", info.cpu_isa},
                      {"cpu_model", info.cpu_model},
                      {"device", info.device},
                      {"threads", info.num_threads},
                      {"tensor_parallel_size", info.tensor_parallel_size},
                      {"proposer_tensor_parallel_size", info.proposer_tensor_parallel_size},
                      {"load_s", r.load_s},
                      {"prompt_tokens", o.prompt_tokens},
                      {"gen_tokens", o.gen_tokens},
                      {"prefill_tokens_per_s", r.prefill},
                      {"decode", d},
                      {"scoring", scoring},
                      {"peak_rss_mib", r.peak_rss_mib},
                      {"decode_weight_bytes", info.decode_weight_bytes},
                      {"decode_floor_ms_per_step", floor_ms}};
  if (!info.proposer.empty()) {
    nlohmann::json srows = nlohmann::json::array();
    for (const auto& row : r.rows) srows.push_back(spec_json(row));
    j["speculative"] = {{"proposer", info.proposer},
                        {"verifier", info.verifier},
                        {"k", info.num_speculative_tokens},
                        {"dynamic", info.dynamic_k},
                        {"rows", srows},
                        {"scoring", scoring},
                        {"arms", arms_json(info, r.arms, r.spec_total)}};
  }
  return j;
}

void print_spec_row(const SpecRow& row) {
  const DecodeResult& r = row.plain;
  const DecodeResult& s = row.spec;
  const spec::SpecMetrics& m = s.spec;
  const double steps = static_cast<double>(std::max<uint64_t>(m.num_steps, 1));
  std::printf("  spec   b=%-3d %.2f tokens/s, %.2f ms/step, %.2f tokens/step -> speedup %.2fx\n", s.batch,
              s.tokens_per_s, s.step_ms, s.steps > 0 ? static_cast<double>(s.tokens) / s.steps : 0.0,
              r.tokens_per_s > 0 ? s.tokens_per_s / r.tokens_per_s : 0.0);
  std::string per_position;
  for (size_t i = 0; i < m.drafted_at.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.2f", i == 0 ? "" : " ", m.acceptance_at(i));
    per_position += buf;
  }
  std::printf("               acceptance %.3f (%llu/%llu), mean length %.2f, efficiency %.2f, per position [%s]\n",
              m.acceptance_rate(), static_cast<unsigned long long>(m.accepted_tokens),
              static_cast<unsigned long long>(m.draft_tokens), m.mean_acceptance_length(), m.system_efficiency(),
              per_position.c_str());
  const double total = m.propose_seconds + m.score_seconds + m.verify_seconds;
  auto pct = [&](double x) { return total > 0 ? 100.0 * x / total : 0.0; };
  std::printf(
      "               per spec step: propose %.2f ms (%.0f%%), score %.2f ms (%.0f%%), verify %.2f ms (%.0f%%)\n",
      m.propose_seconds * 1e3 / steps, pct(m.propose_seconds), m.score_seconds * 1e3 / steps, pct(m.score_seconds),
      m.verify_seconds * 1e3 / steps, pct(m.verify_seconds));
  if (m.policy.steps > 0) std::printf("               dynamic k: %s\n", m.policy.summary().c_str());
  std::printf("               %s\n", step_time_line(s.timing).c_str());
}

void print_run(const BenchOptions& o, const RunResult& r, double floor_ms) {
  const EngineInfo& info = r.info;
  const bool speculative = !info.proposer.empty();
  std::printf(
      "dtype %s (KV %s): %.1f MiB of weights per decode step -> floor %.2f ms/step (%.1f tokens/s at batch 1)\n",
      info.weight_dtype.c_str(), info.kv_dtype.c_str(), static_cast<double>(info.decode_weight_bytes) / (1 << 20),
      floor_ms, 1e3 / floor_ms);
  std::printf("  loaded in %.2f s; peak RSS %.1f MiB\n", r.load_s, r.peak_rss_mib);
  if (info.tensor_parallel_size > 1) {
    std::printf(
        "  tensor parallel over %d ranks (weights, floor and RSS are rank 0's shard)%s\n", info.tensor_parallel_size,
        speculative ? (", draft models on " + std::to_string(info.proposer_tensor_parallel_size) + " of them").c_str()
                    : "");
  }
  if (speculative) {
    std::printf(
        "  speculative: proposer %s, verifier %s, k=%s%d%s; decode runs plain and speculative on the same prompts\n",
        info.proposer.c_str(), info.verifier.c_str(), info.dynamic_k ? "0.." : "", info.num_speculative_tokens,
        info.dynamic_k ? " (dynamic)" : "");
  }
  std::printf("  prefill       %.1f tokens/s (%d-token prompt)\n", r.prefill, o.prompt_tokens);
  for (const auto& row : r.rows) {
    const DecodeResult& p = row.plain;
    std::printf("  decode b=%-3d %.2f tokens/s, %.2f ms/step (%.2fx the bandwidth floor)%s\n", p.batch, p.tokens_per_s,
                p.step_ms, floor_ms > 0 ? p.step_ms / floor_ms : 0.0, speculative ? " [plain]" : "");
    std::printf("               %s\n", step_time_line(p.timing).c_str());
    if (speculative) print_spec_row(row);
  }
  if (speculative) {
    std::printf("  per arm, over all speculative runs:\n%s", arms_text(info, r.arms, r.spec_total, "    ").c_str());
  }
  if (info.tensor_parallel_size > 1) std::printf("  scoring cost ratio: not measured under tensor parallelism\n");
  for (const auto& s : r.scoring) {
    std::printf("  scoring b=%-2d %d new tokens/seq %.2f ms vs 1 token %.2f ms: score(k+1=%d)/decode(1) = %.2fx\n",
                s.batch, o.score_k + 1, s.score_ms, s.decode_ms, o.score_k + 1,
                s.decode_ms > 0 ? s.score_ms / s.decode_ms : 0.0);
  }
}

void print_summary(const BenchOptions& o, const std::vector<RunResult>& runs, const std::vector<double>& floors) {
  std::printf("\n| dtype | prefill-%d tok/s |", o.prompt_tokens);
  for (int32_t b : o.batches) std::printf(" decode b=%d tok/s (x floor) |", b);
  for (int32_t b : o.batches) std::printf(" score(%d)/decode(1) b=%d |", o.score_k + 1, b);
  std::printf("\n|---|---|");
  for (size_t i = 0; i < 2 * o.batches.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunResult& r = runs[i];
    std::printf("| %s | %.1f |", r.info.weight_dtype.c_str(), r.prefill);
    for (const auto& row : r.rows)
      std::printf(" %.2f (%.2fx) |", row.plain.tokens_per_s, floors[i] > 0 ? row.plain.step_ms / floors[i] : 0.0);
    for (const auto& s : r.scoring) std::printf(" %.2fx |", s.decode_ms > 0 ? s.score_ms / s.decode_ms : 0.0);
    std::printf("\n");
  }
}

void run_bench(const BenchOptions& o) {
  if (o.prompt_tokens < 1 || o.gen_tokens < 2) {
    throw Error(ErrorCode::kInvalidArgument, "--prompt-tokens must be >= 1 and --gen-tokens >= 2");
  }
  if (o.score_k < 1 || o.score_k > 32) throw Error(ErrorCode::kInvalidArgument, "--score-k must be in [1, 32]");
  if (!o.prompt.empty() && !o.prompt_file.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "give at most one of --prompt and --prompt-file");
  }
  if (!o.compare_k.empty()) {
    bench_compare_k(load_engine_config(o.model),
                    {o.compare_k, o.batches, o.prompt_tokens, bench_prompt_text(o), o.gen_tokens, o.repeats,
                     o.drop_below, o.interleave == "steps", o.json});
    return;
  }
  if ((o.multi_turn > 0 || !o.scorers.empty()) && (!o.prompt.empty() || !o.prompt_file.empty()))
    throw Error(ErrorCode::kInvalidArgument, std::string("--prompt and --prompt-file do not apply to ") +
                                                 (o.multi_turn > 0 ? "--multi-turn" : "--scorers") +
                                                 ", which builds its own prompts");
  if (o.multi_turn > 0) {
    bench_multi_turn(load_engine_config(o.model), {o.multi_turn, o.system_tokens, o.turn_tokens, o.gen_tokens, o.json});
    return;
  }
  if (!o.scorers.empty()) {
    bench_scorers(load_engine_config(o.model),
                  {o.scorers, o.batches, o.prompt_tokens, o.gen_tokens, o.repeats, o.json});
    return;
  }
  // One engine per dtype; without --dtype, the configured one.
  std::vector<config::EngineConfig> configs;
  if (o.dtypes.empty()) {
    configs.push_back(load_engine_config(o.model));
  } else {
    static const std::vector<std::string> kDtypes = {"auto", "f32",  "f16",  "bf16", "q8_0",   "q4_0",  "q2_k",
                                                     "q3_k", "q4_k", "q5_k", "q6_k", "q4_k_m", "q5_k_m"};
    for (const std::string& dt : o.dtypes) {
      if (std::find(kDtypes.begin(), kDtypes.end(), dt) == kDtypes.end())
        throw Error(ErrorCode::kInvalidArgument,
                    "--dtype " + dt +
                        ": expected a list of auto, f32, f16, bf16, q8_0, q4_0, q2_k, q3_k, q4_k, q5_k, q6_k, "
                        "q4_k_m, q5_k_m (model.dtype's values)");
      ModelFlags flags = o.model;
      flags.sets.push_back("model.dtype=" + dt);
      configs.push_back(load_engine_config(flags));
    }
  }
  kernels::set_num_threads(configs.front().model.num_threads);
  // The yardstick, before and after the runs: the floor uses the mean of the two medians. On a
  // CUDA device: its device-to-device copy bandwidth.
  const kernels::Device device = model::resolve_placement(configs.front().model.device, 1).device;
  const kernels::ReadBandwidth bw_before = kernels::measure_device_bandwidth(device);
  std::vector<RunResult> runs;
  for (const config::EngineConfig& cfg : configs) runs.push_back(run_one(o, cfg));
  const kernels::ReadBandwidth bw_after = kernels::measure_device_bandwidth(device);
  const double bw = 0.5 * (bw_before.median_gbs + bw_after.median_gbs);
  std::vector<double> floors;
  for (const RunResult& r : runs) floors.push_back(static_cast<double>(r.info.decode_weight_bytes) / (bw * 1e9) * 1e3);

  if (o.json) {
    nlohmann::json bandwidth = {{"gb_s", bw},
                                {"measured_by", device == kernels::Device::kCpu ? "cpu read" : "device copy"},
                                {"before", bandwidth_json(bw_before)},
                                {"after", bandwidth_json(bw_after)}};
    nlohmann::json j;
    if (runs.size() == 1) {
      j = run_json(o, runs[0], floors[0]);
      j["read_bandwidth_gb_s"] = bw;
      j["read_bandwidth"] = bandwidth;
    } else {
      j["read_bandwidth"] = bandwidth;
      j["runs"] = nlohmann::json::array();
      for (size_t i = 0; i < runs.size(); ++i) j["runs"].push_back(run_json(o, runs[i], floors[i]));
    }
    std::cout << j.dump(2) << "\n";
    return;
  }
  const EngineInfo& info = runs[0].info;
  std::printf("model       %s (%s, %lld layers), %d threads, %s kernels on %s; model on %s\n", info.model_dir.c_str(),
              info.architecture.c_str(), static_cast<long long>(info.num_layers), info.num_threads,
              info.cpu_isa.c_str(), info.cpu_model.c_str(), info.device.c_str());
  std::printf(
      "memory      %s bandwidth %.1f GB/s: median of %d passes over %zu MiB %.1f before the runs (range %.1f-%.1f, "
      "one long read %.1f), %.1f after (range %.1f-%.1f)\n",
      device == kernels::Device::kCpu ? "read" : "device-to-device copy (read + write)", bw, bw_before.passes,
      bw_before.bytes >> 20, bw_before.median_gbs, bw_before.min_gbs, bw_before.max_gbs, bw_before.long_read_gbs,
      bw_after.median_gbs, bw_after.min_gbs, bw_after.max_gbs);
  if (std::abs(bw_before.median_gbs - bw_after.median_gbs) > 0.15 * bw)
    std::printf("            (the two medians differ by more than 15%%: the machine is busy; ratios are noisy)\n");
  for (size_t i = 0; i < runs.size(); ++i) print_run(o, runs[i], floors[i]);
  if (runs.size() > 1) print_summary(o, runs, floors);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench",
                                     "prefill/decode throughput against the memory-bandwidth floor; plain vs "
                                     "speculative with a `speculative` section");
  add_model_flags(*cmd, o->model);
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "synthetic prompt length")->capture_default_str();
  cmd->add_option("--gen-tokens", o->gen_tokens, "tokens generated per request in decode runs")->capture_default_str();
  cmd->add_option("--batch", o->batches, "decode batch sizes")->delimiter(',')->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "runs per measurement (best is reported)")->capture_default_str();
  cmd->add_option("--prompt", o->prompt, "decode runs use this prompt (every request) instead of synthetic ids");
  cmd->add_option("--prompt-file", o->prompt_file, "like --prompt, read from a file")->check(CLI::ExistingFile);
  cmd->add_option("--score-k", o->score_k, "k of the score(k+1)/decode(1) cost ratio (speculative configs)")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtypes,
                  "weight dtypes to measure, one engine each, e.g. --dtype f32,bf16,q8_0 (default: model.dtype)")
      ->delimiter(',');
  cmd->add_option("--scorers", o->scorers,
                  "compare speculative scorers (e.g. mqa,batch_expansion) on the same speculative decode runs")
      ->delimiter(',');
  cmd->add_option("--compare-k", o->compare_k,
                  "compare plain decoding, static k and the dynamic policy on one engine, runs interleaved "
                  "(e.g. plain,2,4,8,dynamic)")
      ->delimiter(',');
  cmd->add_option("--drop-below", o->drop_below,
                  "--compare-k racing: a static arm whose best tokens/s is below this x the leading arm's stops "
                  "repeating (0 = every arm runs every repeat)")
      ->capture_default_str();
  cmd->add_option("--interleave", o->interleave,
                  "--compare-k: runs (one engine; the arms' runs follow each other) or steps (one engine per arm; "
                  "the runs advance one step each in turn, so machine load falls on every arm alike)")
      ->check(CLI::IsMember({"runs", "steps"}))
      ->capture_default_str();
  cmd->add_option("--multi-turn", o->multi_turn,
                  "a chat of this many turns on a shared system prompt, each resending the conversation: time to "
                  "first token per turn with kv_cache.prefix_caching on and off");
  cmd->add_option("--system-tokens", o->system_tokens, "--multi-turn: the system prompt's length")
      ->capture_default_str();
  cmd->add_option("--turn-tokens", o->turn_tokens, "--multi-turn: each user message's length")->capture_default_str();
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace specd::cli

// specd generate (--config FILE | --model DIR) --prompt TEXT [sampling flags] [--json]
// [--json-schema FILE | --regex R | --grammar FILE | --choice C... | --json-object]
// Streams the completion to stdout and prints throughput (and, with a `speculative` config
// section, the request's draft acceptance) to stderr; --json prints one object with the text,
// token ids, finish reason, timings and a "speculative" object instead.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/arm_report.hpp"
#include "cli/commands.hpp"
#include "cli/model_flags.hpp"
#include "cli/policy_json.hpp"
#include "common/untrusted.hpp"
#include "specd/engine.hpp"
#include "specd/error.hpp"

namespace specd::cli {
namespace {

struct GenerateOptions {
  ModelFlags model;
  std::string prompt;
  bool json = false;
  SamplingParams sampling;
  std::optional<uint64_t> seed;
  std::optional<int32_t> num_speculative_tokens;  // per-request k (0 = plain decoding)
  std::optional<bool> dynamic;                    // per-request speculative.dynamic
  bool no_speculation = false;
  std::string arm;  // the A/B arm to serve with ("" = assigned)
  // Structured output (at most one): a JSON Schema file, a regex, a GBNF grammar file, choices.
  std::string json_schema_file, regex, grammar_file;
  std::vector<std::string> choices;
  bool json_object = false;
};

// The --json-schema / --regex / --grammar / --choice / --json-object flags as one constraint.
StructuredOutput structured_from_flags(const GenerateOptions& o) {
  StructuredOutput so;
  int given = 0;
  if (!o.json_schema_file.empty()) {
    so.kind = StructuredOutput::Kind::kJsonSchema;
    so.spec = read_file_limited(o.json_schema_file, 8u << 20, "--json-schema");
    ++given;
  }
  if (!o.regex.empty()) {
    so.kind = StructuredOutput::Kind::kRegex;
    so.spec = o.regex;
    ++given;
  }
  if (!o.grammar_file.empty()) {
    so.kind = StructuredOutput::Kind::kGrammar;
    so.spec = read_file_limited(o.grammar_file, 8u << 20, "--grammar");
    ++given;
  }
  if (!o.choices.empty()) {
    so.kind = StructuredOutput::Kind::kChoice;
    so.choices = o.choices;
    ++given;
  }
  if (o.json_object) {
    so.kind = StructuredOutput::Kind::kJsonObject;
    ++given;
  }
  if (given > 1)
    throw Error(ErrorCode::kInvalidArgument,
                "give at most one of --json-schema, --regex, --grammar, --choice and --json-object");
  return so;
}

using Clock = std::chrono::steady_clock;

struct Generated {
  std::string text;
  std::vector<int32_t> ids;
  RequestOutput last;  // the finished output: finish reason and the request's counters
  double ttft_s = 0;   // time to the first token
  double total_s = 0;
};

// Runs the one request to the end, streaming text to stdout unless `quiet`.
Generated generate(Engine& engine, const Request& req, bool quiet) {
  Generated g;
  const auto t0 = Clock::now();
  const RequestId id = 1;
  engine.add_request(id, req);
  std::optional<Clock::time_point> t_first;
  while (engine.has_unfinished()) {
    for (RequestOutput& out : engine.step()) {
      if (out.id != id) continue;
      if (!out.new_token_ids.empty() && !t_first) t_first = Clock::now();
      g.ids.insert(g.ids.end(), out.new_token_ids.begin(), out.new_token_ids.end());
      g.text += out.text_delta;
      if (!quiet && !out.text_delta.empty()) {
        std::fwrite(out.text_delta.data(), 1, out.text_delta.size(), stdout);
        std::fflush(stdout);
      }
      g.last = std::move(out);
    }
  }
  g.total_s = std::chrono::duration<double>(Clock::now() - t0).count();
  g.ttft_s = t_first ? std::chrono::duration<double>(*t_first - t0).count() : g.total_s;
  if (g.last.finish_reason == FinishReason::kError) throw Error(ErrorCode::kInvalidArgument, g.last.error);
  return g;
}

void report(const GenerateOptions& o, const Engine& engine, const Generated& g, double load_s) {
  const EngineInfo& info = engine.info();
  const RequestOutput& last = g.last;  // its speculative counters cover the whole request
  const std::string arm = last.arm >= 0 ? info.arms[static_cast<size_t>(last.arm)].name : std::string();
  const double decode_s = g.total_s - g.ttft_s;
  const double decode_tps = g.ids.size() > 1 && decode_s > 0 ? static_cast<double>(g.ids.size() - 1) / decode_s : 0.0;
  const bool speculative = !info.proposer.empty();
  const double acceptance_rate =
      last.num_draft_tokens > 0 ? static_cast<double>(last.num_accepted_tokens) / last.num_draft_tokens : 0.0;
  // Tokens per target forward over the steps that verified a draft (1 + accepted / drafts).
  const double mean_len =
      last.num_spec_steps > 0 ? 1.0 + static_cast<double>(last.num_accepted_tokens) / last.num_spec_steps : 0.0;
  const int32_t k = o.num_speculative_tokens.value_or(
      last.arm >= 0 ? info.arms[static_cast<size_t>(last.arm)].num_speculative_tokens : info.num_speculative_tokens);
  const bool dynamic = o.dynamic.value_or(info.dynamic_k);
  if (o.json) {
    nlohmann::json j = {{"text", g.text},
                        {"token_ids", g.ids},
                        {"finish_reason", finish_reason_name(last.finish_reason)},
                        {"num_prompt_tokens", last.num_prompt_tokens},
                        {"num_generated_tokens", last.num_generated_tokens},
                        {"timings",
                         {{"load_s", load_s},
                          {"time_to_first_token_s", g.ttft_s},
                          {"total_s", g.total_s},
                          {"decode_tokens_per_s", decode_tps},
                          {"prompt_tokens_per_s", g.ttft_s > 0 ? last.num_prompt_tokens / g.ttft_s : 0.0}}}};
    if (speculative) {
      j["speculative"] = {{"proposer", info.proposer},
                          {"verifier", info.verifier},
                          {"k", k},
                          {"dynamic", dynamic},
                          {"enabled", !o.no_speculation},
                          {"spec_steps", last.num_spec_steps},
                          {"draft_tokens", last.num_draft_tokens},
                          {"accepted_tokens", last.num_accepted_tokens},
                          {"acceptance_rate", acceptance_rate},
                          {"mean_acceptance_length", mean_len},
                          {"policy", policy_json(engine.spec_metrics().policy)},
                          {"arm", arm.empty() ? nlohmann::json(nullptr) : nlohmann::json(arm)},
                          {"arms", arms_json(info, engine.arm_metrics(), engine.spec_metrics())}};
    }
    if (const EngineStats s = engine.stats(); s.structured_requests > 0) {
      j["structured"] = {{"masks_computed", s.grammar_masks_computed},
                         {"masks_cached", s.grammar_masks_cached},
                         {"mask_seconds", s.grammar_mask_seconds},
                         {"forced_draft_tokens", s.grammar_forced_drafts},
                         {"cut_draft_tokens", s.grammar_cut_drafts}};
    }
    std::cout << j.dump() << "\n";
    return;
  }
  std::cout << "\n";
  std::fprintf(stderr, "[specd] %d prompt tokens, %d generated (%s); first token %.1f ms, decode %.2f tokens/s\n",
               last.num_prompt_tokens, last.num_generated_tokens,
               std::string(finish_reason_name(last.finish_reason)).c_str(), g.ttft_s * 1e3, decode_tps);
  if (speculative) {
    std::fprintf(stderr,
                 "[specd] speculative (%s, %s, k=%s%d): accepted %d/%d draft tokens (%.1f%%) over %d steps, "
                 "mean acceptance length %.2f\n",
                 info.proposer.c_str(), info.verifier.c_str(), dynamic ? "0.." : "", k, last.num_accepted_tokens,
                 last.num_draft_tokens, acceptance_rate * 100.0, last.num_spec_steps, mean_len);
    const spec::SpecMetrics metrics = engine.spec_metrics();
    if (metrics.policy.steps > 0) std::fprintf(stderr, "[specd] dynamic k: %s\n", metrics.policy.summary().c_str());
    if (info.arms.size() > 1 || (!info.arms.empty() && info.arms[0].shadow))
      std::fprintf(stderr, "%s", arms_text(info, engine.arm_metrics(), metrics, "[specd] ").c_str());
  }
}

void run_generate(GenerateOptions& o) {
  const config::EngineConfig cfg = load_engine_config(o.model);
  const auto t_load = Clock::now();
  Engine engine(cfg);
  const double load_s = std::chrono::duration<double>(Clock::now() - t_load).count();
  Request req;
  req.prompt = o.prompt;
  req.sampling = o.sampling;
  req.sampling.seed = o.seed;
  req.speculative.enabled = !o.no_speculation;
  req.speculative.num_speculative_tokens = o.num_speculative_tokens;
  req.speculative.dynamic = o.dynamic;
  req.speculative.arm = o.arm;
  req.structured = structured_from_flags(o);
  const Generated g = generate(engine, req, o.json);
  report(o, engine, g, load_s);
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "generate", "generate a completion for one prompt (speculative when the config has a `speculative` section)");
  add_model_flags(*cmd, o->model);
  cmd->add_option("--prompt", o->prompt, "prompt text")->required();
  cmd->add_flag("--json", o->json, "print one JSON object (text, token ids, timings) instead of streaming");
  cmd->add_option("--max-tokens", o->sampling.max_tokens, "tokens to generate at most")->capture_default_str();
  cmd->add_option("--temperature", o->sampling.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", o->sampling.top_k, "keep the k most likely tokens (0 = all)")->capture_default_str();
  cmd->add_option("--top-p", o->sampling.top_p, "nucleus sampling mass in (0, 1]")->capture_default_str();
  cmd->add_option("--min-p", o->sampling.min_p, "drop tokens below min_p * max probability")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the request's random stream");
  cmd->add_option("--stop", o->sampling.stop, "stop string (repeatable; excluded from the output)");
  cmd->add_option("--stop-token-id", o->sampling.stop_token_ids, "stop token id (repeatable)");
  cmd->add_flag("--ignore-eos", o->sampling.ignore_eos, "keep generating past EOS");
  cmd->add_option("--num-speculative-tokens", o->num_speculative_tokens,
                  "this request's proposal length k in [0, 32] (default: speculative.num_speculative_tokens)");
  cmd->add_option("--dynamic", o->dynamic,
                  "true: the policy picks 0..k drafts every step; false: k every step (default: speculative.dynamic)");
  cmd->add_flag("--no-speculation", o->no_speculation, "decode this request without speculation");
  cmd->add_option("--arm", o->arm, "the A/B arm (speculative.arms) that serves the request");
  cmd->add_option("--json-schema", o->json_schema_file, "structured output: a JSON Schema file the text must satisfy");
  cmd->add_option("--regex", o->regex, "structured output: a regular expression the whole text must match");
  cmd->add_option("--grammar", o->grammar_file, "structured output: a GBNF grammar file (start rule `root`)");
  cmd->add_option("--choice", o->choices, "structured output: the text is one of these (repeatable)");
  cmd->add_flag("--json-object", o->json_object, "structured output: any JSON object");
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace specd::cli

// specd generate (--config FILE | --model DIR) --prompt TEXT [sampling flags] [--json]
// Streams the completion to stdout and prints throughput (and, with a `speculative` config
// section, the request's draft acceptance) to stderr; --json prints one object with the text,
// token ids, finish reason, timings and a "speculative" object instead.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.hpp"
#include "cli/model_flags.hpp"
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
  bool no_speculation = false;
};

void run_generate(GenerateOptions& o) {
  using Clock = std::chrono::steady_clock;
  const config::EngineConfig cfg = load_engine_config(o.model);
  const auto t_load = Clock::now();
  Engine engine(cfg);
  const double load_s = std::chrono::duration<double>(Clock::now() - t_load).count();

  SamplingParams sp = o.sampling;
  sp.seed = o.seed;
  Request req;
  req.prompt = o.prompt;
  req.sampling = sp;
  req.speculative.enabled = !o.no_speculation;
  req.speculative.num_speculative_tokens = o.num_speculative_tokens;
  const auto t0 = Clock::now();
  const RequestId id = 1;
  engine.add_request(id, req);
  std::string text;
  std::vector<int32_t> ids;
  RequestOutput last;
  std::optional<Clock::time_point> t_first;
  while (engine.has_unfinished()) {
    for (RequestOutput& out : engine.step()) {
      if (out.id != id) continue;
      if (!out.new_token_ids.empty() && !t_first) t_first = Clock::now();
      ids.insert(ids.end(), out.new_token_ids.begin(), out.new_token_ids.end());
      text += out.text_delta;
      if (!o.json && !out.text_delta.empty()) {
        std::fwrite(out.text_delta.data(), 1, out.text_delta.size(), stdout);
        std::fflush(stdout);
      }
      last = std::move(out);
    }
  }
  const auto t_end = Clock::now();
  if (last.finish_reason == FinishReason::kError) throw Error(ErrorCode::kInvalidArgument, last.error);
  // The request's speculative counters so far (every output carries them).
  const int32_t draft_tokens = last.num_draft_tokens, accepted_tokens = last.num_accepted_tokens,
                spec_steps = last.num_spec_steps;

  const double total_s = std::chrono::duration<double>(t_end - t0).count();
  const double ttft_s = t_first ? std::chrono::duration<double>(*t_first - t0).count() : total_s;
  const double decode_s = total_s - ttft_s;
  const double decode_tps = ids.size() > 1 && decode_s > 0 ? static_cast<double>(ids.size() - 1) / decode_s : 0.0;
  const EngineInfo& info = engine.info();
  const bool speculative = !info.proposer.empty();
  const double acceptance_rate = draft_tokens > 0 ? static_cast<double>(accepted_tokens) / draft_tokens : 0.0;
  // Tokens per target forward over the steps that verified a draft (1 + accepted / drafts).
  const double mean_len = spec_steps > 0 ? 1.0 + static_cast<double>(accepted_tokens) / spec_steps : 0.0;
  if (o.json) {
    nlohmann::json j = {{"text", text},
                        {"token_ids", ids},
                        {"finish_reason", finish_reason_name(last.finish_reason)},
                        {"num_prompt_tokens", last.num_prompt_tokens},
                        {"num_generated_tokens", last.num_generated_tokens},
                        {"timings",
                         {{"load_s", load_s},
                          {"time_to_first_token_s", ttft_s},
                          {"total_s", total_s},
                          {"decode_tokens_per_s", decode_tps},
                          {"prompt_tokens_per_s", ttft_s > 0 ? last.num_prompt_tokens / ttft_s : 0.0}}}};
    if (speculative) {
      j["speculative"] = {{"proposer", info.proposer},
                          {"verifier", info.verifier},
                          {"k", o.num_speculative_tokens.value_or(info.num_speculative_tokens)},
                          {"enabled", !o.no_speculation},
                          {"spec_steps", spec_steps},
                          {"draft_tokens", draft_tokens},
                          {"accepted_tokens", accepted_tokens},
                          {"acceptance_rate", acceptance_rate},
                          {"mean_acceptance_length", mean_len}};
    }
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "\n";
    std::fprintf(stderr, "[specd] %d prompt tokens, %d generated (%s); first token %.1f ms, decode %.2f tokens/s\n",
                 last.num_prompt_tokens, last.num_generated_tokens,
                 std::string(finish_reason_name(last.finish_reason)).c_str(), ttft_s * 1e3, decode_tps);
    if (speculative) {
      std::fprintf(stderr,
                   "[specd] speculative (%s, %s, k=%d): accepted %d/%d draft tokens (%.1f%%) over %d steps, "
                   "mean acceptance length %.2f\n",
                   info.proposer.c_str(), info.verifier.c_str(),
                   o.num_speculative_tokens.value_or(info.num_speculative_tokens), accepted_tokens, draft_tokens,
                   acceptance_rate * 100.0, spec_steps, mean_len);
    }
  }
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
  cmd->add_flag("--no-speculation", o->no_speculation, "decode this request without speculation");
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace specd::cli

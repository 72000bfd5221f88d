// specd generate (--config FILE | --model DIR) --prompt TEXT [sampling flags] [--json]
// Streams the completion to stdout and prints throughput to stderr; --json prints one object
// with the text, token ids, finish reason and timings instead.
#include <CLI/CLI.hpp>

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
  const auto t0 = Clock::now();
  const RequestId id = engine.add_request(req);
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

  const double total_s = std::chrono::duration<double>(t_end - t0).count();
  const double ttft_s = t_first ? std::chrono::duration<double>(*t_first - t0).count() : total_s;
  const double decode_s = total_s - ttft_s;
  const double decode_tps = ids.size() > 1 && decode_s > 0 ? static_cast<double>(ids.size() - 1) / decode_s : 0.0;
  if (o.json) {
    nlohmann::json j = {
        {"text", text},
        {"token_ids", ids},
        {"finish_reason", finish_reason_name(last.finish_reason)},
        {"num_prompt_tokens", last.num_prompt_tokens},
        {"num_generated_tokens", last.num_generated_tokens},
        {"timings",
         {{"load_s", load_s}, {"time_to_first_token_s", ttft_s}, {"total_s", total_s},
          {"decode_tokens_per_s", decode_tps},
          {"prompt_tokens_per_s", ttft_s > 0 ? last.num_prompt_tokens / ttft_s : 0.0}}}};
    std::cout << j.dump() << "\n";
  } else {
    std::cout << "\n";
    std::fprintf(stderr,
                 "[specd] %d prompt tokens, %d generated (%s); first token %.1f ms, decode %.2f tokens/s\n",
                 last.num_prompt_tokens, last.num_generated_tokens,
                 std::string(finish_reason_name(last.finish_reason)).c_str(), ttft_s * 1e3, decode_tps);
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "generate a completion for one prompt (CPU, no speculation yet)");
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
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace specd::cli

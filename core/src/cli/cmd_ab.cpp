// specd ab run --config FILE --prompts FILE.jsonl [--repeat N] [--log FILE] [--concurrency N] ...
//   Runs every A/B arm of the config over a prompt set without a server: each prompt, each
//   repeat, on each arm (an explicit assignment), with the same seed on every arm (common random
//   numbers), shadow arms as configured. Writes the A/B log (speculative.ab_log or --log) and
//   prints the per-arm metrics, the shadow arms' cost included.
// specd ab report LOG... [--json] [--html OUT.html] [--seed N] [--resamples N]
//   The report of one or more A/B logs (ab/report.hpp): text on stdout (or JSON), and with --html
//   a self-contained page with the plots.
//
// Prompt lines: {"prompt": "text"} or {"prompt_ids": [1, 2, ...]}, optionally with max_tokens,
// temperature, top_p, top_k, min_p, seed (else derived from --seed, the line and the repeat) and
// arm (run the line on that arm only). Anything else is an error naming file:line and the key.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "ab/report.hpp"
#include "cli/arm_report.hpp"
#include "cli/commands.hpp"
#include "cli/model_flags.hpp"
#include "specd/engine.hpp"
#include "specd/error.hpp"

namespace specd::cli {
namespace {

using nlohmann::json;

struct RunOptions {
  ModelFlags model;
  std::string prompts;
  std::string log;
  int32_t repeat = 1;
  int32_t concurrency = 1;
  SamplingParams sampling;
  uint64_t seed = 0;
};

struct ReportOptions {
  std::vector<std::string> logs;
  bool json = false;
  std::string html;
  uint64_t seed = 1;
  int resamples = 2000;
};

struct PromptLine {
  Request request;  // arm set only when the line names one
  bool seeded = false;
};

double number(const json& v, const std::string& where, const std::string& key) {
  if (!v.is_number()) throw Error(ErrorCode::kInvalidArgument, where + ": '" + key + "' must be a number");
  return v.get<double>();
}

int64_t integer(const json& v, const std::string& where, const std::string& key) {
  if (!v.is_number_integer()) throw Error(ErrorCode::kInvalidArgument, where + ": '" + key + "' must be an integer");
  return v.get<int64_t>();
}

PromptLine parse_prompt(const json& j, const std::string& where, const SamplingParams& defaults) {
  if (!j.is_object()) throw Error(ErrorCode::kInvalidArgument, where + ": expected a JSON object");
  PromptLine p;
  Request& r = p.request;
  r.sampling = defaults;
  for (const auto& [key, v] : j.items()) {
    if (key == "prompt" && v.is_string()) {
      r.prompt = v.get<std::string>();
    } else if (key == "prompt_ids" && v.is_array()) {
      for (const json& t : v) r.prompt_ids.push_back(static_cast<int32_t>(integer(t, where, "prompt_ids[]")));
    } else if (key == "max_tokens") {
      r.sampling.max_tokens = static_cast<int32_t>(integer(v, where, key));
    } else if (key == "temperature") {
      r.sampling.temperature = static_cast<float>(number(v, where, key));
    } else if (key == "top_p") {
      r.sampling.top_p = static_cast<float>(number(v, where, key));
    } else if (key == "top_k") {
      r.sampling.top_k = static_cast<int32_t>(integer(v, where, key));
    } else if (key == "min_p") {
      r.sampling.min_p = static_cast<float>(number(v, where, key));
    } else if (key == "seed") {
      r.sampling.seed = static_cast<uint64_t>(integer(v, where, key));
      p.seeded = true;
    } else if (key == "arm" && v.is_string()) {
      r.speculative.arm = v.get<std::string>();
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  where + ": unexpected field '" + key +
                      "' (expected prompt or prompt_ids, max_tokens, temperature, top_p, top_k, min_p, seed, arm)");
    }
  }
  if (r.prompt.empty() && r.prompt_ids.empty())
    throw Error(ErrorCode::kInvalidArgument, where + ": needs a non-empty 'prompt' or 'prompt_ids'");
  if (std::string err = validate_sampling_params(r.sampling); !err.empty())
    throw Error(ErrorCode::kInvalidArgument, where + ": " + err);
  return p;
}

std::vector<PromptLine> read_prompts(const std::string& file, const SamplingParams& defaults) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(ErrorCode::kNotFound, "cannot read --prompts " + file);
  std::vector<PromptLine> out;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = file + ":" + std::to_string(n);
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error& e) {
      throw Error(ErrorCode::kInvalidArgument, where + ": not a JSON line: " + e.what());
    }
    out.push_back(parse_prompt(j, where, defaults));
  }
  if (out.empty()) throw Error(ErrorCode::kInvalidArgument, "--prompts " + file + " holds no prompt");
  return out;
}

// Every (repeat, prompt, arm) request, in that order; the seed is shared by the arms.
std::vector<Request> ab_requests(const std::vector<PromptLine>& prompts, const EngineInfo& info, const RunOptions& o) {
  std::vector<Request> out;
  for (int32_t rep = 0; rep < o.repeat; ++rep) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      Request r = prompts[i].request;
      if (!prompts[i].seeded) r.sampling.seed = o.seed * 1000003u + i * 7919u + static_cast<uint64_t>(rep);
      if (!r.speculative.arm.empty()) {
        out.push_back(r);
        continue;
      }
      for (const ArmInfo& arm : info.arms) {
        r.speculative.arm = arm.name;
        out.push_back(r);
      }
    }
  }
  return out;
}

void run_ab(const RunOptions& o) {
  if (o.repeat < 1 || o.concurrency < 1)
    throw Error(ErrorCode::kInvalidArgument, "--repeat and --concurrency must be >= 1");
  ModelFlags flags = o.model;
  if (!o.log.empty()) flags.sets.push_back("speculative.ab_log=" + o.log);
  const config::EngineConfig cfg = load_engine_config(flags);
  if (!cfg.speculative.enabled) throw Error(ErrorCode::kInvalidArgument, "specd ab run needs a `speculative` section");
  if (cfg.speculative.ab_log.empty())
    throw Error(ErrorCode::kInvalidArgument, "specd ab run writes an A/B log: give --log FILE or speculative.ab_log");
  const std::vector<PromptLine> prompts = read_prompts(o.prompts, o.sampling);
  auto engine = std::make_unique<Engine>(cfg);
  const EngineInfo info = engine->info();
  std::deque<Request> queue;
  for (Request& r : ab_requests(prompts, info, o)) queue.push_back(std::move(r));
  const size_t total = queue.size();
  std::fprintf(stderr, "[specd] ab run: %zu requests (%zu prompts x %d repeats over %zu arms), concurrency %d\n", total,
               prompts.size(), o.repeat, info.arms.size(), o.concurrency);
  RequestId next_id = 1;
  size_t running = 0, finished = 0, failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (!queue.empty() || running > 0) {
    while (!queue.empty() && running < static_cast<size_t>(o.concurrency)) {
      engine->add_request(next_id++, queue.front());
      queue.pop_front();
      ++running;
    }
    for (const RequestOutput& out : engine->step()) {
      if (!out.finished) continue;
      --running;
      ++finished;
      if (out.finish_reason == FinishReason::kError) {
        if (failed++ == 0)
          std::fprintf(stderr, "[specd] request %llu failed: %s\n", static_cast<unsigned long long>(out.id),
                       out.error.c_str());
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("ab run: %zu requests in %.1f s (%zu failed)\n", finished, seconds, failed);
  std::printf("%s", arms_text(info, engine->arm_metrics(), engine->spec_metrics(), "  ").c_str());
  engine.reset();  // the A/B log's writer flushes what is queued
  std::printf("A/B log: %s (specd ab report %s)\n", cfg.speculative.ab_log.c_str(), cfg.speculative.ab_log.c_str());
}

void report_ab(const ReportOptions& o) {
  if (o.resamples < 100) throw Error(ErrorCode::kInvalidArgument, "--resamples must be >= 100");
  const std::vector<speculative::AbRecord> records = ab::read_ab_logs(o.logs);
  const ab::Report report = ab::build_report(records, {o.seed, o.resamples});
  if (!o.html.empty()) {
    const std::string page = ab::render_html(report);
    std::ofstream out(o.html, std::ios::binary);
    if (!out || !out.write(page.data(), static_cast<std::streamsize>(page.size())))
      throw Error(ErrorCode::kInvalidArgument, "cannot write --html " + o.html);
  }
  std::cout << (o.json ? ab::render_json(report) + "\n" : ab::render_text(report));
  if (!o.html.empty() && !o.json) std::cout << "HTML report: " << o.html << "\n";
}

}  // namespace

void add_ab_commands(CLI::App& app) {
  CLI::App* ab = app.add_subcommand("ab", "A/B testing of verifiers: offline runs and reports (docs/ab-testing.md)");
  ab->require_subcommand(1);

  auto r = std::make_shared<RunOptions>();
  CLI::App* run = ab->add_subcommand("run", "run every arm of the config over a prompt set and write the A/B log");
  add_model_flags(*run, r->model);
  run->add_option("--prompts", r->prompts, "JSON lines: {\"prompt\": ...} per line")
      ->required()
      ->check(CLI::ExistingFile);
  run->add_option("--repeat", r->repeat, "runs of every prompt on every arm (seeds differ per repeat)")
      ->capture_default_str();
  run->add_option("--log", r->log, "the A/B log to append to (default: speculative.ab_log)");
  run->add_option("--concurrency", r->concurrency, "requests inside the engine at once")->capture_default_str();
  run->add_option("--max-tokens", r->sampling.max_tokens, "default max_tokens of a prompt")->capture_default_str();
  run->add_option("--temperature", r->sampling.temperature, "default temperature of a prompt")->capture_default_str();
  run->add_option("--seed", r->seed, "base of the per-prompt seeds")->capture_default_str();
  run->callback([r] { run_ab(*r); });

  auto p = std::make_shared<ReportOptions>();
  CLI::App* report = ab->add_subcommand("report", "per-arm statistics, shadow comparisons and verdicts of A/B logs");
  report->add_option("logs", p->logs, "A/B log files (speculative.ab_log)")->required()->check(CLI::ExistingFile);
  report->add_flag("--json", p->json, "print the report as JSON");
  report->add_option("--html", p->html, "also write a self-contained HTML report with plots");
  report->add_option("--seed", p->seed, "bootstrap seed")->capture_default_str();
  report->add_option("--resamples", p->resamples, "bootstrap resamples")->capture_default_str();
  report->callback([p] { report_ab(*p); });
}

}  // namespace specd::cli

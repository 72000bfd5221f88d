// specd score (--config FILE | --model DIR) --prompt TEXT [--json]
// The log-probability of every prompt token after the first under the model, and the
// perplexity exp(-mean log p).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/model_flags.hpp"
#include "specd/engine.hpp"

namespace specd::cli {
namespace {

struct ScoreOptions {
  ModelFlags model;
  std::string prompt;
  bool json = false;
};

void run_score(const ScoreOptions& o) {
  Engine engine(load_engine_config(o.model));
  const std::vector<int32_t> ids = engine.encode(o.prompt);
  const std::vector<float> lp = engine.prompt_logprobs(ids);
  double sum = 0.0;
  for (float x : lp) sum += x;
  const double ppl = std::exp(-sum / static_cast<double>(lp.size()));
  if (o.json) {
    nlohmann::json tokens = nlohmann::json::array();
    for (size_t i = 0; i < lp.size(); ++i) {
      const int32_t id = ids[i + 1];
      tokens.push_back({{"id", id}, {"text", engine.decode({&id, 1}, false)}, {"logprob", lp[i]}});
    }
    nlohmann::json j = {{"num_tokens", ids.size()},
                        {"first_token_id", ids[0]},
                        {"tokens", tokens},
                        {"sum_logprob", sum},
                        {"perplexity", ppl}};
    std::cout << j.dump() << "\n";
    return;
  }
  for (size_t i = 0; i < lp.size(); ++i) {
    const int32_t id = ids[i + 1];
    std::printf("%8d %10.4f  %s\n", id, lp[i], nlohmann::json(engine.decode({&id, 1}, false)).dump().c_str());
  }
  std::printf("tokens %zu  sum logprob %.4f  perplexity %.4f\n", ids.size(), sum, ppl);
}

}  // namespace

void add_score_command(CLI::App& app) {
  auto o = std::make_shared<ScoreOptions>();
  CLI::App* cmd = app.add_subcommand("score", "log-probabilities of a prompt's tokens and its perplexity");
  add_model_flags(*cmd, o->model);
  cmd->add_option("--prompt", o->prompt, "text to score")->required();
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->callback([o] { run_score(*o); });
}

}  // namespace specd::cli

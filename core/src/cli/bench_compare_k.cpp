#include "cli/bench_compare_k.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/bench_decode.hpp"
#include "cli/policy_json.hpp"
#include "specd/error.hpp"

namespace specd::cli {
namespace {

struct Arm {
  std::string name;
  SpeculativeOptions options;
};

std::vector<Arm> parse_arms(const std::vector<std::string>& names) {
  std::vector<Arm> arms;
  for (const std::string& n : names) {
    Arm a{n, {}};
    if (n == "plain" || n == "0") {
      a.options.enabled = false;
      a.name = "plain";
    } else if (n == "dynamic") {
      a.options.dynamic = true;
    } else {
      size_t used = 0;
      int k = 0;
      try {
        k = std::stoi(n, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != n.size() || k < 1 || k > 32)
        throw Error(ErrorCode::kInvalidArgument,
                    "--compare-k: '" + n + "' is not an arm (expected plain, dynamic or a k in [1, 32])");
      a.name = "k=" + n;
      a.options.num_speculative_tokens = k;
      a.options.dynamic = false;
    }
    arms.push_back(a);
  }
  if (arms.empty()) throw Error(ErrorCode::kInvalidArgument, "--compare-k needs at least one arm");
  return arms;
}

struct Row {
  int32_t batch = 0;
  std::vector<DecodeResult> runs;          // per arm: the best of the repeats by tokens/s
  std::vector<double> full_batch;          // per arm: the best full-batch tokens/s of the repeats
  std::vector<std::vector<double>> rates;  // per arm: tokens/s per repeat, -1 where it did not run
  int dynamic = -1;                        // index of the dynamic arm
};

double ratio(double a, double b) {
  return b > 0 ? a / b : 0.0;
}

// Racing: after each repeat, an arm whose best tokens/s is below drop_below x the leader's stops
// repeating (identical work differs by well under 20% between runs here, so it cannot become the
// best); plain and dynamic, the terms of the comparison, always run.
void drop_slow_arms(const std::vector<Arm>& arms, const Row& row, double drop_below, std::vector<bool>& running) {
  double leader = 0;
  for (const DecodeResult& r : row.runs) leader = std::max(leader, r.tokens_per_s);
  for (size_t i = 0; i < arms.size(); ++i) {
    const bool kept = arms[i].name == "plain" || arms[i].name == "dynamic";
    if (!kept && row.runs[i].tokens_per_s < drop_below * leader) running[i] = false;
  }
}

long runs(const Row& row, size_t arm) {
  return std::count_if(row.rates[arm].begin(), row.rates[arm].end(), [](double x) { return x >= 0; });
}

// The median over the repeats in which both arms ran of a's rate / b's rate: runs next to each
// other in time share the machine's load, so the paired ratio cancels slow drifts.
double paired_median(const Row& row, int a, int b) {
  std::vector<double> r;
  const auto& ra = row.rates[static_cast<size_t>(a)];
  const auto& rb = row.rates[static_cast<size_t>(b)];
  for (size_t i = 0; i < ra.size() && i < rb.size(); ++i)
    if (ra[i] > 0 && rb[i] > 0) r.push_back(ra[i] / rb[i]);
  if (r.empty()) return 0.0;
  std::sort(r.begin(), r.end());
  const size_t h = r.size() / 2;
  return r.size() % 2 == 1 ? r[h] : 0.5 * (r[h - 1] + r[h]);
}

// The dynamic arm against the fastest other arm and against plain, for one rate per arm.
struct Versus {
  int best_other = -1;
  int plain = -1;
  double vs_best = 0;
  double vs_plain = -1;  // -1: no plain arm
};

Versus versus(const std::vector<Arm>& arms, const std::vector<double>& rate, int dynamic) {
  Versus v;
  if (dynamic < 0) return v;
  for (size_t i = 0; i < arms.size(); ++i) {
    if (static_cast<int>(i) == dynamic) continue;
    if (v.best_other < 0 || rate[i] > rate[static_cast<size_t>(v.best_other)]) v.best_other = static_cast<int>(i);
    if (arms[i].name == "plain") {
      v.plain = static_cast<int>(i);
      v.vs_plain = ratio(rate[static_cast<size_t>(dynamic)], rate[i]);
    }
  }
  if (v.best_other >= 0) v.vs_best = ratio(rate[static_cast<size_t>(dynamic)], rate[static_cast<size_t>(v.best_other)]);
  return v;
}

std::vector<double> tokens_per_s(const Row& row) {
  std::vector<double> r;
  for (const DecodeResult& d : row.runs) r.push_back(d.tokens_per_s);
  return r;
}

nlohmann::json versus_json(const std::vector<Arm>& arms, const Versus& v) {
  nlohmann::json j = {{"best_other", arms[static_cast<size_t>(v.best_other)].name},
                      {"dynamic_vs_best_other", v.vs_best}};
  if (v.vs_plain >= 0) j["dynamic_vs_plain"] = v.vs_plain;
  return j;
}

void print_versus(int32_t batch, const char* what, const std::vector<Arm>& arms, const Versus& v) {
  std::printf("%-6d %s: dynamic / best other (%s) = %.3fx", batch, what,
              arms[static_cast<size_t>(v.best_other)].name.c_str(), v.vs_best);
  if (v.vs_plain >= 0) std::printf(", dynamic / plain = %.3fx", v.vs_plain);
  std::printf("\n");
}

double tokens_per_step(const DecodeResult& r) {
  return r.steps > 0 ? static_cast<double>(r.tokens) / static_cast<double>(r.steps) : 0.0;
}

void print_json(const config::EngineConfig& cfg, const CompareKOptions& o, const std::vector<Arm>& arms,
                const std::vector<Row>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const Row& row : rows) {
    nlohmann::json a = nlohmann::json::array();
    for (size_t i = 0; i < arms.size(); ++i) {
      const DecodeResult& r = row.runs[i];
      a.push_back({{"arm", arms[i].name},
                   {"tokens_per_s", r.tokens_per_s},
                   {"runs", runs(row, i)},
                   {"rates", row.rates[i]},
                   {"full_batch_tokens_per_s", row.full_batch[i]},
                   {"step_ms", r.step_ms},
                   {"tokens_per_step", tokens_per_step(r)},
                   {"acceptance_rate", r.spec.acceptance_rate()},
                   {"dynamic", policy_json(r.spec.policy)}});
    }
    nlohmann::json j = {{"batch", row.batch}, {"arms", a}};
    if (const Versus v = versus(arms, tokens_per_s(row), row.dynamic); v.best_other >= 0) {
      j.update(versus_json(arms, v));
      j["paired"] = {{"dynamic_vs_best_other", paired_median(row, row.dynamic, v.best_other)}};
      if (v.plain >= 0) j["paired"]["dynamic_vs_plain"] = paired_median(row, row.dynamic, v.plain);
      j["full_batch"] = versus_json(arms, versus(arms, row.full_batch, row.dynamic));
    }
    out.push_back(j);
  }
  std::cout << nlohmann::json{{"proposer", cfg.speculative.proposer.name},
                              {"verifier", cfg.speculative.verifier.name},
                              {"k_max", cfg.speculative.num_speculative_tokens},
                              {"prompt_tokens", o.prompt_tokens},
                              {"prompt", o.prompt.empty() ? "synthetic" : "given"},
                              {"gen_tokens", o.gen_tokens},
                              {"repeats", o.repeats},
                              {"interleave", o.interleave_steps ? "steps" : "runs"},
                              {"rows", out}}
                   .dump(2)
            << "\n";
}

void print_text(const config::EngineConfig& cfg, const CompareKOptions& o, const std::vector<Arm>& arms,
                const std::vector<Row>& rows) {
  std::printf(
      "compare-k: proposer %s, verifier %s, dynamic k in 0..%d; %d-token %s prompts, %d tokens per request, "
      "greedy; best of %d repeats, interleaved by %s\n",
      cfg.speculative.proposer.name.c_str(), cfg.speculative.verifier.name.c_str(),
      cfg.speculative.num_speculative_tokens, o.prompt_tokens, o.prompt.empty() ? "synthetic" : "given", o.gen_tokens,
      o.repeats, o.interleave_steps ? "engine step (one engine per arm)" : "run (one engine)");
  std::printf("%-6s %-8s %11s %10s %9s %11s %11s %5s\n", "batch", "arm", "tokens/s", "step ms", "tok/step",
              "acceptance", "full-batch", "runs");
  for (const Row& row : rows) {
    for (size_t i = 0; i < arms.size(); ++i) {
      const DecodeResult& r = row.runs[i];
      std::printf("%-6d %-8s %11.2f %10.2f %9.2f %11.3f %11.2f %5ld\n", row.batch, arms[i].name.c_str(), r.tokens_per_s,
                  r.step_ms, tokens_per_step(r), r.spec.acceptance_rate(), row.full_batch[i], runs(row, i));
      if (r.spec.policy.steps > 0) std::printf("%-15s dynamic k: %s\n", "", r.spec.policy.summary().c_str());
    }
    const Versus v = versus(arms, tokens_per_s(row), row.dynamic);
    if (v.best_other < 0) continue;
    print_versus(row.batch, "tokens/s", arms, v);
    print_versus(row.batch, "full-batch", arms, versus(arms, row.full_batch, row.dynamic));
    std::printf("%-6d paired (median of per-repeat ratios): dynamic / best other (%s) = %.3fx", row.batch,
                arms[static_cast<size_t>(v.best_other)].name.c_str(), paired_median(row, row.dynamic, v.best_other));
    if (v.plain >= 0) std::printf(", dynamic / plain = %.3fx", paired_median(row, row.dynamic, v.plain));
    std::printf("\n");
  }
}

// One repeat of every running arm, in an order that rotates with the repeat. Every repeat runs the
// same prompts: best-of-N then filters the machine's noise only. (With a prompt set per repeat,
// each arm's best could come from a different set, and acceptance differs more between prompts
// than between arms.) One engine: the arms' runs follow each other. One engine per arm: the
// runs start together and advance one step each in turn until all are done.
std::vector<DecodeResult> run_repeat(const CompareKOptions& o, const std::vector<int32_t>& prompt,
                                     const std::vector<Arm>& arms, const std::vector<std::unique_ptr<Engine>>& engines,
                                     int32_t batch, int rep, const std::vector<bool>& running) {
  const uint64_t salt = 1000;
  std::vector<size_t> order;
  for (size_t n = 0; n < arms.size(); ++n) {
    const size_t i = (n + static_cast<size_t>(rep)) % arms.size();
    if (running[i]) order.push_back(i);
  }
  std::vector<DecodeResult> results(arms.size());
  if (engines.size() == 1) {
    for (size_t i : order)
      results[i] = bench_decode(*engines[0], batch, o.prompt_tokens, o.gen_tokens, salt, prompt, arms[i].options);
    return results;
  }
  std::vector<std::unique_ptr<DecodeRun>> runs(arms.size());
  for (size_t i : order)
    runs[i] =
        std::make_unique<DecodeRun>(*engines[i], batch, o.prompt_tokens, o.gen_tokens, salt, prompt, arms[i].options);
  for (bool any = true; any;) {
    any = false;
    for (size_t i : order) {
      if (runs[i]->done()) continue;
      runs[i]->step();
      any = true;
    }
  }
  for (size_t i : order) results[i] = runs[i]->result();
  return results;
}

}  // namespace

void bench_compare_k(const config::EngineConfig& cfg, const CompareKOptions& o) {
  if (!cfg.speculative.enabled)
    throw Error(ErrorCode::kInvalidArgument,
                "--compare-k compares proposal lengths: the config needs a `speculative` section");
  if (!(o.drop_below >= 0 && o.drop_below <= 1))
    throw Error(ErrorCode::kInvalidArgument, "--drop-below: " + std::to_string(o.drop_below) +
                                                 " is not a ratio in [0, 1] (0 = every arm runs every repeat)");
  if (o.interleave_steps && cfg.scheduler.async_scheduling)
    throw Error(ErrorCode::kInvalidArgument,
                "--interleave steps times each engine step on its own, which scheduler.async_scheduling overlaps with "
                "the next: use --interleave runs or turn async scheduling off");
  const std::vector<Arm> arms = parse_arms(o.arms);
  // --interleave steps: one engine per arm; runs: one engine for every arm.
  std::vector<std::unique_ptr<Engine>> engines;
  for (size_t i = 0; i < (o.interleave_steps ? arms.size() : 1); ++i) engines.push_back(std::make_unique<Engine>(cfg));
  CompareKOptions shown = o;  // what the report says: the given prompt's length
  std::vector<int32_t> prompt;
  if (!o.prompt.empty()) {
    prompt = engines.front()->encode(o.prompt);
    if (prompt.empty()) throw Error(ErrorCode::kInvalidArgument, "the bench prompt encodes to no tokens");
    shown.prompt_tokens = static_cast<int32_t>(prompt.size());
  }
  std::vector<Row> rows;
  const int repeats = std::max(1, o.repeats);
  for (int32_t batch : o.batches) {
    Row row{batch, std::vector<DecodeResult>(arms.size()), std::vector<double>(arms.size(), 0.0),
            std::vector<std::vector<double>>(arms.size(), std::vector<double>(static_cast<size_t>(repeats), -1.0))};
    std::vector<bool> running(arms.size(), true);
    for (int rep = 0; rep < repeats; ++rep) {
      std::vector<DecodeResult> results = run_repeat(o, prompt, arms, engines, batch, rep, running);
      for (size_t i = 0; i < arms.size(); ++i) {
        if (!running[i]) continue;
        row.rates[i][static_cast<size_t>(rep)] = results[i].tokens_per_s;
        row.full_batch[i] = std::max(row.full_batch[i], results[i].full_batch_tokens_per_s);
        if (results[i].tokens_per_s > row.runs[i].tokens_per_s) row.runs[i] = std::move(results[i]);
      }
      drop_slow_arms(arms, row, o.drop_below, running);
    }
    for (size_t i = 0; i < arms.size(); ++i)
      if (arms[i].name == "dynamic") row.dynamic = static_cast<int>(i);
    rows.push_back(std::move(row));
  }
  if (o.json) {
    print_json(cfg, shown, arms, rows);
  } else {
    print_text(cfg, shown, arms, rows);
  }
}

}  // namespace specd::cli

#include "cli/bench_compare_k.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

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
  std::vector<DecodeResult> runs;  // per arm: the best of the repeats by tokens/s
  std::vector<double> full_batch;  // per arm: the best full-batch tokens/s of the repeats
  int dynamic = -1;                // index of the dynamic arm
};

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

// The dynamic arm against the fastest other arm and against plain, for one rate per arm.
struct Versus {
  int best_other = -1;
  double vs_best = 0;
  double vs_plain = -1;  // -1: no plain arm
};

Versus versus(const std::vector<Arm>& arms, const std::vector<double>& rate, int dynamic) {
  Versus v;
  if (dynamic < 0) return v;
  for (size_t i = 0; i < arms.size(); ++i) {
    if (static_cast<int>(i) == dynamic) continue;
    if (v.best_other < 0 || rate[i] > rate[static_cast<size_t>(v.best_other)]) v.best_other = static_cast<int>(i);
    if (arms[i].name == "plain") v.vs_plain = ratio(rate[static_cast<size_t>(dynamic)], rate[i]);
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
  nlohmann::json j = {{"best_other", arms[static_cast<size_t>(v.best_other)].name}, {"dynamic_vs_best_other", v.vs_best}};
  if (v.vs_plain >= 0) j["dynamic_vs_plain"] = v.vs_plain;
  return j;
}

void print_versus(int32_t batch, const char* what, const std::vector<Arm>& arms, const Versus& v) {
  std::printf("%-6d %s: dynamic / best other (%s) = %.3fx", batch, what, arms[static_cast<size_t>(v.best_other)].name.c_str(),
              v.vs_best);
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
                   {"full_batch_tokens_per_s", row.full_batch[i]},
                   {"step_ms", r.step_ms},
                   {"tokens_per_step", tokens_per_step(r)},
                   {"acceptance_rate", r.spec.acceptance_rate()},
                   {"dynamic", policy_json(r.spec.policy)}});
    }
    nlohmann::json j = {{"batch", row.batch}, {"arms", a}};
    if (const Versus v = versus(arms, tokens_per_s(row), row.dynamic); v.best_other >= 0) {
      j.update(versus_json(arms, v));
      j["full_batch"] = versus_json(arms, versus(arms, row.full_batch, row.dynamic));
    }
    out.push_back(j);
  }
  std::cout << nlohmann::json{{"proposer", cfg.speculative.proposer.name},
                              {"verifier", cfg.speculative.verifier.name},
                              {"k_max", cfg.speculative.num_speculative_tokens},
                              {"prompt_tokens", o.prompt_tokens},
                              {"gen_tokens", o.gen_tokens},
                              {"repeats", o.repeats},
                              {"rows", out}}
                   .dump(2)
            << "\n";
}

void print_text(const config::EngineConfig& cfg, const CompareKOptions& o, const std::vector<Arm>& arms,
                const std::vector<Row>& rows) {
  std::printf("compare-k: proposer %s, verifier %s, dynamic k in 0..%d; %d-token prompts, %d tokens per request, "
              "greedy; best of %d interleaved runs\n",
              cfg.speculative.proposer.name.c_str(), cfg.speculative.verifier.name.c_str(),
              cfg.speculative.num_speculative_tokens, o.prompt_tokens, o.gen_tokens, o.repeats);
  std::printf("%-6s %-8s %11s %10s %9s %11s %11s\n", "batch", "arm", "tokens/s", "step ms", "tok/step", "acceptance",
              "full-batch");
  for (const Row& row : rows) {
    for (size_t i = 0; i < arms.size(); ++i) {
      const DecodeResult& r = row.runs[i];
      std::printf("%-6d %-8s %11.2f %10.2f %9.2f %11.3f %11.2f\n", row.batch, arms[i].name.c_str(), r.tokens_per_s,
                  r.step_ms, tokens_per_step(r), r.spec.acceptance_rate(), row.full_batch[i]);
      if (r.spec.policy.steps > 0) std::printf("%-15s dynamic k: %s\n", "", r.spec.policy.summary().c_str());
    }
    const Versus v = versus(arms, tokens_per_s(row), row.dynamic);
    if (v.best_other < 0) continue;
    print_versus(row.batch, "tokens/s", arms, v);
    print_versus(row.batch, "full-batch", arms, versus(arms, row.full_batch, row.dynamic));
  }
}

}  // namespace

void bench_compare_k(const config::EngineConfig& cfg, const CompareKOptions& o) {
  if (!cfg.speculative.enabled)
    throw Error(ErrorCode::kInvalidArgument, "--compare-k compares proposal lengths: the config needs a `speculative` section");
  const std::vector<Arm> arms = parse_arms(o.arms);
  Engine engine(cfg);
  std::vector<Row> rows;
  for (int32_t batch : o.batches) {
    Row row{batch, std::vector<DecodeResult>(arms.size()), std::vector<double>(arms.size(), 0.0)};
    // Every repeat runs the same prompts: best-of-N then filters the machine's noise only. (With
    // a prompt set per repeat, each arm's best could come from a different set, and acceptance
    // differs more between prompts than between arms.)
    const uint64_t salt = 1000;
    for (int rep = 0; rep < std::max(1, o.repeats); ++rep) {
      for (size_t n = 0; n < arms.size(); ++n) {
        const size_t i = (n + static_cast<size_t>(rep)) % arms.size();
        DecodeResult r = bench_decode(engine, batch, o.prompt_tokens, o.gen_tokens, salt, {}, arms[i].options);
        row.full_batch[i] = std::max(row.full_batch[i], r.full_batch_tokens_per_s);
        if (r.tokens_per_s > row.runs[i].tokens_per_s) row.runs[i] = std::move(r);
      }
    }
    for (size_t i = 0; i < arms.size(); ++i)
      if (arms[i].name == "dynamic") row.dynamic = static_cast<int>(i);
    rows.push_back(std::move(row));
  }
  if (o.json) {
    print_json(cfg, o, arms, rows);
  } else {
    print_text(cfg, o, arms, rows);
  }
}

}  // namespace specd::cli

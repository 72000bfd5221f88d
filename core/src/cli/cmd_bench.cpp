// specd bench (--config FILE | --model DIR) [--prompt-tokens N] [--gen-tokens N] [--batch 1,8]
// Throughput of the engine on synthetic prompts: prefill tokens/s, decode tokens/s per batch
// size, peak RSS, and the memory-bandwidth floor of decoding (weight bytes per step divided
// by a measured read bandwidth) to show how far decode is from the hardware limit.
#include <CLI/CLI.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli/commands.hpp"
#include "cli/model_flags.hpp"
#include "specd/engine.hpp"
#include "specd/error.hpp"
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
  bool json = false;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<int32_t> synthetic_prompt(int32_t n, int64_t vocab, uint64_t salt) {
  std::vector<int32_t> ids;
  uint64_t x = 0x9E3779B97F4A7C15ull * (salt + 1);
  for (int32_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    ids.push_back(static_cast<int32_t>(3 + x % static_cast<uint64_t>(vocab - 3)));
  }
  return ids;
}

// Best-of-5 read bandwidth over a buffer far larger than the caches, all kernel threads.
double measure_read_bandwidth_gbs() {
  const size_t n = size_t{256} << 20;  // 1 GiB of floats
  std::unique_ptr<float[]> buf(new float[n]);
  kernels::parallel_for(static_cast<int64_t>(n), 1 << 20, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf[static_cast<size_t>(i)] = static_cast<float>(i & 7);
  });
  const int threads = kernels::num_threads();
  std::vector<float> partial(static_cast<size_t>(threads) * 16);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    kernels::parallel_for(threads, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const size_t lo = n * static_cast<size_t>(t) / static_cast<size_t>(threads);
        const size_t hi = n * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
        float acc[8] = {};
        for (size_t i = lo; i + 8 <= hi; i += 8) {
          for (int j = 0; j < 8; ++j) acc[j] += buf[i + static_cast<size_t>(j)];
        }
        float s = 0;
        for (float a : acc) s += a;
        partial[static_cast<size_t>(t) * 16] = s;
      }
    });
    best = std::min(best, seconds_since(t0));
  }
  volatile float sink = 0;
  for (float p : partial) sink = sink + p;
  return static_cast<double>(n * sizeof(float)) / best / 1e9;
}

struct DecodeResult {
  int32_t batch = 0;
  double tokens_per_s = 0;
  double step_ms = 0;  // mean time of one decode step (one token per sequence)
};

// Runs `batch` requests together; returns decode throughput measured over the steps after
// every request has its first token (so prefill is excluded).
DecodeResult bench_decode(Engine& engine, int32_t batch, int32_t prompt_tokens, int32_t gen_tokens, uint64_t salt) {
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = gen_tokens;
  sp.ignore_eos = true;
  std::vector<RequestId> ids;
  for (int32_t b = 0; b < batch; ++b) {
    Request r;
    r.prompt_ids = synthetic_prompt(prompt_tokens, engine.info().vocab_size, salt + static_cast<uint64_t>(b));
    r.sampling = sp;
    ids.push_back(engine.add_request(r));
  }
  int32_t started = 0;
  int64_t tokens = 0, steps = 0;
  Clock::time_point t0;
  while (engine.has_unfinished()) {
    const bool timing = started == batch;
    const auto outs = engine.step();
    for (const RequestOutput& o : outs) {
      if (o.finish_reason == FinishReason::kError) throw Error(ErrorCode::kInternal, "bench request failed: " + o.error);
      if (timing) tokens += static_cast<int64_t>(o.new_token_ids.size());
      if (!timing && o.num_generated_tokens == 1) ++started;
    }
    if (timing) ++steps;
    if (!timing && started == batch) t0 = Clock::now();
  }
  DecodeResult r;
  r.batch = batch;
  const double s = seconds_since(t0);
  if (steps > 0 && s > 0) {
    r.tokens_per_s = static_cast<double>(tokens) / s;
    r.step_ms = s * 1e3 / static_cast<double>(steps);
  }
  return r;
}

double bench_prefill(Engine& engine, int32_t prompt_tokens, uint64_t salt) {
  Request r;
  r.prompt_ids = synthetic_prompt(prompt_tokens, engine.info().vocab_size, salt);
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 1;
  r.sampling.ignore_eos = true;
  engine.add_request(r);
  const auto t0 = Clock::now();
  while (engine.has_unfinished()) {
    for (const RequestOutput& o : engine.step()) {
      if (o.finish_reason == FinishReason::kError) throw Error(ErrorCode::kInternal, "bench request failed: " + o.error);
    }
  }
  return prompt_tokens / seconds_since(t0);
}

void run_bench(const BenchOptions& o) {
  if (o.prompt_tokens < 1 || o.gen_tokens < 2) {
    throw Error(ErrorCode::kInvalidArgument, "--prompt-tokens must be >= 1 and --gen-tokens >= 2");
  }
  const config::EngineConfig cfg = load_engine_config(o.model);
  const auto t_load = Clock::now();
  Engine engine(cfg);
  const double load_s = seconds_since(t_load);
  const EngineInfo& info = engine.info();

  double prefill = 0;
  for (int i = 0; i < std::max(1, o.repeats); ++i) prefill = std::max(prefill, bench_prefill(engine, o.prompt_tokens, 100 + static_cast<uint64_t>(i)));
  std::vector<DecodeResult> decode;
  for (int32_t b : o.batches) {
    DecodeResult best;
    for (int i = 0; i < std::max(1, o.repeats); ++i) {
      DecodeResult d = bench_decode(engine, b, o.prompt_tokens, o.gen_tokens, 1000 * static_cast<uint64_t>(i + 1));
      if (d.tokens_per_s > best.tokens_per_s) best = d;
    }
    decode.push_back(best);
  }
  // Peak RSS of the engine runs, before the bandwidth probe allocates its own buffer.
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double peak_rss_mib = static_cast<double>(ru.ru_maxrss) / 1024.0;
  const double bw = measure_read_bandwidth_gbs();
  const double floor_ms = static_cast<double>(info.decode_weight_bytes) / (bw * 1e9) * 1e3;

  if (o.json) {
    nlohmann::json d = nlohmann::json::array();
    for (const auto& r : decode) {
      d.push_back({{"batch", r.batch}, {"tokens_per_s", r.tokens_per_s}, {"step_ms", r.step_ms},
                   {"step_over_floor", floor_ms > 0 ? r.step_ms / floor_ms : 0.0}});
    }
    nlohmann::json j = {{"model", info.model_dir},
                        {"architecture", info.architecture},
                        {"threads", info.num_threads},
                        {"load_s", load_s},
                        {"prompt_tokens", o.prompt_tokens},
                        {"gen_tokens", o.gen_tokens},
                        {"prefill_tokens_per_s", prefill},
                        {"decode", d},
                        {"peak_rss_mib", peak_rss_mib},
                        {"read_bandwidth_gb_s", bw},
                        {"decode_weight_bytes", info.decode_weight_bytes},
                        {"decode_floor_ms_per_step", floor_ms}};
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("model       %s (%s, %lld layers), %d threads, loaded in %.2f s\n", info.model_dir.c_str(),
              info.architecture.c_str(), static_cast<long long>(info.num_layers), info.num_threads, load_s);
  std::printf("prefill     %.1f tokens/s (%d-token prompt)\n", prefill, o.prompt_tokens);
  for (const auto& r : decode) {
    std::printf("decode b=%-3d %.2f tokens/s, %.2f ms/step (%.2fx the bandwidth floor)\n", r.batch, r.tokens_per_s,
                r.step_ms, floor_ms > 0 ? r.step_ms / floor_ms : 0.0);
  }
  std::printf("memory      read bandwidth %.1f GB/s; %.1f MiB of weights per decode step -> floor %.2f ms/step "
              "(%.1f tokens/s at batch 1)\n",
              bw, static_cast<double>(info.decode_weight_bytes) / (1 << 20), floor_ms, 1e3 / floor_ms);
  std::printf("peak RSS    %.1f MiB\n", peak_rss_mib);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "prefill/decode throughput against the memory-bandwidth floor");
  add_model_flags(*cmd, o->model);
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "synthetic prompt length")->capture_default_str();
  cmd->add_option("--gen-tokens", o->gen_tokens, "tokens generated per request in decode runs")->capture_default_str();
  cmd->add_option("--batch", o->batches, "decode batch sizes")->delimiter(',')->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "runs per measurement (best is reported)")->capture_default_str();
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace specd::cli

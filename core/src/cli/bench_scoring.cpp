#include "cli/bench_scoring.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <span>

#include "cli/bench_scorers.hpp"  // synthetic_prompt
#include "kv/kv_cache.hpp"
#include "model/checkpoint.hpp"
#include "model/llama.hpp"
#include "model/weights.hpp"
#include "specd/error.hpp"

namespace specd::cli {

using Clock = std::chrono::steady_clock;

std::vector<ScoringResult> measure_scoring(const EngineInfo& info, const std::string& dtype_setting,
                                           model::Placement placement, int32_t k, int32_t context,
                                           const std::vector<int32_t>& batches, int reps) {
  std::shared_ptr<const model::Checkpoint> ckpt = model::Checkpoint::open(info.model_dir);
  model::LlamaModel m(model::LlamaWeights::load(ckpt, -1, model::resolve_weight_dtype(dtype_setting, "--dtype")), -1,
                      nullptr, placement);
  const kv::KvCacheShape shape = m.kv_shape(info.kv_block_size, model::parse_dtype(info.kv_dtype));
  const int32_t max_batch = batches.empty() ? 1 : *std::max_element(batches.begin(), batches.end());
  const int32_t per_seq = (context + k + 1 + shape.block_size - 1) / shape.block_size + 1;
  kv::KvCache kv(shape, max_batch * per_seq, placement.device);
  model::ForwardOutput out;
  std::vector<ScoringResult> results;
  for (int32_t batch : batches) {
    std::vector<std::vector<int32_t>> prompts;
    model::ForwardBatch fb;
    for (int32_t s = 0; s < batch; ++s) {
      prompts.push_back(synthetic_prompt(context + k + 1, info.vocab_size, 5000 + static_cast<uint64_t>(s)));
      kv.add_sequence(s);
      if (!kv.reserve(s, context)) throw Error(ErrorCode::kInternal, "scoring measurement: KV reservation failed");
    }
    for (int32_t s = 0; s < batch; ++s) {
      fb.seqs.push_back({s,
                         std::span<const int32_t>(prompts[static_cast<size_t>(s)]).first(static_cast<size_t>(context)),
                         model::LogitsMode::kNone});
    }
    m.forward(fb, kv, out);
    auto timed = [&](int32_t n, model::LogitsMode mode) {
      std::vector<double> times;
      for (int rep = 0; rep <= reps; ++rep) {  // rep 0 warms up
        fb.seqs.clear();
        for (int32_t s = 0; s < batch; ++s) {
          if (!kv.reserve(s, n)) throw Error(ErrorCode::kInternal, "scoring measurement: KV reservation failed");
          fb.seqs.push_back({s,
                             std::span<const int32_t>(prompts[static_cast<size_t>(s)])
                                 .subspan(static_cast<size_t>(context), static_cast<size_t>(n)),
                             mode});
        }
        const auto t0 = Clock::now();
        m.forward(fb, kv, out);
        const double t = std::chrono::duration<double>(Clock::now() - t0).count();
        for (int32_t s = 0; s < batch; ++s) kv.truncate(s, context);
        if (rep > 0) times.push_back(t);
      }
      std::sort(times.begin(), times.end());
      return times[times.size() / 2] * 1e3;
    };
    ScoringResult r;
    r.batch = batch;
    // Interleave to spread noise from other processes over both numbers.
    r.decode_ms = timed(1, model::LogitsMode::kLast);
    r.score_ms = timed(k + 1, model::LogitsMode::kAll);
    r.decode_ms = std::min(r.decode_ms, timed(1, model::LogitsMode::kLast));
    r.score_ms = std::min(r.score_ms, timed(k + 1, model::LogitsMode::kAll));
    for (int32_t s = 0; s < batch; ++s) kv.remove_sequence(s);
    results.push_back(r);
  }
  return results;
}

}  // namespace specd::cli

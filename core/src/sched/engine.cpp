// specd::Engine: config → checkpoint + tokenizer + model + KV cache + scheduler, and the step
// loop (schedule → one batched forward → sample → stop conditions → detokenize).
#include "specd/engine.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "config/config.hpp"
#include "kv/kv_cache.hpp"
#include "model/checkpoint.hpp"
#include "model/llama.hpp"
#include "sampling/sampling.hpp"
#include "sched/scheduler.hpp"
#include "specd/error.hpp"
#include "specd/kernels/parallel.hpp"
#include "specd/log.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Sequence id used by prompt_logprobs; request ids start at 1.
constexpr kv::SeqId kScoringSeq = -1;

size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : size_t{8} << 30;
}

}  // namespace

struct Engine::Impl {
  config::EngineConfig cfg;
  EngineInfo info;
  std::shared_ptr<const model::Checkpoint> checkpoint;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::unique_ptr<model::LlamaModel> model;
  std::unique_ptr<kv::KvCache> kv;
  std::unique_ptr<sched::Scheduler> scheduler;
  std::vector<int32_t> eos_ids;
  int64_t max_model_len = 0;
  RequestId next_id = 1;
  std::vector<RequestOutput> pending;  // failures and aborts reported by the next step
  model::ForwardBatch batch;
  model::ForwardOutput fwd;
  std::vector<float> probs;
  log::Logger& log = log::get("engine");

  explicit Impl(const config::EngineConfig& c);
  RequestOutput fail_output(RequestId id, const std::string& message, int32_t num_prompt = 0);
  void emit_token(sched::Sequence& seq, int32_t token, RequestOutput& out);
};

Engine::Impl::Impl(const config::EngineConfig& c) : cfg(c) {
  if (cfg.model.device != "cpu") {
    throw Error(ErrorCode::kUnsupported, "model.device: \"" + cfg.model.device +
                                             "\" is not supported yet; this build runs models on the cpu");
  }
  if (cfg.model.dtype != "auto" && cfg.model.dtype != "f32") {
    throw Error(ErrorCode::kUnsupported,
                "model.dtype: \"" + cfg.model.dtype +
                    "\" is not supported on the cpu, which computes in f32 (use auto or f32; "
                    "f16/bf16 checkpoints are widened to f32 at load)");
  }
  if (cfg.speculative.enabled) {
    log.warn("the speculative section is ignored: this build decodes with the target model only");
  }
  kernels::set_num_threads(cfg.model.num_threads);

  checkpoint = model::Checkpoint::open(cfg.model.path);
  const model::ModelConfig& mc = checkpoint->config();
  const std::string tok_path = cfg.model.tokenizer.empty() ? cfg.model.path : cfg.model.tokenizer;
  tok = tokenizer::Tokenizer::load(tok_path);
  if (tok->vocab_size() > mc.vocab_size) {
    throw Error(ErrorCode::kModelFormat,
                "tokenizer " + tok->source().string() + " has ids up to " +
                    std::to_string(tok->vocab_size() - 1) + " (vocabulary of " +
                    std::to_string(tok->vocab_size()) + ") but the model " +
                    (checkpoint->dir() / "config.json").string() + " has vocab_size " +
                    std::to_string(mc.vocab_size));
  }

  max_model_len = cfg.model.max_model_len > 0 ? cfg.model.max_model_len : mc.max_position_embeddings;
  if (max_model_len > mc.max_position_embeddings) {
    throw Error(ErrorCode::kInvalidArgument,
                "model.max_model_len = " + std::to_string(max_model_len) +
                    " exceeds the model's max_position_embeddings " +
                    std::to_string(mc.max_position_embeddings) + " (" +
                    (checkpoint->dir() / "config.json").string() + ")");
  }

  model = std::make_unique<model::LlamaModel>(model::LlamaWeights::load(checkpoint));
  const kv::KvCacheShape shape = model->kv_shape(cfg.kv_cache.block_size);
  size_t budget = 0;
  if (cfg.kv_cache.memory_mib > 0) {
    budget = static_cast<size_t>(cfg.kv_cache.memory_mib) << 20;
  } else {
    // auto: every sequence at full context, capped at a quarter of physical memory.
    const size_t full = kv::bytes_per_block(shape) *
                        static_cast<size_t>((max_model_len + shape.block_size - 1) / shape.block_size) *
                        static_cast<size_t>(cfg.scheduler.max_num_seqs);
    budget = std::min(full, physical_memory_bytes() / 4);
  }
  const int32_t blocks = kv::blocks_for_budget(shape, budget);
  if (blocks < 1) {
    throw Error(ErrorCode::kOutOfMemory,
                "kv_cache.memory_mib: " + std::to_string(budget >> 20) +
                    " MiB holds no KV block (one block of " + std::to_string(shape.block_size) +
                    " tokens needs " + std::to_string(kv::bytes_per_block(shape)) + " bytes)");
  }
  kv = std::make_unique<kv::KvCache>(shape, blocks);
  scheduler = std::make_unique<sched::Scheduler>(
      sched::SchedulerLimits{cfg.scheduler.max_num_seqs, cfg.scheduler.max_num_batched_tokens,
                             cfg.scheduler.chunked_prefill},
      *kv);

  eos_ids = mc.eos_token_ids;
  if (auto e = tok->eos_id(); e && std::find(eos_ids.begin(), eos_ids.end(), *e) == eos_ids.end()) {
    eos_ids.push_back(*e);
  }
  probs.resize(static_cast<size_t>(mc.vocab_size));

  info.model_dir = checkpoint->dir().string();
  info.architecture = std::string(model::architecture_name(mc.arch));
  info.vocab_size = mc.vocab_size;
  info.num_layers = model->num_layers();
  info.hidden_size = mc.hidden_size;
  info.max_model_len = max_model_len;
  info.kv_block_size = shape.block_size;
  info.kv_num_blocks = blocks;
  info.kv_bytes = kv::bytes_per_block(shape) * static_cast<size_t>(blocks);
  info.decode_weight_bytes = model->decode_bytes();
  info.num_threads = kernels::num_threads();
  log.info("loaded {} ({}, {} layers, vocab {}); KV cache {} blocks x {} tokens ({} MiB); {} threads",
           info.model_dir, info.architecture, info.num_layers, info.vocab_size, blocks,
           shape.block_size, info.kv_bytes >> 20, info.num_threads);
}

RequestOutput Engine::Impl::fail_output(RequestId id, const std::string& message, int32_t num_prompt) {
  RequestOutput out;
  out.id = id;
  out.finished = true;
  out.finish_reason = FinishReason::kError;
  out.error = message;
  out.num_prompt_tokens = num_prompt;
  return out;
}

void Engine::Impl::emit_token(sched::Sequence& seq, int32_t token, RequestOutput& out) {
  seq.tokens.push_back(token);
  ++seq.step;
  out.new_token_ids.push_back(token);
  const SamplingParams& p = seq.params;
  const bool stop_token =
      std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end() ||
      (!p.ignore_eos && std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end());
  if (stop_token) {
    // As in vLLM, the stop token's own text is not part of the output.
    out.finish_reason = FinishReason::kStop;
  } else {
    const auto r = seq.stops.push(seq.detok->push({&token, 1}));
    out.text_delta += r.text;
    if (r.stopped) out.finish_reason = FinishReason::kStop;
  }
  if (out.finish_reason == FinishReason::kNone &&
      (seq.num_generated() >= p.max_tokens || static_cast<int64_t>(seq.tokens.size()) >= max_model_len)) {
    out.finish_reason = FinishReason::kLength;
  }
  if (out.finish_reason != FinishReason::kNone && !(out.finish_reason == FinishReason::kStop && !stop_token)) {
    // End of stream: release text the detokenizer and the stop matcher were holding back.
    const auto r = seq.stops.push(seq.detok->flush());
    out.text_delta += r.text;
    if (r.stopped) {
      out.finish_reason = FinishReason::kStop;
    } else {
      out.text_delta += seq.stops.flush();
    }
  }
  out.finished = out.finish_reason != FinishReason::kNone;
  out.num_prompt_tokens = seq.num_prompt;
  out.num_generated_tokens = seq.num_generated();
}

Engine::Engine(const config::EngineConfig& config) : impl_(std::make_unique<Impl>(config)) {}
Engine::~Engine() = default;

RequestId Engine::add_request(const Request& request) {
  Impl& m = *impl_;
  const RequestId id = m.next_id++;
  if (std::string err = validate_sampling_params(request.sampling); !err.empty()) {
    m.pending.push_back(m.fail_output(id, "invalid sampling parameters: " + err));
    return id;
  }
  auto seq = std::make_unique<sched::Sequence>();
  seq->id = id;
  try {
    seq->tokens = request.prompt_ids.empty() ? m.tok->encode(request.prompt) : request.prompt_ids;
  } catch (const Error& e) {
    m.pending.push_back(m.fail_output(id, std::string("cannot tokenize the prompt: ") + e.what()));
    return id;
  }
  const auto n = static_cast<int32_t>(seq->tokens.size());
  if (n == 0) {
    m.pending.push_back(m.fail_output(id, "the prompt is empty"));
    return id;
  }
  for (int32_t t : seq->tokens) {
    if (t < 0 || t >= m.info.vocab_size) {
      m.pending.push_back(m.fail_output(id, "prompt token id " + std::to_string(t) +
                                                " is outside the vocabulary [0, " +
                                                std::to_string(m.info.vocab_size) + ")", n));
      return id;
    }
  }
  if (n >= m.max_model_len) {
    m.pending.push_back(m.fail_output(id, "the prompt has " + std::to_string(n) +
                                              " tokens but the context length (max_model_len) is " +
                                              std::to_string(m.max_model_len) +
                                              ", which leaves no room to generate", n));
    return id;
  }
  seq->num_prompt = n;
  seq->params = request.sampling;
  seq->seed = request.sampling.seed ? *request.sampling.seed
                                    : splitmix64(static_cast<uint64_t>(m.cfg.model.seed) ^ splitmix64(id));
  seq->detok = std::make_unique<tokenizer::IncrementalDetokenizer>(*m.tok, true, seq->tokens);
  seq->stops = sampling::StopStringMatcher(request.sampling.stop);
  m.scheduler->add(std::move(seq));
  return id;
}

void Engine::abort(RequestId id) {
  Impl& m = *impl_;
  if (auto seq = m.scheduler->remove(id)) {
    RequestOutput out;
    out.id = id;
    out.finished = true;
    out.finish_reason = FinishReason::kAbort;
    out.num_prompt_tokens = seq->num_prompt;
    out.num_generated_tokens = seq->num_generated();
    m.pending.push_back(std::move(out));
  }
}

bool Engine::has_unfinished() const { return !impl_->scheduler->empty() || !impl_->pending.empty(); }

std::vector<RequestOutput> Engine::step() {
  Impl& m = *impl_;
  std::vector<RequestOutput> outputs = std::move(m.pending);
  m.pending.clear();

  sched::SchedulePlan plan = m.scheduler->schedule();
  for (auto& [id, message] : plan.failed) outputs.push_back(m.fail_output(id, message));
  if (plan.chunks.empty()) return outputs;

  m.batch.seqs.clear();
  m.batch.return_hidden = false;
  for (const sched::ScheduledChunk& c : plan.chunks) {
    m.batch.seqs.push_back({static_cast<kv::SeqId>(c.seq->id),
                            std::span<const int32_t>(c.seq->tokens).subspan(static_cast<size_t>(c.start),
                                                                            static_cast<size_t>(c.n)),
                            c.sample ? model::LogitsMode::kLast : model::LogitsMode::kNone});
  }
  try {
    m.model->forward(m.batch, *m.kv, m.fwd);
  } catch (const Error& e) {
    // The forward failed as a whole (no KV length changed): fail this step's requests, keep
    // the engine serving the others.
    m.log.error("forward failed for {} sequences: {}", plan.chunks.size(), e.what());
    for (const sched::ScheduledChunk& c : plan.chunks) {
      const int32_t np = c.seq->num_prompt;
      const RequestId id = c.seq->id;
      m.scheduler->remove(id);
      outputs.push_back(m.fail_output(id, std::string("forward failed: ") + e.what(), np));
    }
    return outputs;
  }

  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const sched::ScheduledChunk& c = plan.chunks[i];
    sched::Sequence& seq = *c.seq;
    seq.num_computed += c.n;
    if (!c.sample) continue;
    RequestOutput out;
    out.id = seq.id;
    try {
      const int32_t token = sampling::sample_token(m.fwd.logits_row(m.fwd.row_start[i]), seq.params,
                                                   seq.seed, seq.step, m.probs);
      m.emit_token(seq, token, out);
    } catch (const Error& e) {
      out = m.fail_output(seq.id, std::string("sampling failed: ") + e.what(), seq.num_prompt);
    }
    if (out.finished) m.scheduler->remove(seq.id);
    outputs.push_back(std::move(out));
  }
  return outputs;
}

std::vector<float> Engine::prompt_logprobs(std::span<const int32_t> ids) {
  Impl& m = *impl_;
  const auto n = static_cast<int32_t>(ids.size());
  if (n < 2) throw Error(ErrorCode::kInvalidArgument, "scoring needs at least 2 tokens, got " + std::to_string(n));
  if (n > m.max_model_len) {
    throw Error(ErrorCode::kInvalidArgument, "cannot score " + std::to_string(n) +
                                                 " tokens: the context length is " +
                                                 std::to_string(m.max_model_len));
  }
  for (int32_t t : ids) {
    if (t < 0 || t >= m.info.vocab_size) {
      throw Error(ErrorCode::kInvalidArgument, "token id " + std::to_string(t) + " is outside the vocabulary");
    }
  }
  struct Guard {
    kv::KvCache& kv;
    ~Guard() { kv.remove_sequence(kScoringSeq); }
  } guard{*m.kv};
  m.kv->add_sequence(kScoringSeq);
  if (!m.kv->reserve(kScoringSeq, n)) {
    throw Error(ErrorCode::kOutOfMemory, "not enough free KV blocks to score " + std::to_string(n) +
                                             " tokens (" + std::to_string(m.kv->num_free_blocks()) +
                                             " free of " + std::to_string(m.kv->num_blocks()) + ")");
  }
  std::vector<float> out;
  out.reserve(static_cast<size_t>(n - 1));
  const int32_t chunk = m.cfg.scheduler.max_num_batched_tokens;
  model::ForwardBatch batch;
  model::ForwardOutput fwd;
  for (int32_t start = 0; start < n - 1; start += chunk) {
    const int32_t len = std::min(chunk, n - 1 - start);  // the last token predicts nothing
    batch.seqs = {{kScoringSeq, ids.subspan(static_cast<size_t>(start), static_cast<size_t>(len)),
                   model::LogitsMode::kAll}};
    m.model->forward(batch, *m.kv, fwd);
    for (int32_t r = 0; r < len; ++r) {
      const auto row = fwd.logits_row(r);
      float mx = row[0];
      for (float x : row) mx = std::max(mx, x);
      double sum = 0.0;
      for (float x : row) sum += std::exp(static_cast<double>(x) - mx);
      const double lse = mx + std::log(sum);
      out.push_back(static_cast<float>(row[static_cast<size_t>(ids[static_cast<size_t>(start + r + 1)])] - lse));
    }
  }
  return out;
}

std::vector<int32_t> Engine::encode(std::string_view text, bool add_special_tokens) const {
  tokenizer::EncodeOptions opts;
  opts.add_special_tokens = add_special_tokens;
  return impl_->tok->encode(text, opts);
}

std::string Engine::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->tok->decode(ids, skip_special_tokens);
}

const EngineInfo& Engine::info() const { return impl_->info; }

}  // namespace specd

// specd::Engine: config → checkpoint + tokenizer + model + KV cache + scheduler, and the step
// loop (schedule → one batched forward → sample → stop conditions → detokenize).
#include "specd/engine.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "config/config.hpp"
#include "kv/kv_cache.hpp"
#include "model/checkpoint.hpp"
#include "model/llama.hpp"
#include "sampling/sampling.hpp"
#include "sched/scheduler.hpp"
#include "spec/speculator.hpp"
#include "specd/error.hpp"
#include "specd/kernels/cpu_isa.hpp"
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
  // Speculative decoding (null without a `speculative` section or with enabled: false).
  std::unique_ptr<spec::Speculator> spec;
  spec::SpecMetrics spec_metrics;
  std::vector<spec::Speculator::Item> spec_items;
  std::vector<std::vector<int32_t>> spec_tokens;  // [last token, drafts...] per item
  std::vector<int32_t> spec_rows;
  std::vector<int32_t> spec_token_rows;  // first hidden row (token order) of each item
  std::vector<spec::Speculator::PrefillChunk> prefill_chunks;
  std::vector<size_t> prefill_batch;  // batch entry of each prefill chunk
  // Per-step scratch, reused so that a decode step does not allocate.
  std::vector<size_t> item_chunks;       // chunk index of each speculative item
  std::vector<int32_t> chunk_item;       // speculative item of each chunk, or -1
  std::vector<size_t> batch_chunk;       // chunk index of each batch entry
  std::vector<char> batch_failed;        // per batch entry
  std::vector<spec::Speculator::Item> drafted_items;  // items with at least one draft
  std::vector<int32_t> drafted_rows, drafted_token_rows;
  std::vector<size_t> drafted_chunk;
  uint64_t num_preemptions = 0;

  explicit Impl(const config::EngineConfig& c);
  RequestOutput fail_output(RequestId id, const std::string& message, int32_t num_prompt = 0);
  void emit_token(sched::Sequence& seq, int32_t token, RequestOutput& out);
  // Removes a sequence from the scheduler (freeing its KV) and from the proposer.
  void finish_seq(RequestId id);
  int32_t lookahead(const sched::Sequence& seq, size_t num_running) const;
  void run_speculative(std::vector<RequestOutput>& outputs, const std::vector<size_t>& item_chunks,
                       const sched::SchedulePlan& plan, double score_seconds, double propose_seconds);
};

Engine::Impl::Impl(const config::EngineConfig& c) : cfg(c) {
  if (cfg.model.device != "cpu") {
    throw Error(ErrorCode::kUnsupported, "model.device: \"" + cfg.model.device +
                                             "\" is not supported yet; this build runs models on the cpu");
  }
  kernels::set_num_threads(cfg.model.num_threads);
  log.info("CPU kernels: {} ({} threads)", kernels::cpu_isa_name(kernels::active_cpu_isa()), kernels::num_threads());

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

  const model::DType weight_dtype = model::resolve_weight_dtype(cfg.model.dtype, *checkpoint, "model.dtype");
  const model::WeightPlacement placement = cfg.model.mmap ? model::WeightPlacement::kMap : model::WeightPlacement::kCopy;
  std::shared_ptr<const model::LlamaWeights> weights =
      model::LlamaWeights::load(checkpoint, -1, weight_dtype, placement);
  model = std::make_unique<model::LlamaModel>(weights);
  const kv::KvCacheShape shape =
      model->kv_shape(cfg.kv_cache.block_size, kv::resolve_kv_dtype(cfg.kv_cache.dtype, weight_dtype));
  // The proposer may load draft models: create it first so the KV budget covers them.
  if (cfg.speculative.enabled) {
    spec = std::make_unique<spec::Speculator>(cfg, weights, shape.block_size, max_model_len, mc.vocab_size);
  }
  // Target and hosted models get equal block counts; one "block" of the budget is a target
  // block plus one block of every hosted model (docs/speculative.md).
  const size_t block_bytes = kv::bytes_per_block(shape) + (spec ? spec->host().hosted_bytes_per_block() : 0);
  size_t budget = 0;
  if (cfg.kv_cache.memory_mib > 0) {
    budget = static_cast<size_t>(cfg.kv_cache.memory_mib) << 20;
  } else {
    // auto: every sequence at full context, capped at a quarter of physical memory.
    const size_t full = block_bytes *
                        static_cast<size_t>((max_model_len + shape.block_size - 1) / shape.block_size) *
                        static_cast<size_t>(cfg.scheduler.max_num_seqs);
    budget = std::min(full, physical_memory_bytes() / 4);
  }
  const auto blocks = static_cast<int32_t>(std::min<size_t>(budget / block_bytes, INT32_MAX));
  if (blocks < 1) {
    throw Error(ErrorCode::kOutOfMemory,
                "kv_cache.memory_mib: " + std::to_string(budget >> 20) +
                    " MiB holds no KV block (one block of " + std::to_string(shape.block_size) +
                    " tokens needs " + std::to_string(block_bytes) + " bytes for all models)");
  }
  kv = std::make_unique<kv::KvCache>(shape, blocks);
  if (spec) spec->host().allocate_kv(blocks);
  scheduler = std::make_unique<sched::Scheduler>(
      sched::SchedulerLimits{cfg.scheduler.max_num_seqs, cfg.scheduler.max_num_batched_tokens,
                             cfg.scheduler.chunked_prefill},
      *kv);
  if (spec) {
    scheduler->set_lookahead(
        [this](const sched::Sequence& seq, size_t num_running) { return lookahead(seq, num_running); });
  }

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
  info.weight_dtype = std::string(kernels::dtype_name(weight_dtype));
  info.kv_dtype = std::string(kernels::dtype_name(shape.dtype));
  info.cpu_isa = std::string(kernels::cpu_isa_name(kernels::active_cpu_isa()));
  info.num_threads = kernels::num_threads();
  if (spec) {
    info.proposer = spec->proposer_name();
    info.verifier = spec->verifier_name();
    info.num_speculative_tokens = spec->default_k();
  }
  log.info("loaded {} ({}, {} layers, vocab {}, {} weights); KV cache {} blocks x {} tokens ({} MiB, {})",
           info.model_dir, info.architecture, info.num_layers, info.vocab_size, info.weight_dtype, blocks,
           shape.block_size, info.kv_bytes >> 20, info.kv_dtype);
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
  if (const auto& k = request.speculative.num_speculative_tokens; k && (*k < 0 || *k > 32)) {
    m.pending.push_back(m.fail_output(id, "speculative.num_speculative_tokens must be in [0, 32], got " +
                                              std::to_string(*k), n));
    return id;
  }
  seq->num_prompt = n;
  seq->params = request.sampling;
  if (m.spec && request.speculative.enabled) {
    seq->spec_k = request.speculative.num_speculative_tokens.value_or(m.spec->default_k());
  }
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
    if (m.spec) m.spec->release(id);
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

void Engine::Impl::finish_seq(RequestId id) {
  scheduler->remove(id);
  if (spec) spec->release(id);
}

// k_i for a decoding sequence this step: the request's k, capped by the proposer's max_k and
// by what max_tokens leaves; 0 (plain decode) above disable_by_batch_size or when the step
// would come within k tokens of the context limit.
int32_t Engine::Impl::lookahead(const sched::Sequence& seq, size_t num_running) const {
  if (seq.spec_k <= 0) return 0;
  const int32_t limit = cfg.speculative.disable_by_batch_size;
  if (limit > 0 && num_running > static_cast<size_t>(limit)) return 0;
  int32_t k = seq.spec_k;
  if (const int32_t max_k = spec->proposer_caps().max_k; max_k > 0) k = std::min(k, max_k);
  k = std::min(k, seq.params.max_tokens - seq.num_generated() - 1);
  if (static_cast<int64_t>(seq.tokens.size()) + k + 1 > max_model_len) return 0;
  return std::max(k, 0);
}

std::vector<RequestOutput> Engine::step() {
  using Clock = std::chrono::steady_clock;
  Impl& m = *impl_;
  std::vector<RequestOutput> outputs = std::move(m.pending);
  m.pending.clear();

  sched::SchedulePlan plan = m.scheduler->schedule();
  m.num_preemptions += static_cast<uint64_t>(plan.num_preempted);
  for (auto& [id, message] : plan.failed) {
    if (m.spec) m.spec->release(id);
    outputs.push_back(m.fail_output(id, message));
  }
  if (m.spec) {
    for (RequestId id : plan.preempted) m.spec->release(id);  // drafts re-prefill with the target
  }
  if (plan.chunks.empty()) return outputs;

  // Propose for decodes that got lookahead slots. A failing proposer fails those requests only.
  std::vector<size_t>& item_chunks = m.item_chunks;
  item_chunks.clear();
  double propose_seconds = 0;
  m.spec_items.clear();
  if (m.spec) {
    for (size_t i = 0; i < plan.chunks.size(); ++i) {
      const sched::ScheduledChunk& c = plan.chunks[i];
      if (c.sample && c.lookahead > 0) {
        m.spec_items.push_back({c.seq, c.lookahead, 0});
        item_chunks.push_back(i);
      }
    }
    if (!m.spec_items.empty()) {
      const auto t0 = Clock::now();
      try {
        m.spec->propose(m.spec_items);
      } catch (const Error& e) {
        m.log.error("proposer failed for {} sequences: {}", m.spec_items.size(), e.what());
        for (size_t j = 0; j < m.spec_items.size(); ++j) {
          sched::Sequence* seq = m.spec_items[j].seq;
          outputs.push_back(m.fail_output(seq->id, std::string("speculative decoding failed: ") + e.what(),
                                          seq->num_prompt));
          plan.chunks[item_chunks[j]].seq = nullptr;  // dropped from this step
          m.finish_seq(seq->id);
        }
        m.spec_items.clear();
        item_chunks.clear();
      }
      propose_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    }
  }

  // One forward: prefill chunks, plain decodes, and [last token, drafts...] of every item.
  m.batch.seqs.clear();
  // A proposer that needs the target's hidden states gets them for every new token.
  const bool want_hidden = m.spec && m.spec->wants_hidden();
  m.batch.return_hidden = want_hidden;
  m.batch.hidden_all = want_hidden;
  m.spec_tokens.resize(std::max(m.spec_tokens.size(), m.spec_items.size()));
  std::vector<int32_t>& chunk_item = m.chunk_item;
  chunk_item.assign(plan.chunks.size(), -1);
  for (size_t j = 0; j < m.spec_items.size(); ++j) chunk_item[item_chunks[j]] = static_cast<int32_t>(j);
  std::vector<size_t>& batch_chunk = m.batch_chunk;
  batch_chunk.clear();
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const sched::ScheduledChunk& c = plan.chunks[i];
    if (c.seq == nullptr) continue;
    std::span<const int32_t> tokens =
        std::span<const int32_t>(c.seq->tokens).subspan(static_cast<size_t>(c.start), static_cast<size_t>(c.n));
    model::LogitsMode mode = c.sample ? model::LogitsMode::kLast : model::LogitsMode::kNone;
    if (chunk_item[i] >= 0 && m.spec_items[static_cast<size_t>(chunk_item[i])].num_drafted > 0) {
      const auto j = static_cast<size_t>(chunk_item[i]);
      std::vector<int32_t>& t = m.spec_tokens[j];
      t.assign(tokens.begin(), tokens.end());
      const auto d = m.spec->drafts(j);
      t.insert(t.end(), d.begin(), d.end());
      tokens = t;
      mode = model::LogitsMode::kAll;
    }
    m.batch.seqs.push_back({static_cast<kv::SeqId>(c.seq->id), tokens, mode});
    batch_chunk.push_back(i);
  }
  const auto t_forward = Clock::now();
  try {
    m.model->forward(m.batch, *m.kv, m.fwd);
  } catch (const Error& e) {
    // The forward failed as a whole (no KV length changed): fail this step's requests, keep
    // the engine serving the others.
    m.log.error("forward failed for {} sequences: {}", batch_chunk.size(), e.what());
    for (size_t i : batch_chunk) {
      const sched::Sequence& seq = *plan.chunks[i].seq;
      const int32_t np = seq.num_prompt;
      const RequestId id = seq.id;
      m.finish_seq(id);
      outputs.push_back(m.fail_output(id, std::string("forward failed: ") + e.what(), np));
    }
    return outputs;
  }
  const double forward_seconds = std::chrono::duration<double>(Clock::now() - t_forward).count();

  // Hidden states of non-scored chunks: prefill chunks go to the proposer's on_prefill now,
  // plain decodes are kept for the next propose (scored items: after verification).
  std::vector<char>& failed = m.batch_failed;
  failed.assign(batch_chunk.size(), 0);
  if (want_hidden) {
    const auto H = static_cast<size_t>(m.fwd.hidden_size);
    m.prefill_chunks.clear();
    m.prefill_batch.clear();
    for (size_t b = 0; b < batch_chunk.size(); ++b) {
      const sched::ScheduledChunk& c = plan.chunks[batch_chunk[b]];
      const int32_t item = chunk_item[batch_chunk[b]];
      if (c.seq->spec_k <= 0) continue;  // never proposes
      if (item >= 0 && m.spec_items[static_cast<size_t>(item)].num_drafted > 0) continue;
      const float* rows = m.fwd.hidden.data() + static_cast<size_t>(m.fwd.token_start[b]) * H;
      if (m.spec->in_prefill(c.seq->id)) {
        m.prefill_chunks.push_back({c.seq, c.start, c.n, c.sample, rows});
        m.prefill_batch.push_back(b);
      } else {
        m.spec->add_hidden(*c.seq, c.start, rows, c.n);
      }
    }
    try {
      m.spec->prefill(m.prefill_chunks);
    } catch (const Error& e) {
      m.log.error("proposer on_prefill failed for {} sequences: {}", m.prefill_chunks.size(), e.what());
      for (size_t b : m.prefill_batch) {
        const sched::Sequence& seq = *plan.chunks[batch_chunk[b]].seq;
        const int32_t np = seq.num_prompt;
        const RequestId id = seq.id;
        failed[b] = 1;
        m.finish_seq(id);
        outputs.push_back(m.fail_output(id, std::string("speculative decoding failed: ") + e.what(), np));
      }
    }
  }

  // Plain chunks: KV bookkeeping and sampling.
  m.spec_rows.assign(m.spec_items.size(), 0);
  m.spec_token_rows.assign(m.spec_items.size(), 0);
  for (size_t b = 0; b < batch_chunk.size(); ++b) {
    if (failed[b]) continue;
    const sched::ScheduledChunk& c = plan.chunks[batch_chunk[b]];
    const int32_t item = chunk_item[batch_chunk[b]];
    if (item >= 0 && m.spec_items[static_cast<size_t>(item)].num_drafted > 0) {
      m.spec_rows[static_cast<size_t>(item)] = m.fwd.row_start[b];
      m.spec_token_rows[static_cast<size_t>(item)] = m.fwd.token_start[b];
      continue;
    }
    sched::Sequence& seq = *c.seq;
    seq.num_computed += c.n;
    if (!c.sample) continue;
    RequestOutput out;
    out.id = seq.id;
    try {
      const int32_t token = sampling::sample_token(m.fwd.logits_row(m.fwd.row_start[b]), seq.params, seq.seed,
                                                   seq.step, m.probs);
      m.emit_token(seq, token, out);
    } catch (const Error& e) {
      out = m.fail_output(seq.id, std::string("sampling failed: ") + e.what(), seq.num_prompt);
    }
    if (out.finished) {
      m.finish_seq(seq.id);
    } else if (item >= 0) {
      m.spec->on_accept(seq, 0, out.new_token_ids);  // proposed nothing; the target's token
    }
    outputs.push_back(std::move(out));
  }
  m.run_speculative(outputs, item_chunks, plan, forward_seconds, propose_seconds);
  return outputs;
}

// Verifies the drafted items of this step and appends what the verifier emitted.
void Engine::Impl::run_speculative(std::vector<RequestOutput>& outputs, const std::vector<size_t>& item_chunks,
                                   const sched::SchedulePlan& plan, double score_seconds, double propose_seconds) {
  using Clock = std::chrono::steady_clock;
  std::vector<spec::Speculator::Item>& drafted = drafted_items;
  std::vector<int32_t>& rows = drafted_rows;
  std::vector<int32_t>& token_rows = drafted_token_rows;
  std::vector<size_t>& chunk_of = drafted_chunk;
  drafted.clear();
  rows.clear();
  token_rows.clear();
  chunk_of.clear();
  for (size_t j = 0; j < spec_items.size(); ++j) {
    if (spec_items[j].num_drafted == 0) continue;
    drafted.push_back(spec_items[j]);
    rows.push_back(spec_rows[j]);
    token_rows.push_back(spec_token_rows[j]);
    chunk_of.push_back(item_chunks[j]);
  }
  if (drafted.empty()) return;
  const auto t0 = Clock::now();
  try {
    spec->verify(drafted, fwd, rows);
  } catch (const Error& e) {
    log.error("verifier failed for {} sequences: {}", drafted.size(), e.what());
    for (const auto& it : drafted) {
      outputs.push_back(fail_output(it.seq->id, std::string("speculative decoding failed: ") + e.what(),
                                    it.seq->num_prompt));
      finish_seq(it.seq->id);
    }
    return;
  }
  const double verify_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  spec_metrics.add_times(propose_seconds, score_seconds, verify_seconds);

  for (size_t j = 0; j < drafted.size(); ++j) {
    sched::Sequence& seq = *drafted[j].seq;
    const sched::ScheduledChunk& c = plan.chunks[chunk_of[j]];
    const int32_t accepted = spec->num_accepted(j);
    // The forward wrote K/V for the last token and every draft; keep the accepted ones.
    const int32_t keep = c.start + c.n + accepted;
    kv->truncate(static_cast<kv::SeqId>(seq.id), keep);
    seq.num_computed = keep;
    RequestOutput out;
    out.id = seq.id;
    int32_t appended = 0;
    for (int32_t token : spec->emitted(j)) {
      emit_token(seq, token, out);
      ++appended;
      if (out.finished) break;
    }
    seq.spec_stats.record(drafted[j].max_draft, drafted[j].num_drafted, accepted, appended);
    spec_metrics.record(drafted[j].max_draft, drafted[j].num_drafted, accepted, appended);
    out.num_draft_tokens = static_cast<int32_t>(seq.spec_stats.draft_tokens);
    out.num_accepted_tokens = static_cast<int32_t>(seq.spec_stats.accepted_tokens);
    out.num_spec_steps = static_cast<int32_t>(seq.spec_stats.num_drafts);
    if (out.finished) {
      finish_seq(seq.id);
    } else {
      try {
        if (spec->wants_hidden()) {
          // Committed and through the target: the chunk's positions and the accepted drafts.
          const float* h = fwd.hidden.data() + static_cast<size_t>(token_rows[j]) * static_cast<size_t>(fwd.hidden_size);
          spec->add_hidden(seq, c.start, h, c.n + accepted);
        }
        spec->on_accept(seq, accepted, out.new_token_ids);
      } catch (const Error& e) {
        log.error("proposer on_accept failed for request {}: {}", seq.id, e.what());
        out = fail_output(seq.id, std::string("speculative decoding failed: ") + e.what(), seq.num_prompt);
        finish_seq(seq.id);
      }
    }
    outputs.push_back(std::move(out));
  }
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

spec::SpecMetrics Engine::spec_metrics() const { return impl_->spec_metrics; }

EngineStats Engine::stats() const {
  const Impl& m = *impl_;
  EngineStats s;
  s.kv_blocks_total = m.kv->num_blocks();
  s.kv_blocks_free = m.kv->num_free_blocks();
  s.num_running = m.scheduler->num_running();
  s.num_waiting = m.scheduler->num_waiting();
  s.num_preemptions = m.num_preemptions;
  return s;
}

}  // namespace specd

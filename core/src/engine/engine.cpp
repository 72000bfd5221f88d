// specd::Engine: config → checkpoint + tokenizer + model + KV cache + scheduler + scorer (and,
// with a `speculative` section, the proposer and verifier plugins), requests in, prompt scoring.
// The step itself is in step.cpp.
#include "specd/engine.hpp"

#include <unistd.h>

#include <algorithm>
#include <limits>
#include <string>

#include "common/hash.hpp"
#include "engine/engine_impl.hpp"
#include "specd/error.hpp"
#include "specd/kernels/cpu_isa.hpp"
#include "specd/kernels/device_memory.hpp"
#include "specd/kernels/parallel.hpp"
#include "specd/kernels/softmax.hpp"

namespace specd {
namespace {

size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : size_t{8} << 30;
}

// model.tensor_parallel_size against the MPI job this process is part of: the target runs on
// every rank of the job, or (1) on rank 0 alone while the other ranks wait (docs/distributed.md).
int32_t resolve_tensor_parallel(const config::EngineConfig& cfg, const dist::Session* session) {
  const int world = session != nullptr ? session->size() : 1;
  if (session != nullptr && !session->leader()) {
    throw Error(ErrorCode::kInternal,
                "an Engine on rank " + std::to_string(session->rank()) + ": ranks other than 0 run tp::follow()");
  }
  const int32_t tp = cfg.model.tensor_parallel_size > 0 ? cfg.model.tensor_parallel_size : world;
  if (tp == world) return tp;
  if (world == 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "model.tensor_parallel_size = " + std::to_string(tp) + " needs " + std::to_string(tp) +
                    " MPI ranks, but this process was not started by an MPI launcher (run: mpirun -np " +
                    std::to_string(tp) + " specd ...)");
  }
  if (tp != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "model.tensor_parallel_size = " + std::to_string(tp) + " but the MPI job has " + std::to_string(world) +
                    " ranks: the target is split over every rank of the job (set it to " + std::to_string(world) +
                    ", leave it unset, or set 1 to run on rank 0 alone)");
  }
  log::get("engine").warn("model.tensor_parallel_size = 1 in an MPI job of {} ranks: the model runs on rank 0 alone",
                          world);
  return tp;
}

int32_t resolve_proposer_parallel(const config::EngineConfig& cfg, int32_t tp) {
  const int32_t p = cfg.speculative.proposer_tensor_parallel_size;
  if (p == 0) return tp;
  if (p != 1 && p != tp) {
    throw Error(ErrorCode::kInvalidArgument,
                "speculative.proposer.tensor_parallel_size = " + std::to_string(p) +
                    ": expected 1 (the draft on rank 0 alone) or the target's tensor_parallel_size (" +
                    std::to_string(tp) + ")");
  }
  return p;
}

}  // namespace

Engine::Impl::Impl(const config::EngineConfig& c) : cfg(c) {
  info.tensor_parallel_size = resolve_tensor_parallel(cfg, dist::Session::current());
  placement = model::resolve_placement(cfg.model.device, info.tensor_parallel_size, cfg.model.cuda_graphs);
  if (cfg.speculative.enabled)
    info.proposer_tensor_parallel_size = resolve_proposer_parallel(cfg, info.tensor_parallel_size);
  kernels::set_num_threads(tp::kernel_threads(cfg.model.num_threads));
  log.info("CPU kernels: {} ({} threads)", kernels::cpu_isa_name(kernels::active_cpu_isa()), kernels::num_threads());
  if (placement.device_runtime())
    log.info("model on its device runtime, {}: {}", cfg.model.device, kernels::device_description(placement.device));

  checkpoint = model::Checkpoint::open(cfg.model.path);
  const model::ModelConfig& mc = checkpoint->config();
  const std::string tok_path = cfg.model.tokenizer.empty() ? cfg.model.path : cfg.model.tokenizer;
  tok = tokenizer::Tokenizer::load(tok_path);
  if (tok->vocab_size() > mc.vocab_size) {
    throw Error(ErrorCode::kModelFormat,
                "tokenizer " + tok->source().string() + " has ids up to " + std::to_string(tok->vocab_size() - 1) +
                    " (vocabulary of " + std::to_string(tok->vocab_size()) + ") but the model " +
                    mc.config_path.string() + " has vocab_size " + std::to_string(mc.vocab_size));
  }

  max_model_len = cfg.model.max_model_len > 0 ? cfg.model.max_model_len : mc.max_position_embeddings;
  if (max_model_len > mc.max_position_embeddings) {
    throw Error(ErrorCode::kInvalidArgument, "model.max_model_len = " + std::to_string(max_model_len) +
                                                 " exceeds the model's max_position_embeddings " +
                                                 std::to_string(mc.max_position_embeddings) + " (" +
                                                 mc.config_path.string() + ")");
  }

  std::shared_ptr<const model::LlamaWeights> weights = load_target();
  model = std::make_unique<model::LlamaModel>(weights, -1, models->group(true), placement);
  model->set_context_length(max_model_len);
  models->attach(*model, tp::ModelFactory::kTarget);
  const kv::KvCacheShape shape =
      model->kv_shape(cfg.kv_cache.block_size, kv::resolve_kv_dtype(cfg.kv_cache.dtype, weights->dtype()));
  // The proposer may load draft models: create it first so the KV budget covers them.
  spec = std::make_unique<speculative::Speculator>(cfg, weights, shape.block_size, max_model_len, mc.vocab_size,
                                                   *models, placement);
  size_kv_cache(shape);
  scheduler = std::make_unique<sched::Scheduler>(
      sched::SchedulerLimits{cfg.scheduler.max_num_seqs, cfg.scheduler.max_num_batched_tokens,
                             cfg.scheduler.chunked_prefill, max_model_len, spec->max_k(),
                             cfg.speculative.disable_by_batch_size, cfg.scheduler.num_scheduler_steps},
      *kv, spec->hosted_kv());
  // Prefix caching skips the target's prompt positions it finds, so a proposer that needs the
  // target's hidden states of every position (MTP, EAGLE-3) gets a full prefill instead.
  // A proposer's own models (draft model, self-draft) cache prefixes too, but their caches may
  // have evicted other blocks than the target's: with them, every cache copies what it finds
  // instead of sharing it, so that no hosted cache ever needs more blocks than the target holds.
  kv->set_prefix_caching(cfg.kv_cache.prefix_caching && !spec->wants_hidden(), spec->hosted_bytes_per_block() == 0);
  spec->set_prefix_caching(kv->prefix_caching());
  if (cfg.kv_cache.prefix_caching && !kv->prefix_caching())
    log.info("prefix caching is off: the proposer needs the target's hidden states of every prompt position");
  scorer = spec->make_scorer(*model, *kv);
  output = std::make_unique<output::OutputProcessor>(*tok, mc.vocab_size);
  validator.emplace(*tok, mc.vocab_size, max_model_len);
  // The policy's cost prior (any request may ask for dynamic speculation): steps up to every
  // sequence drafting k tokens, within the token budget.
  const int64_t widest = int64_t{cfg.scheduler.max_num_seqs} * (cfg.speculative.num_speculative_tokens + 1);
  spec->calibrate(*model, *kv, static_cast<int32_t>(std::min<int64_t>(widest, cfg.scheduler.max_num_batched_tokens)));
  pipeline = std::make_unique<StepPipeline>(
      *scheduler, *spec, *scorer, mc.vocab_size, cfg.scheduler.async_scheduling,
      cfg.model.sampler == "gumbel" ? sampling::Sampler::kGumbel : sampling::Sampler::kInverseCdf);
  spec->collect(pipeline->outbox().arms, spec_metrics.policy);  // the calibration time

  eos_ids = mc.eos_token_ids;
  if (auto e = tok->eos_id(); e && std::find(eos_ids.begin(), eos_ids.end(), *e) == eos_ids.end()) {
    eos_ids.push_back(*e);
  }
  probs.resize(static_cast<size_t>(mc.vocab_size));
  describe();
}

std::shared_ptr<const model::LlamaWeights> Engine::Impl::load_target() {
  const model::WeightDTypes dtype = model::resolve_weight_dtype(cfg.model.dtype, "model.dtype");
  const model::WeightPlacement placement =
      cfg.model.mmap ? model::WeightPlacement::kMap : model::WeightPlacement::kCopy;
  const int32_t tp = info.tensor_parallel_size;
  std::shared_ptr<const model::LlamaWeights> weights;
  auto load_here = [&] { weights = model::LlamaWeights::load(checkpoint, -1, dtype, placement, {0, tp}); };
  const int32_t proposer = info.proposer_tensor_parallel_size > 0 ? info.proposer_tensor_parallel_size : tp;
  models = tp::open_models(
      dist::Session::current(), tp,
      tp::TargetSpec{cfg.model.path, dtype, placement, cfg.model.num_threads, proposer, max_model_len}, load_here);
  return weights;
}

void Engine::Impl::size_kv_cache(const kv::KvCacheShape& shape) {
  // Target and hosted models get equal block counts; one "block" of the budget is a target
  // block plus one block of every hosted model (docs/speculative.md). Under tensor parallelism
  // every size is this rank's share (its KV heads), and rank 0 picks the count for all ranks.
  const size_t block_bytes = kv::bytes_per_block(shape) + spec->hosted_bytes_per_block();
  size_t budget = 0;
  if (cfg.kv_cache.memory_mib > 0) {
    budget = static_cast<size_t>(cfg.kv_cache.memory_mib) << 20;
  } else {
    // auto: every sequence at full context, capped at a quarter of physical memory, or on a GPU
    // at kv_cache.gpu_memory_fraction of its memory free after the weights.
    const size_t full = block_bytes * static_cast<size_t>((max_model_len + shape.block_size - 1) / shape.block_size) *
                        static_cast<size_t>(cfg.scheduler.max_num_seqs);
    const kernels::Device device = placement.device;
    const size_t cap = device == kernels::Device::kCpu
                           ? physical_memory_bytes() / 4
                           : static_cast<size_t>(cfg.kv_cache.gpu_memory_fraction *
                                                 static_cast<double>(kernels::device_memory_info(device).free));
    budget = std::min(full, cap);
  }
  const auto blocks = static_cast<int32_t>(std::min<size_t>(budget / block_bytes, INT32_MAX));
  if (blocks < 1) {
    throw Error(ErrorCode::kOutOfMemory, "kv_cache.memory_mib: " + std::to_string(budget >> 20) +
                                             " MiB holds no KV block (one block of " +
                                             std::to_string(shape.block_size) + " tokens needs " +
                                             std::to_string(block_bytes) + " bytes for all models)");
  }
  models->allocate_kv(tp::ModelFactory::kTarget, shape, blocks, [&]() -> kv::KvCache& {
    kv = std::make_unique<kv::KvCache>(shape, blocks, placement.device);
    return *kv;
  });
  spec->allocate_hosted_kv(blocks);
}

void Engine::Impl::describe() {
  const model::ModelConfig& mc = checkpoint->config();
  const kv::KvCacheShape& shape = kv->shape();
  const int32_t blocks = kv->num_blocks();
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
  const model::WeightDTypes& requested = model->weights().requested_dtype();
  info.weight_dtype = requested.mix ? requested.name() : std::string(kernels::dtype_name(model->weights().dtype()));
  info.kv_dtype = std::string(kernels::dtype_name(shape.dtype));
  info.prefix_caching = kv->prefix_caching();
  info.cpu_isa = std::string(kernels::cpu_isa_name(kernels::active_cpu_isa()));
  info.cpu_model = kernels::cpu_model_name();
  info.device = placement.device_runtime()
                    ? cfg.model.device + " (" + kernels::device_description(placement.device) + ")"
                    : std::string("cpu");
  info.default_temperature = mc.default_temperature;
  info.default_top_p = mc.default_top_p;
  info.default_min_p = mc.default_min_p;
  info.default_repetition_penalty = mc.default_repetition_penalty;
  info.default_top_k = mc.default_top_k;
  info.default_max_tokens = mc.default_max_tokens;
  info.num_threads = kernels::num_threads();
  spec->describe(info, *scorer);
  if (cfg.speculative.enabled) info.ab_log = cfg.speculative.ab_log;
  log.info("loaded {} ({}, {} layers, vocab {}, {} weights); KV cache {} blocks x {} tokens ({} MiB, {})",
           info.model_dir, info.architecture, info.num_layers, info.vocab_size, info.weight_dtype, blocks,
           shape.block_size, info.kv_bytes >> 20, info.kv_dtype);
  log.info("scheduling: {}, {} decode step(s) per schedule", cfg.scheduler.async_scheduling ? "async" : "sync",
           cfg.scheduler.num_scheduler_steps);
  if (info.tensor_parallel_size > 1) log.info("tensor parallel over {} ranks (MPI)", info.tensor_parallel_size);
  if (info.tensor_parallel_size > 1 && cfg.speculative.enabled)
    log.info("the proposer's draft models run on {} of them", info.proposer_tensor_parallel_size);
}

Engine::Engine(const Config& config) : impl_(std::make_unique<Impl>(config.impl().engine)) {}
Engine::~Engine() = default;

void Engine::add_request(RequestId id, const Request& request) {
  Impl& m = *impl_;
  if (m.choices.contains(id))
    throw Error(ErrorCode::kInvalidArgument, "request id " + std::to_string(id) + " is already in use");
  RequestValidator::Verdict v = m.validator->check(request);
  const auto num_prompt = static_cast<int32_t>(v.prompt.size());
  if (!v.ok()) {
    m.pending.push_back(output::OutputProcessor::refuse(id, v.error, num_prompt));
    return;
  }
  std::unique_ptr<sched::Sequence> seq = m.first_choice(id, request, std::move(v.prompt));
  if (std::string err = m.attach_constraint(request, *seq); !err.empty()) {
    m.pending.push_back(output::OutputProcessor::refuse(id, err, num_prompt));
    return;
  }
  if (std::string err = m.spec->accounting().assign(id, request, *seq); !err.empty()) {
    m.pending.push_back(output::OutputProcessor::refuse(id, err, num_prompt));
    return;
  }
  m.output->add(seq->id, id, 0, seq->tokens, request.sampling, request.tool_calls, seq->arm);
  std::vector<std::unique_ptr<sched::Sequence>> others = m.other_choices(*seq, request);
  for (const auto& c : others) m.output->add(c->id, id, c->index, c->tokens, c->params, request.tool_calls, c->arm);
  m.choices.add(id, seq->id, std::move(others));
  m.arrivals.push_back(std::move(seq));  // enters the scheduler at the next step
}

std::unique_ptr<sched::Sequence> Engine::Impl::first_choice(RequestId id, const Request& request,
                                                            std::vector<int32_t> prompt) {
  auto seq = std::make_unique<sched::Sequence>();
  seq->id = choices.new_sequence_id();
  seq->request = id;
  seq->tokens = std::move(prompt);
  seq->num_prompt = static_cast<int32_t>(seq->tokens.size());
  seq->params = request.sampling;
  seq->seed = request.sampling.seed ? *request.sampling.seed
                                    : splitmix64(static_cast<uint64_t>(cfg.model.seed) ^ splitmix64(id));
  seq->stop_ids = request.sampling.stop_token_ids;
  seq->tenant = tenant_key(request.speculative.tenant);
  if (!request.sampling.ignore_eos) seq->stop_ids.insert(seq->stop_ids.end(), eos_ids.begin(), eos_ids.end());
  return seq;
}

std::string Engine::Impl::attach_constraint(const Request& request, sched::Sequence& seq) {
  if (!request.structured.active()) return "";
  try {
    if (!constraints)
      constraints = std::make_unique<constrain::ConstraintCompiler>(constrain::TokenTrie::from_tokenizer(*tok));
    seq.constraint.emplace(constraints->compile(request.structured));
    ++structured_requests;
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Choices 1..n-1: copies of choice 0, each with its own seed stream (vLLM: seed + index).
std::vector<std::unique_ptr<sched::Sequence>> Engine::Impl::other_choices(const sched::Sequence& first,
                                                                          const Request& request) {
  std::vector<std::unique_ptr<sched::Sequence>> out;
  for (int32_t i = 1; i < request.n; ++i) {
    auto choice = std::make_unique<sched::Sequence>(first);
    choice->id = choices.new_sequence_id();
    choice->index = i;
    choice->seed = first.seed + static_cast<uint64_t>(i);
    choice->params.prompt_logprobs = -1;  // reported once, with choice 0
    out.push_back(std::move(choice));
  }
  return out;
}

void Engine::Impl::fork_choices(const sched::Sequence& first) {
  // The prompt's KV up to its last token is shared; each choice recomputes that token to get its
  // own logits row. A proposer that needs the target's hidden states of the prompt gets them only
  // from a full prefill, so then each choice prefills alone.
  const int32_t shared = spec->wants_hidden() ? 0 : first.num_prompt - 1;
  for (auto& choice : choices.take_waiting(first.request)) scheduler->add_fork(std::move(choice), first.id, shared);
}

void Engine::Impl::report(RequestOutput out, std::vector<RequestOutput>& outputs) {
  choices.on_output(out);
  outputs.push_back(std::move(out));
}

void Engine::Impl::end_waiting_choices(RequestId request, const std::string& error,
                                       std::vector<RequestOutput>& outputs) {
  for (const auto& f : choices.drop_waiting(request))
    report(error.empty() ? output->abort(f->id) : output->fail(f->id, error), outputs);
}

void Engine::abort(RequestId id) {
  Impl& m = *impl_;
  const std::span<const sched::SeqId> started = m.choices.started(id);
  for (const sched::SeqId seq : std::vector<sched::SeqId>(started.begin(), started.end())) {
    if (!m.output->contains(seq)) continue;  // already finished
    m.report(m.output->abort(seq), m.pending);
    auto at = std::find_if(m.arrivals.begin(), m.arrivals.end(), [&](const auto& s) { return s->id == seq; });
    if (at != m.arrivals.end()) {
      m.arrivals.erase(at);
    } else {
      m.retire(seq);
    }
  }
  m.end_waiting_choices(id, "", m.pending);
}

bool Engine::has_unfinished() const {
  const Impl& m = *impl_;
  return !m.pending.empty() || m.output->num_requests() > 0 || m.in_flight();
}

std::vector<float> Engine::prompt_logprobs(std::span<const int32_t> ids) {
  Impl& m = *impl_;
  m.finish_flight(SteadyClock::now());  // the model is the caller's now; outputs wait for step()
  m.validator->check_scoring(ids);
  const auto n = static_cast<int32_t>(ids.size());
  const kv::KvCache::Scratch scratch = m.kv->scratch();
  if (!m.kv->reserve(scratch.id(), n)) {
    throw Error(ErrorCode::kOutOfMemory, "not enough free KV blocks to score " + std::to_string(n) + " tokens (" +
                                             std::to_string(m.kv->num_free_blocks()) + " free of " +
                                             std::to_string(m.kv->num_blocks()) + ")");
  }
  std::vector<float> out;
  out.reserve(static_cast<size_t>(n - 1));
  const int32_t chunk = m.cfg.scheduler.max_num_batched_tokens;
  model::ForwardBatch batch;
  model::ForwardOutput fwd;
  for (int32_t start = 0; start < n - 1; start += chunk) {
    const int32_t len = std::min(chunk, n - 1 - start);  // the last token predicts nothing
    batch.seqs = {
        {scratch.id(), ids.subspan(static_cast<size_t>(start), static_cast<size_t>(len)), model::LogitsMode::kAll}};
    m.model->forward(batch, *m.kv, fwd);
    for (int32_t r = 0; r < len; ++r) {
      kernels::log_softmax(kernels::Device::kCpu, fwd.logits_row(r).data(), m.probs.data(), 1, m.info.vocab_size);
      out.push_back(m.probs[static_cast<size_t>(ids[static_cast<size_t>(start) + static_cast<size_t>(r) + 1])]);
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

const EngineInfo& Engine::info() const {
  return impl_->info;
}

spec::SpecMetrics Engine::spec_metrics() const {
  return impl_->spec_metrics;
}

const std::vector<spec::ArmMetrics>& Engine::arm_metrics() const {
  return impl_->spec->accounting().metrics();
}

const Tokenizer& Engine::tokenizer() const {
  return *impl_->tok;
}

EngineStats Engine::stats() const {
  const Impl& m = *impl_;
  EngineStats s;
  s.kv_blocks_total = m.kv->num_blocks();
  // The worker owns the KV cache while a step is in flight: its count when the step was launched.
  s.kv_blocks_free = m.in_flight() ? m.kv_free_at_launch : m.kv->num_free_blocks();
  s.num_running = m.scheduler->num_running();
  s.num_waiting = m.scheduler->num_waiting() + m.arrivals.size();
  s.num_preemptions = m.num_preemptions;
  s.kv_blocks_cached = m.in_flight() ? m.kv_cached_at_launch : m.kv->num_cached_free_blocks();
  const sched::Scheduler::PrefixCacheStats prefix = m.scheduler->prefix_cache_stats();
  s.prefix_cache_queries = prefix.queries;
  s.prefix_cache_hits = prefix.hits;
  s.structured_requests = m.structured_requests;
  if (m.constraints) {
    const constrain::MaskCache::Stats masks = m.constraints->mask_stats();
    s.grammar_masks_computed = masks.misses;
    s.grammar_masks_cached = masks.hits;
    s.grammar_mask_seconds = masks.compute_seconds;
  }
  s.grammar_cut_drafts = m.spec->grammar_cut_drafts();
  s.grammar_forced_drafts = m.spec->grammar_forced_drafts();
  if (const auto& moe = m.model->config().moe) {
    const model::LlamaModel::MoeStats& x = m.in_flight() ? m.moe_at_launch : m.model->moe_stats();
    s.moe_layer_passes = x.layer_passes;
    s.moe_experts_read = x.experts_read;
    s.moe_expert_rows = x.expert_rows;
    s.moe_experts_per_token = static_cast<int32_t>(moe->experts_per_token);
  }
  return s;
}

StepStats Engine::step_stats() const {
  return impl_->stats;
}

}  // namespace specd

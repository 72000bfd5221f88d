#include "speculative/model_host.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "model/checkpoint.hpp"
#include "model/device_weights.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"
#include "specd/sdk/error.hpp"

namespace specd::speculative {

// A loaded model (owned) or the engine's target (borrowed: bind_target).
struct ModelHost::Hosted {
  std::string description;  // for messages: "draft /path" or "self-draft (first 2 layers ...)"
  std::shared_ptr<const model::LlamaWeights> weights;
  model::LlamaModel* model = nullptr;
  kv::KvCache* kv = nullptr;
  bool is_target = false;
  int32_t tp_id = tp::ModelFactory::kLocal;  // else: runs on every rank under this model id
  std::unique_ptr<model::LlamaModel> own_model;
  std::unique_ptr<kv::KvCache> own_kv;
  model::ForwardBatch batch;  // reused across calls
  model::ForwardOutput out;

  void set_kv(const kv::KvCacheShape& shape, int32_t num_blocks) {
    own_kv = std::make_unique<kv::KvCache>(shape, num_blocks, model->placement().device);
    kv = own_kv.get();
  }
};

namespace {

ModelHost& host_of(void* host_ctx) {
  void* ctx = plugin::HostContext::model_ctx(host_ctx);
  SPECD_CHECK(ctx != nullptr, ErrorCode::kInternal, "model services called without a model host");
  return *static_cast<ModelHost*>(ctx);
}

ModelHost::Hosted& hosted(const specd_model* m) {
  SPECD_CHECK(m != nullptr, ErrorCode::kInvalidArgument, "model services: null model handle");
  return *reinterpret_cast<ModelHost::Hosted*>(const_cast<specd_model*>(m));
}

specd_model* handle(ModelHost::Hosted& h) {
  return reinterpret_cast<specd_model*>(&h);
}

int32_t status_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kConfig:
      return SPECD_ERR_INVALID_ARGUMENT;
    case ErrorCode::kNotFound:
      return SPECD_ERR_NOT_FOUND;
    case ErrorCode::kUnsupported:
    case ErrorCode::kModelFormat:
      return SPECD_ERR_UNSUPPORTED;
    case ErrorCode::kOutOfMemory:
      return SPECD_ERR_OUT_OF_MEMORY;
    default:
      return SPECD_ERR_INTERNAL;
  }
}

// Runs fn, translating exceptions into a status and a message: nothing throws into a plugin.
template <class Fn>
int32_t call(specd_error* err, Fn&& fn) noexcept {
  try {
    fn();
    return SPECD_OK;
  } catch (const Error& e) {
    sdk::detail::write_error(err, e.what());
    return status_for(e.code());
  } catch (const std::bad_alloc&) {
    sdk::detail::write_error(err, "out of memory");
    return SPECD_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    sdk::detail::write_error(err, e.what());
    return SPECD_ERR_INTERNAL;
  }
}

int64_t cached_length(const ModelHost::Hosted& h, uint64_t seq) {
  const auto id = static_cast<kv::SeqId>(seq);
  return h.kv != nullptr && h.kv->has_sequence(id) ? h.kv->num_tokens(id) : 0;
}

}  // namespace

const specd_model_services ModelHost::table_ = {
    sizeof(specd_model_services),
    // load
    [](void* host_ctx, const specd_model_load_options* options, specd_model** out, specd_error* err) {
      return call(err, [&] {
        SPECD_CHECK(options != nullptr && out != nullptr, ErrorCode::kInvalidArgument, "load: null argument");
        *out = handle(host_of(host_ctx).load(*options));
      });
    },
    // load_mtp
    [](void* host_ctx, specd_model* target, int32_t module, specd_model** out, specd_error* err) {
      return call(err, [&] {
        SPECD_CHECK(out != nullptr, ErrorCode::kInvalidArgument, "load_mtp: null argument");
        *out = handle(host_of(host_ctx).load_mtp(target == nullptr ? nullptr : &hosted(target), module));
      });
    },
    // release: frees a loaded model and its KV cache (the handle is invalid afterwards); the
    // engine's target handle is not the plugin's to free.
    [](void* host_ctx, specd_model* m) {
      if (m != nullptr && !hosted(m).is_target) host_of(host_ctx).release(&hosted(m));
    },
    // info: model == NULL describes the engine's target model.
    [](void* host_ctx, const specd_model* m, specd_model_info* out) {
      return call(nullptr, [&] { host_of(host_ctx).fill_info(m == nullptr ? nullptr : &hosted(m), *out); });
    },
    // forward
    [](void* host_ctx, specd_model* m, const specd_forward_batch* batch, specd_error* err) {
      return call(err, [&] {
        SPECD_CHECK(batch != nullptr, ErrorCode::kInvalidArgument, "forward: null batch");
        host_of(host_ctx).forward(hosted(m), *batch);
      });
    },
    // seq_length
    [](void*, const specd_model* m, uint64_t seq) -> int64_t { return cached_length(hosted(m), seq); },
    // truncate
    [](void*, specd_model* m, uint64_t seq, int64_t new_length, specd_error* err) {
      return call(err, [&] {
        Hosted& h = hosted(m);
        if (h.is_target)
          throw Error(ErrorCode::kInvalidArgument,
                      "truncate: the engine's target KV is rolled back by the engine's scheduler, not by plugins");
        const int64_t have = cached_length(h, seq);
        if (new_length < 0 || new_length > have)
          throw Error(ErrorCode::kInvalidArgument, "truncate: sequence " + std::to_string(seq) + " of " +
                                                       h.description + " has " + std::to_string(have) +
                                                       " tokens, cannot truncate to " + std::to_string(new_length));
        if (have > 0) h.kv->truncate(static_cast<kv::SeqId>(seq), static_cast<int32_t>(new_length));
      });
    },
    // drop_sequence
    [](void*, specd_model* m, uint64_t seq) {
      Hosted& h = hosted(m);
      if (h.kv != nullptr && !h.is_target) h.kv->remove_sequence(static_cast<kv::SeqId>(seq));
    },
};

ModelHost::ModelHost(std::shared_ptr<const model::LlamaWeights> target_weights, int32_t block_size, int64_t max_context,
                     std::string kv_dtype, tp::ModelFactory& models, model::Placement placement)
    : target_weights_(std::move(target_weights)),
      block_size_(block_size),
      max_context_(max_context),
      kv_dtype_(std::move(kv_dtype)),
      factory_(models),
      placement_(placement) {}

namespace {

// The weight dtype a load asks for: a specd_dtype, or -1 for `fallback`.
model::WeightDTypes requested_dtype(int32_t dtype, const model::WeightDTypes& fallback) {
  switch (dtype) {
    case -1:
      return fallback;
    case SPECD_DTYPE_F32:
      return model::DType::kF32;
    case SPECD_DTYPE_F16:
      return model::DType::kF16;
    case SPECD_DTYPE_BF16:
      return model::DType::kBF16;
    case SPECD_DTYPE_Q8_0:
      return model::DType::kQ8_0;
    case SPECD_DTYPE_Q4_0:
      return model::DType::kQ4_0;
    case SPECD_DTYPE_Q4_K:
      return model::DType::kQ4_K;
    case SPECD_DTYPE_Q5_K:
      return model::DType::kQ5_K;
    case SPECD_DTYPE_Q6_K:
      return model::DType::kQ6_K;
    case SPECD_DTYPE_Q3_K:
      return model::DType::kQ3_K;
    case SPECD_DTYPE_Q2_K:
      return model::DType::kQ2_K;
    default:
      break;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "model services load: dtype " + std::to_string(dtype) +
                  " is not a weight dtype (f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k, q3_k, q2_k or -1)");
}

int32_t specd_dtype_of(model::DType d) {
  switch (d) {
    case model::DType::kF32:
      return SPECD_DTYPE_F32;
    case model::DType::kF16:
      return SPECD_DTYPE_F16;
    case model::DType::kBF16:
      return SPECD_DTYPE_BF16;
    case model::DType::kQ8_0:
      return SPECD_DTYPE_Q8_0;
    case model::DType::kQ4_0:
      return SPECD_DTYPE_Q4_0;
    case model::DType::kQ4_K:
      return SPECD_DTYPE_Q4_K;
    case model::DType::kQ5_K:
      return SPECD_DTYPE_Q5_K;
    case model::DType::kQ6_K:
      return SPECD_DTYPE_Q6_K;
    case model::DType::kQ3_K:
      return SPECD_DTYPE_Q3_K;
    case model::DType::kQ2_K:
      return SPECD_DTYPE_Q2_K;
  }
  return -1;
}

}  // namespace

kv::KvCacheShape ModelHost::kv_shape(const Hosted& h) const {
  return h.model->kv_shape(block_size_, kv::resolve_kv_dtype(kv_dtype_, h.weights->dtype()));
}

ModelHost::~ModelHost() = default;

ModelHost::Hosted& ModelHost::add(std::unique_ptr<Hosted> h, const tp::HostedModelSpec& spec, bool all_ranks,
                                  const std::shared_ptr<const model::LlamaWeights>& mtp_base) {
  auto build = [&] {
    const model::TensorShard shard = all_ranks ? target_weights_->shard() : model::TensorShard{};
    h->weights = tp::load_hosted_weights(spec, target_weights_, mtp_base, shard);
    // Draft models, self-drafts, MTP modules and EAGLE-3 heads follow the target onto its device
    // runtime (what it runs: DeviceWeights::unsupported). A whole-target
    // handle (the draft_model plugin's, to read the target's info) stays on the CPU path: on a
    // GPU it would upload a second copy of the target.
    const bool target_copy = spec.path.empty() && spec.layers < 0 && spec.mtp_module < 0;
    const bool on_device =
        placement_.device_runtime() && !target_copy && model::DeviceWeights::unsupported(*h->weights).empty();
    h->own_model =
        std::make_unique<model::LlamaModel>(h->weights, spec.mtp_module >= 0 ? -1 : spec.layers,
                                            factory_.group(all_ranks), on_device ? placement_ : model::Placement{});
    h->own_model->set_context_length(max_context_);
  };
  h->tp_id = factory_.load(spec, all_ranks, build);
  factory_.attach(*h->own_model, h->tp_id);
  h->model = h->own_model.get();
  if (num_blocks_ > 0) set_kv(*h, num_blocks_);
  const model::Placement& where = h->model->placement();
  log::get("spec").info("model services: loaded {} ({} layers, {} weights, {} of {} ranks, {})", h->description,
                        h->model->num_layers(), kernels::dtype_name(h->weights->dtype()),
                        all_ranks ? target_weights_->shard().size : 1, target_weights_->shard().size,
                        where.device_runtime() ? "device runtime on " + std::string(kernels::device_name(where.device))
                                               : std::string("cpu path"));
  models_.push_back(std::move(h));
  return *models_.back();
}

void ModelHost::set_kv(Hosted& h, int32_t num_blocks) {
  factory_.allocate_kv(h.tp_id, kv_shape(h), num_blocks, [&]() -> kv::KvCache& {
    h.set_kv(kv_shape(h), num_blocks);
    // MTP modules take the target's hidden states, which a cached prefix does not have: the
    // engine turns caching off for them before they could be asked to cache.
    h.own_kv->set_prefix_caching(prefix_caching_, /*share=*/false);
    return *h.own_kv;
  });
}

ModelHost::Hosted& ModelHost::load(const specd_model_load_options& options) {
  const std::string path = options.path != nullptr ? options.path : "";
  const int64_t layers = options.num_layers > 0 ? options.num_layers : -1;
  auto h = std::make_unique<Hosted>();
  tp::HostedModelSpec spec;
  spec.path = path;
  spec.layers = layers;
  // A self-draft or the whole target defaults to the target's dtype; a draft checkpoint to its own.
  spec.dtype =
      requested_dtype(options.dtype, path.empty() ? target_weights_->requested_dtype() : model::WeightDTypes());
  if (path.empty()) {
    h->description = layers > 0 ? "self-draft (first " + std::to_string(layers) + " layers of the target)"
                                : std::string("target copy");
  } else {
    h->description = "draft " + path;
  }
  // The whole target is the target: it runs where the target runs. A draft runs at the
  // proposer's tensor-parallel size.
  const bool whole_target = path.empty() && layers < 0;
  const bool all_ranks = whole_target || factory_.proposer_size() == factory_.size();
  return add(std::move(h), spec, all_ranks, nullptr);
}

// target == nullptr: the engine's target, without loading a copy of it (and its KV cache).
ModelHost::Hosted& ModelHost::load_mtp(Hosted* target, int32_t module) {
  const auto& weights = target != nullptr ? target->weights : target_weights_;
  const std::string of = target != nullptr ? target->description : std::string("the target");
  SPECD_CHECK(!weights->is_mtp(), ErrorCode::kInvalidArgument, "load_mtp: " + of + " is itself an MTP module");
  // MTP modules share their base's (sharded) embeddings and LM head: they run where it runs.
  const bool all_ranks = target == nullptr || target->is_target || target->tp_id != tp::ModelFactory::kLocal;
  if (all_ranks && factory_.proposer_size() != factory_.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                "speculative.proposer.tensor_parallel_size = " + std::to_string(factory_.proposer_size()) +
                    ": MTP modules share the target's sharded embeddings and LM head and run at the target's "
                    "tensor_parallel_size (" +
                    std::to_string(factory_.size()) + "); leave it unset or set it to " +
                    std::to_string(factory_.size()));
  }
  auto h = std::make_unique<Hosted>();
  tp::HostedModelSpec spec;
  spec.mtp_module = module;
  spec.base = target == nullptr || target->is_target ? tp::ModelFactory::kTarget : target->tp_id;
  h->description = "MTP module " + std::to_string(module) + " of " + of;
  return add(std::move(h), spec, all_ranks, weights);
}

void ModelHost::release(Hosted* m) {
  factory_.release(m->tp_id);
  std::erase_if(models_, [m](const std::unique_ptr<Hosted>& p) { return p.get() == m; });
}

specd_model* ModelHost::bind_target(model::LlamaModel& model, kv::KvCache& kv) {
  target_ = std::make_unique<Hosted>();
  target_->description = "the engine's target";
  target_->weights = target_weights_;
  target_->model = &model;
  target_->kv = &kv;
  target_->is_target = true;
  return handle(*target_);
}

size_t ModelHost::hosted_bytes_per_block() const {
  size_t total = 0;
  for (const auto& m : models_) total += kv::bytes_per_block(kv_shape(*m));
  return total;
}

void ModelHost::allocate_kv(int32_t num_blocks) {
  num_blocks_ = num_blocks;
  for (auto& m : models_) set_kv(*m, num_blocks);
}

void ModelHost::truncate(kv::SeqId seq, int32_t max_len) {
  for (auto& m : models_)
    if (m->kv != nullptr && m->kv->has_sequence(seq) && m->kv->num_tokens(seq) > max_len) m->kv->truncate(seq, max_len);
}

void ModelHost::drop(kv::SeqId seq) {
  for (auto& m : models_)
    if (m->kv != nullptr) m->kv->remove_sequence(seq);
}

void ModelHost::set_prefix_caching(bool on) {
  prefix_caching_ = on;
  for (auto& m : models_)
    if (m->own_kv != nullptr) m->own_kv->set_prefix_caching(on, /*share=*/false);
}

void ModelHost::match_prefix(kv::SeqId seq, std::span<const int32_t> tokens, int32_t max_len) {
  for (auto& m : models_) {
    if (m->own_kv == nullptr || !m->own_kv->prefix_caching()) continue;
    m->own_kv->remove_sequence(seq);
    m->own_kv->add_sequence(seq);
    m->own_kv->match_prefix(seq, tokens, max_len);
  }
}

void ModelHost::publish(kv::SeqId seq, std::span<const int32_t> tokens) {
  for (auto& m : models_)
    if (m->own_kv != nullptr && m->own_kv->has_sequence(seq)) m->own_kv->publish(seq, tokens);
}

void ModelHost::fill_info(const Hosted* m, specd_model_info& out) const {
  const model::ModelConfig& c = m != nullptr ? m->weights->config() : target_weights_->config();
  out.struct_size = sizeof(out);
  out.vocab_size = static_cast<int32_t>(c.vocab_size);
  out.hidden_size = static_cast<int32_t>(c.hidden_size);
  out.num_layers = static_cast<int32_t>(m != nullptr ? m->model->num_layers() : c.num_layers);
  out.max_context = static_cast<int32_t>(max_context_);
  out.num_mtp_modules = m != nullptr && m->weights->is_mtp() ? 0 : static_cast<int32_t>(c.num_mtp_modules);
  out.device = {SPECD_DEVICE_CPU, 0};
  out.dtype = specd_dtype_of(m != nullptr ? m->weights->dtype() : target_weights_->dtype());
  const model::LlamaWeights& w = m != nullptr ? *m->weights : *target_weights_;
  out.kind = w.is_eagle3() ? SPECD_MODEL_EAGLE3 : w.is_mtp() ? SPECD_MODEL_MTP : SPECD_MODEL_CAUSAL_LM;
  out.input_hidden_width = w.is_eagle3() ? static_cast<int32_t>(w.eagle3_fc().cols) : 0;
  out.num_aux_layers = 0;
  if (w.is_eagle3())
    for (const int32_t l : c.eagle3->aux_layers)
      if (out.num_aux_layers < 4) out.aux_layers[out.num_aux_layers++] = l;
}

void ModelHost::forward(Hosted& m, const specd_forward_batch& b) {
  if (m.kv == nullptr)
    throw Error(ErrorCode::kInternal, "forward on " + m.description + " before its KV cache was sized");
  SPECD_CHECK(b.num_seqs > 0 && b.seq_ids != nullptr && b.num_new != nullptr && b.tokens != nullptr,
              ErrorCode::kInvalidArgument, "forward: incomplete batch");
  // Since 1.7: no logits buffer = no logits; every hidden state whatever all_logits says.
  SPECD_CHECK(b.logits != nullptr || b.all_logits == 0, ErrorCode::kInvalidArgument,
              "forward: all_logits = " + std::to_string(b.all_logits) + " without a logits buffer");
  const bool hidden_all =
      b.struct_size >= offsetof(specd_forward_batch, hidden_all) + sizeof(int32_t) && b.hidden_all != 0;
  SPECD_CHECK(!hidden_all || b.hidden != nullptr, ErrorCode::kInvalidArgument,
              "forward: hidden_all without a hidden buffer");
  const bool takes_hidden = m.weights->is_mtp() || m.weights->is_eagle3();
  if ((b.input_hidden != nullptr) != takes_hidden)
    throw Error(ErrorCode::kInvalidArgument,
                "forward on " + m.description +
                    (takes_hidden ? ": an MTP module or EAGLE-3 head needs input_hidden"
                                  : ": input_hidden is for MTP modules and EAGLE-3 heads only"));
  m.batch.seqs.resize(static_cast<size_t>(b.num_seqs));
  m.batch.return_hidden = b.hidden != nullptr;
  m.batch.hidden_all = hidden_all;
  // Rows of input_hidden pair with the tokens, in the same order (ModelHost passes them through).
  m.batch.input_hidden = b.input_hidden;
  m.batch.input_hidden_width =
      b.struct_size >= offsetof(specd_forward_batch, input_hidden_width) + sizeof(int32_t) ? b.input_hidden_width : 0;
  int64_t offset = 0, tree_offset = 0;
  const bool trees = b.struct_size >= offsetof(specd_forward_batch, tree_parents) + sizeof(int32_t*) &&
                     b.tree_sizes != nullptr && b.tree_parents != nullptr;
  for (int32_t i = 0; i < b.num_seqs; ++i) {
    const auto id = static_cast<kv::SeqId>(b.seq_ids[i]);
    const int32_t n = b.num_new[i];
    if (n < 1)
      throw Error(ErrorCode::kInvalidArgument, "forward: sequence " + std::to_string(b.seq_ids[i]) + " has num_new " +
                                                   std::to_string(n) + ", expected >= 1");
    // New tokens of this sequence in this call so far, this row included (rows continue each other).
    int32_t fed = n;
    for (int32_t e = 0; e < i; ++e)
      if (b.seq_ids[e] == b.seq_ids[i]) fed += b.num_new[e];
    if (m.is_target) {
      if (!m.kv->has_sequence(id) || m.kv->num_tokens(id) + fed > m.kv->capacity(id))
        throw Error(ErrorCode::kInvalidArgument, "forward on the engine's target: sequence " +
                                                     std::to_string(b.seq_ids[i]) + " has no room scheduled for " +
                                                     std::to_string(fed) + " new tokens");
    } else {
      if (!m.kv->has_sequence(id)) m.kv->add_sequence(id);
      if (m.kv->num_tokens(id) + fed > max_context_)
        throw Error(ErrorCode::kInvalidArgument, m.description + ": sequence " + std::to_string(b.seq_ids[i]) +
                                                     " would exceed the context length " +
                                                     std::to_string(max_context_));
      if (!m.kv->reserve(id, fed))
        throw Error(ErrorCode::kOutOfMemory,
                    m.description + ": KV cache out of blocks (" + std::to_string(m.kv->num_free_blocks()) + " free)");
    }
    auto& s = m.batch.seqs[static_cast<size_t>(i)];
    s.seq = id;
    s.tokens = {b.tokens + offset, static_cast<size_t>(n)};
    s.logits = b.logits == nullptr ? model::LogitsMode::kNone
               : b.all_logits != 0 ? model::LogitsMode::kAll
                                   : model::LogitsMode::kLast;
    s.tree = {};
    if (trees) {  // the model checks the parents and the region's size
      const int32_t m = b.tree_sizes[i];
      if (m < 0)
        throw Error(ErrorCode::kInvalidArgument, "forward: sequence " + std::to_string(b.seq_ids[i]) +
                                                     " has tree size " + std::to_string(m) + ", expected >= 0");
      s.tree = {b.tree_parents + tree_offset, static_cast<size_t>(m)};
      tree_offset += m;
    }
    offset += n;
  }
  m.model->forward(m.batch, *m.kv, m.out);
  if (b.logits != nullptr) std::memcpy(b.logits, m.out.logits.data(), m.out.logits.size() * sizeof(float));
  if (b.hidden != nullptr) std::memcpy(b.hidden, m.out.hidden.data(), m.out.hidden.size() * sizeof(float));
}

}  // namespace specd::speculative

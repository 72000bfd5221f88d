#include "convert.hpp"

#include <cmath>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "model/checkpoint.hpp"
#include "specd/error.hpp"
#include "specd/kernels/convert.hpp"
#include "specd/kernels/rope.hpp"

namespace specd::gguf {

namespace {

namespace fs = std::filesystem;
using model::Architecture;
using model::Checkpoint;
using model::ModelConfig;
using model::TensorView;

// llama_ftype values for general.file_type.
uint32_t file_type(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return 0;  // LLAMA_FTYPE_ALL_F32
    case TensorType::kF16:
      return 1;  // LLAMA_FTYPE_MOSTLY_F16
    case TensorType::kBF16:
      return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    case TensorType::kQ8_0:
      return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case TensorType::kQ4_0:
      return 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case TensorType::kQ2_K:
      return 10;  // LLAMA_FTYPE_MOSTLY_Q2_K
    case TensorType::kQ3_K:
      return 11;  // LLAMA_FTYPE_MOSTLY_Q3_K_S (every 2-D tensor Q3_K)
    case TensorType::kQ4_K:
      return 14;  // LLAMA_FTYPE_MOSTLY_Q4_K_S (every 2-D tensor Q4_K)
    case TensorType::kQ5_K:
      return 16;  // LLAMA_FTYPE_MOSTLY_Q5_K_S
    case TensorType::kQ6_K:
      return 18;  // LLAMA_FTYPE_MOSTLY_Q6_K
  }
  return 0;
}

bool quantized(TensorType type) {
  return type != TensorType::kF32 && type != TensorType::kF16 && type != TensorType::kBF16;
}

model::DType kernel_dtype(TensorType type) {
  switch (type) {
    case TensorType::kF32:
      return model::DType::kF32;
    case TensorType::kF16:
      return model::DType::kF16;
    case TensorType::kBF16:
      return model::DType::kBF16;
    case TensorType::kQ8_0:
      return model::DType::kQ8_0;
    case TensorType::kQ4_0:
      return model::DType::kQ4_0;
    case TensorType::kQ2_K:
      return model::DType::kQ2_K;
    case TensorType::kQ3_K:
      return model::DType::kQ3_K;
    case TensorType::kQ4_K:
      return model::DType::kQ4_K;
    case TensorType::kQ5_K:
      return model::DType::kQ5_K;
    case TensorType::kQ6_K:
      return model::DType::kQ6_K;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "specd-to-gguf writes f32, f16, bf16, q8_0, q4_0, q2_k, q3_k, q4_k, q5_k or q6_k tensors");
}

// Writes `t` row by row as `type`. permute_head_dim > 0 reorders the rows within each head
// (rope_source_row); 0 keeps the checkpoint's order.
// A permuted 1-D tensor (a Q/K bias) is permuted element by element: rows of one element.
// `add` is added to every value (Gemma's norm weights w become 1 + w, as llama.cpp's converter
// writes them).
void write_rows(std::ostream& out, const TensorView& t, TensorType type, int64_t permute_head_dim, float add = 0.0f) {
  const int64_t rows = t.shape.size() == 1 ? (permute_head_dim > 0 ? t.shape[0] : 1) : t.shape[0];
  const int64_t cols = t.numel() / rows;
  const size_t src_row_bytes = static_cast<size_t>(cols) * model::dtype_size(t.dtype);
  TensorView row = t;
  row.shape = {cols};
  row.nbytes = src_row_bytes;
  std::vector<float> values(static_cast<size_t>(cols));
  // Narrowed and quantized exactly as specd converts at load (kernels::from_f32).
  const model::DType dtype = kernel_dtype(type);
  std::vector<char> encoded(tensor_bytes(type, static_cast<uint64_t>(cols)));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t src = permute_head_dim > 0 ? rope_source_row(r, permute_head_dim) : r;
    row.data = t.data + static_cast<size_t>(src) * src_row_bytes;
    Checkpoint::to_f32(row, values.data());
    if (add != 0.0f)
      for (float& x : values) x += add;
    kernels::from_f32(kernels::Device::kCpu, values.data(), dtype, encoded.data(), cols);
    out.write(encoded.data(), static_cast<std::streamsize>(encoded.size()));
  }
}

// Queues the tensors of the GGUF file, checking every shape against the config. The
// checkpoint must outlive Writer::write(), which reads the tensors.
class TensorPlan {
 public:
  TensorPlan(Writer& writer, const Checkpoint& ckpt, TensorType type) : writer_(writer), ckpt_(ckpt), type_(type) {}

  // `hf` must have `shape` ([out, in] or [n]); 1-D tensors are written as F32, and with a
  // quantized type the embeddings and LM head (`head`) as F16, as specd quantizes at load.
  void add(const std::string& hf, const std::string& gguf, const std::vector<int64_t>& shape,
           int64_t permute_head_dim = 0, bool head = false) {
    const TensorView& t = ckpt_.require(hf, shape);
    const TensorType type = shape.size() == 1 ? TensorType::kF32 : head && quantized(type_) ? TensorType::kF16 : type_;
    writer_.add_tensor(gguf, std::vector<uint64_t>(shape.rbegin(), shape.rend()), type,
                       [&t, type, permute_head_dim](std::ostream& out) { write_rows(out, t, type, permute_head_dim); });
    ++added_;
  }

  // The router of a mixture-of-experts layer: [experts, hidden], kept in F32 (as llama.cpp's
  // converter keeps ffn_gate_inp: the routing decisions are sensitive to rounding).
  void add_f32(const std::string& hf, const std::string& gguf, const std::vector<int64_t>& shape) {
    const TensorView& t = ckpt_.require(hf, shape);
    writer_.add_tensor(gguf, std::vector<uint64_t>(shape.rbegin(), shape.rend()), TensorType::kF32,
                       [&t](std::ostream& out) { write_rows(out, t, TensorType::kF32, 0); });
    ++added_;
  }

  // One merged [experts, rows, cols] tensor from the per-expert tensors `hf[e]`, each [rows, cols].
  void add_merged(const std::vector<std::string>& hf, const std::string& gguf, int64_t rows, int64_t cols) {
    std::vector<const TensorView*> parts;
    for (const std::string& name : hf) parts.push_back(&ckpt_.require(name, {rows, cols}));
    const TensorType type = type_;
    writer_.add_tensor(gguf, {static_cast<uint64_t>(cols), static_cast<uint64_t>(rows), hf.size()}, type,
                       [parts, type](std::ostream& out) {
                         for (const TensorView* t : parts) write_rows(out, *t, type, 0);
                       });
    added_ += hf.size();
  }

  // A Gemma norm weight w ([n], F32) written as 1 + w.
  void add_gemma_norm(const std::string& hf, const std::string& gguf, int64_t n) {
    const TensorView& t = ckpt_.require(hf, {n});
    writer_.add_tensor(gguf, {static_cast<uint64_t>(n)}, TensorType::kF32,
                       [&t](std::ostream& out) { write_rows(out, t, TensorType::kF32, 0, 1.0f); });
    ++added_;
  }

  size_t added() const { return added_; }

 private:
  Writer& writer_;
  const Checkpoint& ckpt_;
  TensorType type_;
  size_t added_ = 0;
};

// A mixture-of-experts MLP as llama.cpp stores it: ffn_gate_inp and the merged ffn_*_exps.
void add_experts(TensorPlan& plan, const ModelConfig& c, const std::string& hf, const std::string& gg) {
  const bool mixtral = c.arch == Architecture::kMixtral;
  const std::string p = hf + (mixtral ? "block_sparse_moe." : "mlp.");
  const int64_t h = c.hidden_size, inter = c.moe->expert_intermediate;
  plan.add_f32(p + "gate.weight", gg + "ffn_gate_inp.weight", {c.moe->num_experts, h});
  const auto names = [&](const char* proj) {
    std::vector<std::string> out;
    for (int64_t e = 0; e < c.moe->num_experts; ++e)
      out.push_back(p + "experts." + std::to_string(e) + "." + proj + ".weight");
    return out;
  };
  plan.add_merged(names(mixtral ? "w1" : "gate_proj"), gg + "ffn_gate_exps.weight", inter, h);
  plan.add_merged(names(mixtral ? "w3" : "up_proj"), gg + "ffn_up_exps.weight", inter, h);
  plan.add_merged(names(mixtral ? "w2" : "down_proj"), gg + "ffn_down_exps.weight", h, inter);
}

// A Gemma block: norms written as 1 + w around both blocks, Gemma 3's q/k norms.
void add_gemma_layer(TensorPlan& plan, const ModelConfig& c, const std::string& hf, const std::string& gg) {
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  plan.add_gemma_norm(hf + "input_layernorm.weight", gg + "attn_norm.weight", h);
  plan.add(hf + "self_attn.q_proj.weight", gg + "attn_q.weight", {q, h});
  plan.add(hf + "self_attn.k_proj.weight", gg + "attn_k.weight", {kv, h});
  plan.add(hf + "self_attn.v_proj.weight", gg + "attn_v.weight", {kv, h});
  if (c.qk_norm) {
    plan.add_gemma_norm(hf + "self_attn.q_norm.weight", gg + "attn_q_norm.weight", c.head_dim);
    plan.add_gemma_norm(hf + "self_attn.k_norm.weight", gg + "attn_k_norm.weight", c.head_dim);
  }
  plan.add(hf + "self_attn.o_proj.weight", gg + "attn_output.weight", {h, q});
  plan.add_gemma_norm(hf + "post_attention_layernorm.weight", gg + "post_attention_norm.weight", h);
  plan.add_gemma_norm(hf + "pre_feedforward_layernorm.weight", gg + "ffn_norm.weight", h);
  plan.add(hf + "mlp.gate_proj.weight", gg + "ffn_gate.weight", {inter, h});
  plan.add(hf + "mlp.up_proj.weight", gg + "ffn_up.weight", {inter, h});
  plan.add(hf + "mlp.down_proj.weight", gg + "ffn_down.weight", {h, inter});
  plan.add_gemma_norm(hf + "post_feedforward_layernorm.weight", gg + "post_ffw_norm.weight", h);
}

void add_layer(TensorPlan& plan, const ModelConfig& c, int64_t i, bool permute_qk) {
  const std::string hf = "model.layers." + std::to_string(i) + ".";
  const std::string gg = "blk." + std::to_string(i) + ".";
  if (c.gemma) return add_gemma_layer(plan, c, hf, gg);
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t perm = permute_qk ? c.head_dim : 0;
  const bool phi3 = c.arch == Architecture::kPhi3;  // fused attn_qkv and ffn_up (gate, then up)
  plan.add(hf + "input_layernorm.weight", gg + "attn_norm.weight", {h});
  if (phi3) {
    plan.add(hf + "self_attn.qkv_proj.weight", gg + "attn_qkv.weight", {q + 2 * kv, h});
  } else {
    plan.add(hf + "self_attn.q_proj.weight", gg + "attn_q.weight", {q, h}, perm);
    plan.add(hf + "self_attn.k_proj.weight", gg + "attn_k.weight", {kv, h}, perm);
    plan.add(hf + "self_attn.v_proj.weight", gg + "attn_v.weight", {kv, h});
  }
  if (c.attention_bias) {
    plan.add(hf + "self_attn.q_proj.bias", gg + "attn_q.bias", {q}, perm);
    plan.add(hf + "self_attn.k_proj.bias", gg + "attn_k.bias", {kv}, perm);
    plan.add(hf + "self_attn.v_proj.bias", gg + "attn_v.bias", {kv});
  }
  if (c.qk_norm) {
    plan.add(hf + "self_attn.q_norm.weight", gg + "attn_q_norm.weight", {c.head_dim});
    plan.add(hf + "self_attn.k_norm.weight", gg + "attn_k_norm.weight", {c.head_dim});
  }
  plan.add(hf + "self_attn.o_proj.weight", gg + "attn_output.weight", {h, q});
  if (c.attention_out_bias) plan.add(hf + "self_attn.o_proj.bias", gg + "attn_output.bias", {h});
  plan.add(hf + "post_attention_layernorm.weight", gg + "ffn_norm.weight", {h});
  if (c.moe) {
    add_experts(plan, c, hf, gg);
    return;
  }
  if (phi3) {
    plan.add(hf + "mlp.gate_up_proj.weight", gg + "ffn_up.weight", {2 * inter, h});
    plan.add(hf + "mlp.down_proj.weight", gg + "ffn_down.weight", {h, inter});
    return;
  }
  plan.add(hf + "mlp.gate_proj.weight", gg + "ffn_gate.weight", {inter, h});
  plan.add(hf + "mlp.up_proj.weight", gg + "ffn_up.weight", {inter, h});
  plan.add(hf + "mlp.down_proj.weight", gg + "ffn_down.weight", {h, inter});
}

// rope_freqs.weight: llama.cpp divides each frequency by its factor, so factor = the unscaled
// inverse frequency over the Llama 3 scaled one (the same scaled values specd uses).
std::vector<float> llama3_rope_factors(const ModelConfig& c) {
  const model::RopeScaling& s = c.rope_scaling;
  kernels::RopeScalingParams scaled{kernels::RopeScalingParams::Kind::kLlama3, s.factor, s.low_freq_factor,
                                    s.high_freq_factor, static_cast<double>(s.original_max_position_embeddings)};
  const std::vector<float> base = kernels::rope_inv_freq(c.head_dim, c.rope_theta, {});
  const std::vector<float> inv = kernels::rope_inv_freq(c.head_dim, c.rope_theta, scaled);
  std::vector<float> factors(base.size());
  for (size_t i = 0; i < base.size(); ++i) factors[i] = base[i] / inv[i];
  return factors;
}

void add_hparams(Writer& w, const std::string& arch, const ModelConfig& c, int64_t layers) {
  const std::string p = arch + ".";
  w.set_u32(p + "context_length", static_cast<uint32_t>(c.max_position_embeddings));
  w.set_u32(p + "embedding_length", static_cast<uint32_t>(c.hidden_size));
  w.set_u32(p + "block_count", static_cast<uint32_t>(layers));
  w.set_u32(p + "feed_forward_length", static_cast<uint32_t>(c.intermediate_size));
  w.set_u32(p + "attention.head_count", static_cast<uint32_t>(c.num_heads));
  w.set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads));
  w.set_u32(p + "attention.key_length", static_cast<uint32_t>(c.head_dim));
  w.set_u32(p + "attention.value_length", static_cast<uint32_t>(c.head_dim));
  w.set_f32(p + "attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_norm_eps));
  w.set_f32(p + "rope.freq_base", static_cast<float>(c.rope_theta));
  w.set_u32(p + "rope.dimension_count", static_cast<uint32_t>(c.head_dim));
  w.set_u32(p + "vocab_size", static_cast<uint32_t>(c.vocab_size));
  if (c.sliding_window > 0) w.set_u32(p + "attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
  if (c.gemma) {
    if (c.gemma->attn_softcap > 0) w.set_f32(p + "attn_logit_softcapping", static_cast<float>(c.gemma->attn_softcap));
    if (c.gemma->final_softcap > 0)
      w.set_f32(p + "final_logit_softcapping", static_cast<float>(c.gemma->final_softcap));
  }
  if (c.moe) {
    w.set_u32(p + "expert_count", static_cast<uint32_t>(c.moe->num_experts));
    w.set_u32(p + "expert_used_count", static_cast<uint32_t>(c.moe->experts_per_token));
    if (c.arch == Architecture::kQwen3Moe)
      w.set_u32(p + "expert_feed_forward_length", static_cast<uint32_t>(c.moe->expert_intermediate));
  }
  if (c.rope_scaling.type == model::RopeScaling::Type::kLongRope) {
    w.set_f32(p + "rope.scaling.attn_factor", static_cast<float>(c.rope_scaling.attention_factor));
    w.set_u32(p + "rope.scaling.original_context_length",
              static_cast<uint32_t>(c.rope_scaling.original_max_position_embeddings));
  }
  if (c.rope_scaling.type == model::RopeScaling::Type::kLinear) {
    w.set_string(p + "rope.scaling.type", "linear");
    w.set_f32(p + "rope.scaling.factor", static_cast<float>(c.rope_scaling.factor));
  }
}

// llama.cpp fixes what Gemma's GGUF files do not say: the query scale (1 / sqrt(head_dim), the
// 27B models' hidden / heads), the sliding pattern and Gemma 3's local RoPE base. A checkpoint
// that differs would run differently there: refused.
void check_gemma_has_gguf_form(const ModelConfig& c) {
  const bool gemma2 = c.arch == Architecture::kGemma2;
  const bool big = c.num_layers == (gemma2 ? 46 : 62);
  const double scale = 1.0 / std::sqrt(static_cast<double>(big ? c.hidden_size / c.num_heads : c.head_dim));
  bool pattern = true;
  for (int64_t i = 0; i < c.num_layers; ++i)
    pattern = pattern && (c.layer_window(i) > 0) == (gemma2 ? i % 2 == 0 : (i + 1) % 6 != 0);
  std::string why;
  if (std::abs(c.gemma->query_scale - scale) > 1e-9 * scale) why = "query_pre_attn_scalar is not llama.cpp's";
  if (!pattern) why = "the sliding layers are not llama.cpp's pattern";
  if (!gemma2 && c.gemma->rope_local_theta != 10000.0) why = "rope_local_base_freq is not 10000";
  if (!why.empty())
    throw Error(ErrorCode::kUnsupported, c.config_path.string() + ": " + why + ", which a " +
                                             (gemma2 ? "gemma2" : "gemma3") + " GGUF file cannot say");
}

}  // namespace

int64_t rope_source_row(int64_t row, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  const int64_t within = row % head_dim;
  return row - within + (within % 2) * half + within / 2;
}

ConvertSummary convert_checkpoint(const fs::path& model_dir, const fs::path& out_file, const ConvertOptions& options) {
  const std::unique_ptr<Checkpoint> ckpt = Checkpoint::open(model_dir);
  const ModelConfig& c = ckpt->config();
  ConvertSummary summary;
  summary.architecture = c.arch == Architecture::kQwen2      ? "qwen2"
                         : c.arch == Architecture::kQwen3    ? "qwen3"
                         : c.arch == Architecture::kQwen3Moe ? "qwen3moe"
                         : c.arch == Architecture::kPhi3     ? "phi3"
                         : c.arch == Architecture::kGemma2   ? "gemma2"
                         : c.arch == Architecture::kGemma3   ? "gemma3"
                                                             : "llama";  // llama, mistral, mixtral
  if (c.gemma) check_gemma_has_gguf_form(c);
  if (c.sliding_window > 0 && summary.architecture == "llama")
    throw Error(ErrorCode::kUnsupported, c.config_path.string() + ": sliding_window " +
                                             std::to_string(c.sliding_window) +
                                             " has no GGUF form in llama.cpp's llama architecture (it would run "
                                             "without the window)");
  if (c.moe && !c.moe->norm_topk_prob)
    throw Error(ErrorCode::kUnsupported, c.config_path.string() +
                                             ": norm_topk_prob false has no GGUF form (llama.cpp renormalizes the "
                                             "top-k expert weights of qwen3moe)");
  const bool llama_arch = summary.architecture == "llama";
  if (options.layers < 0 || options.layers > c.num_layers) {
    throw Error(ErrorCode::kInvalidArgument, "--layers " + std::to_string(options.layers) + ": " + model_dir.string() +
                                                 " has " + std::to_string(c.num_layers) + " layers");
  }
  if (c.rope_scaling.type == model::RopeScaling::Type::kLlama3 && !llama_arch) {
    throw Error(ErrorCode::kUnsupported, c.config_path.string() + ": rope_scaling llama3 on " +
                                             std::string(model::architecture_name(c.arch)) + " has no GGUF form");
  }
  summary.layers = options.layers == 0 ? c.num_layers : options.layers;
  summary.vocab = c.vocab_size;

  Writer w;
  w.set_string("general.architecture", summary.architecture);
  fs::path dir = fs::absolute(model_dir).lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // "models/llama-160m/"
  w.set_string("general.name", options.name.empty() ? dir.filename().string() : options.name);
  w.set_u32("general.file_type", file_type(options.type));
  add_hparams(w, summary.architecture, c, summary.layers);
  summary.tokenizer_model = add_vocab(w, model_dir, c.vocab_size);

  TensorPlan plan(w, *ckpt, options.type);
  const int64_t h = c.hidden_size, v = c.vocab_size;
  plan.add("model.embed_tokens.weight", "token_embd.weight", {v, h}, 0, true);
  auto add_factors = [&w](const std::string& name, std::vector<float> values) {
    auto factors = std::make_shared<std::vector<float>>(std::move(values));
    w.add_tensor(name, {factors->size()}, TensorType::kF32, [factors](std::ostream& out) {
      out.write(reinterpret_cast<const char*>(factors->data()), static_cast<std::streamsize>(factors->size() * 4));
    });
  };
  if (c.rope_scaling.type == model::RopeScaling::Type::kLlama3)
    add_factors("rope_freqs.weight", llama3_rope_factors(c));
  if (c.rope_scaling.type == model::RopeScaling::Type::kLongRope) {  // phi3, as llama.cpp's converter
    add_factors("rope_factors_long.weight", c.rope_scaling.long_factor);
    add_factors("rope_factors_short.weight", c.rope_scaling.short_factor);
  }
  for (int64_t i = 0; i < summary.layers; ++i) add_layer(plan, c, i, llama_arch);
  if (c.gemma) {
    plan.add_gemma_norm("model.norm.weight", "output_norm.weight", h);
  } else {
    plan.add("model.norm.weight", "output_norm.weight", {h});
  }
  // Tied embeddings: llama.cpp uses token_embd.weight when output.weight is absent.
  if (!c.tie_word_embeddings || ckpt->find("lm_head.weight") != nullptr)
    plan.add("lm_head.weight", "output.weight", {v, h}, 0, true);

  w.write(out_file);
  summary.tensors = w.tensor_count();
  summary.skipped_tensors = ckpt->tensor_names().size() - plan.added();
  summary.file_bytes = fs::file_size(out_file);
  return summary;
}

}  // namespace specd::gguf

// Checkpoints on disk, memory-mapped: a Hugging Face directory (config.json + model.safetensors
// or a sharded model.safetensors.index.json + shards) or a GGUF file (gguf.hpp), recognised by
// content. A GGUF file is presented under the Hugging Face tensor names and config fields
// (gguf_checkpoint.cpp), so the layers above read both alike. This layer only reads and
// validates; building a runnable model from it is model/llama.* .
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "specd/kernels/dtype.hpp"

namespace specd::model {

// Element types and conversions live with the kernels (specd/kernels/dtype.hpp); checkpoint
// tensors use the same enum so that quantized tensors can be used in place.
using kernels::bf16_to_f32;
using kernels::DType;
using kernels::dtype_name;
using kernels::f16_to_f32;
using kernels::f32_to_bf16;
using kernels::f32_to_f16;
using kernels::parse_dtype;
// Bytes of one element of an unquantized dtype (f32, f16, bf16); throws kInternal otherwise.
size_t dtype_size(DType dtype);

enum class Architecture { kLlama, kMistral, kQwen2, kQwen3, kQwen3Moe, kMixtral, kPhi3, kGemma2, kGemma3 };
std::string_view architecture_name(Architecture arch);  // the HF class name

struct RopeScaling {
  // kLongRope (Phi-3-*-128k, Phi-3.5): frequency i divided by short_factor[i] or long_factor[i]
  // and cos/sin scaled by attention_factor; which factors, LlamaModel::set_context_length says.
  enum class Type { kNone, kLlama3, kLinear, kLongRope };
  Type type = Type::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
  std::vector<float> short_factor = {}, long_factor = {};  // [head_dim / 2] each (kLongRope)
  double attention_factor = 1.0;                           // (kLongRope)
};

// Parsed config.json, normalized: head_dim and num_kv_heads always filled in.
struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int64_t max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections have biases (Qwen2)
  // o_proj has a bias too: Llama's `attention_bias` puts biases on q/k/v *and* o_proj, while
  // Qwen2 has them on q/k/v only.
  bool attention_out_bias = false;
  // Qwen3: per-head RMSNorm of q and k (self_attn.q_norm / k_norm, [head_dim]) before RoPE.
  bool qk_norm = false;
  // GGUF `llama` files store the Q/K projection rows (and biases) of each head in llama.cpp's
  // interleaved RoPE order: row 2i + j holds rotate-half row j * head_dim / 2 + i. The forward
  // reorders the projected q/k values back, so the tensors are used in place and the math is
  // the safetensors path's exactly.
  bool qk_rows_interleaved = false;
  // GGUF rope_freqs.weight (Llama 3 rope scaling as llama.cpp stores it): frequency i is
  // divided by factor i. Empty: none.
  std::vector<float> rope_freq_factors;
  int64_t num_mtp_modules = 0;  // DeepSeek-V3-style MTP modules present as mtp.* tensors
  // Sliding-window attention (Mistral, Phi-3, Gemma's local layers): attention in a sliding
  // layer sees only the last `sliding_window` positions, the token's own included (0: none).
  // Which layers slide: one flag per layer in `sliding_layers` (Gemma's layer_types); else every
  // layer but those with (layer + 1) % sliding_period == 0 (Gemma 2: period 2, the even layers
  // slide; Gemma 3: period 6); period 0: every layer (Mistral, Phi-3).
  int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;
  int64_t sliding_period = 0;
  int32_t layer_window(int64_t layer) const {
    if (sliding_window <= 0) return 0;
    if (!sliding_layers.empty())
      return sliding_layers[static_cast<size_t>(layer)] ? static_cast<int32_t>(sliding_window) : 0;
    if (sliding_period > 0 && (layer + 1) % sliding_period == 0) return 0;
    return static_cast<int32_t>(sliding_window);
  }
  // Gemma 2 and 3 (docs/model-formats.md "Gemma"): embeddings scaled by sqrt(hidden), a
  // GELU-tanh gated MLP, norms around both blocks (post_attention_layernorm and
  // post_feedforward_layernorm normalize the blocks' outputs before the residual add) whose
  // weights w act as (1 + w) (the loader stores 1 + w; GGUF files already hold it), attention
  // scaled by query_pre_attn_scalar^-0.5, and interleaved sliding-window layers.
  struct Gemma {
    double attn_softcap = 0;      // attn_logit_softcapping (Gemma 2; 0: none)
    double final_softcap = 0;     // final_logit_softcapping (Gemma 2; 0: none)
    double query_scale = 0;       // the attention scale, query_pre_attn_scalar^-0.5
    double rope_local_theta = 0;  // Gemma 3: the sliding layers' RoPE base, unscaled (0: as the others)
  };
  std::optional<Gemma> gemma;
  // Gemma3ForConditionalGeneration (the multimodal Gemma 3 checkpoints, 4B and up): config.json's
  // text_config describes the language model, whose tensors are read under their Gemma3ForCausalLM
  // names (language_model.model.* / model.language_model.* -> model.*); the vision tower and the
  // projector are not loaded.
  bool multimodal_text = false;
  // Mixture-of-experts MLPs (Qwen3-MoE, Mixtral; docs/model-formats.md "Mixture of experts"):
  // every layer's MLP is `num_experts` SwiGLU experts of width `expert_intermediate` and a router
  // [num_experts, hidden]; each token goes through the `experts_per_token` experts of highest
  // softmax(router) probability, their outputs weighted by those probabilities (renormalized to
  // sum 1 when `norm_topk_prob`). Absent: dense MLPs of width intermediate_size.
  struct Moe {
    int64_t num_experts = 0;
    int64_t experts_per_token = 0;
    int64_t expert_intermediate = 0;
    bool norm_topk_prob = true;
  };
  std::optional<Moe> moe;
  // The width of one MLP (an expert's for MoE models).
  int64_t mlp_width() const { return moe ? moe->expert_intermediate : intermediate_size; }
  // An EAGLE-3 draft head (architectures LlamaForCausalLMEagle3; docs/model-formats.md): one
  // decoder layer `midlayer.*` whose attention reads [input_layernorm(embed) | hidden_norm(g)],
  // the fusion `fc` of the target's auxiliary hidden states, and an LM head over a reduced draft
  // vocabulary mapped to target ids by `d2t`. Not a model of its own: LlamaWeights::load refuses
  // it; LlamaWeights::load_eagle3 builds it for a target.
  struct Eagle3 {
    int64_t draft_vocab_size = 0;    // rows of lm_head (vocab_size when absent)
    int64_t target_hidden_size = 0;  // width of each fused target state (hidden_size when absent)
    // The target layers it was trained on, in specd's convention (abi.h aux_hidden_layers: the
    // stream entering layer l): the top-level `eagle_aux_hidden_state_layer_ids` as is (vLLM),
    // `eagle_config.eagle_aux_hidden_state_layer_ids` + 1 (SGLang / SpecForge count outputs).
    // Empty: the public default, layers 2, L / 2 and L - 3 of the target.
    std::vector<int32_t> aux_layers;
  };
  std::optional<Eagle3> eagle3;
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;  // config.json, overridden by generation_config.json
  std::string torch_dtype;             // as declared ("float32", "bfloat16", ...); empty for GGUF
  // generation_config.json's sampling defaults: what a request that omits the field gets (vLLM).
  std::optional<double> default_temperature, default_top_p, default_min_p, default_repetition_penalty;
  std::optional<int64_t> default_top_k, default_max_tokens;
  std::filesystem::path config_path;  // the config.json (or GGUF file) this was read from (for messages)
};

// Parses config.json (+ generation_config.json beside it when present). Throws specd::Error
// (kModelFormat / kUnsupported) naming the file and the field.
ModelConfig read_model_config(const std::filesystem::path& model_dir);

// One tensor of a checkpoint, viewed in place in the memory map. `data` is aligned to the
// dtype's size when the writer aligned it (every current safetensors writer, specd-fixture and
// GGUF's 32-byte alignment do); Checkpoint::to_f32 copies safely either way.
struct TensorView {
  std::string name;
  // The dtype the tensor is computed in. Stored in it unless `converted_from` is set.
  DType dtype;
  // A GGUF block type the kernels do not read (gguf_quants.hpp): the bytes are in that ggml
  // type and are dequantized at load to `dtype`, their nearest kernel dtype.
  std::optional<uint32_t> converted_from;
  // An integer tensor (safetensors I64 / BOOL, e.g. an EAGLE-3 head's d2t / t2d): no float
  // dtype; read with Checkpoint::require_i64, refused by require().
  enum class Integer : uint8_t { kNone, kI64, kBool };
  Integer integer = Integer::kNone;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // valid while the Checkpoint lives
  size_t nbytes = 0;
  std::filesystem::path file;  // for error messages
  int64_t numel() const;
  bool in_place() const { return !converted_from.has_value(); }  // stored as `dtype`
};

namespace gguf {
class File;
}

class Checkpoint {
 public:
  // Opens a model directory or a GGUF file (told apart by content: a regular file starting
  // with the GGUF magic). A directory: reads config.json, maps model.safetensors or every
  // shard listed in model.safetensors.index.json, and indexes all tensors. A GGUF file: maps
  // it and maps its metadata and tensors to the names above (docs/model-formats.md). Throws
  // specd::Error naming the file on: missing files, truncated or corrupt header, offsets past
  // the end of the file, unsupported dtypes, unsupported architecture.
  static std::unique_ptr<Checkpoint> open(const std::filesystem::path& path);
  ~Checkpoint();

  // The path it was opened from: the model directory or the GGUF file.
  const std::filesystem::path& dir() const { return dir_; }
  bool is_gguf() const { return gguf_ != nullptr; }
  const ModelConfig& config() const { return config_; }
  const TensorView* find(std::string_view name) const;
  // The tensor, checked to have exactly `shape`; throws naming the tensor, file, expected and
  // actual shape (or "missing tensor <name> in <dir>").
  const TensorView& require(std::string_view name, const std::vector<int64_t>& shape) const;
  // An I64 tensor of exactly `shape`, copied out; throws like require(), and for another dtype.
  std::vector<int64_t> require_i64(std::string_view name, const std::vector<int64_t>& shape) const;
  std::vector<std::string> tensor_names() const;

  // Copies a tensor to F32 (F16/BF16 widened exactly, quantized types dequantized).
  static void to_f32(const TensorView& t, float* out);
  // The n elements of `t` stored at `src` (inside t.data; n whole blocks) to F32.
  static void to_f32(const TensorView& t, const std::byte* src, float* out, int64_t n);

 private:
  Checkpoint();
  static std::unique_ptr<Checkpoint> open_dir(const std::filesystem::path& model_dir);
  static std::unique_ptr<Checkpoint> open_gguf(const std::filesystem::path& file);  // gguf_checkpoint.cpp
  // Whether a tensor of the last layer the config declares exists: the loader sizes its layer
  // table from the declared count, so an untrusted count is checked against the weights first.
  bool holds_last_layer() const;
  // Gemma3ForConditionalGeneration (ModelConfig::multimodal_text): the language model's tensors
  // under their Gemma3ForCausalLM names; the rest dropped.
  void keep_language_model();
  struct Mapping;
  std::filesystem::path dir_;
  ModelConfig config_;
  std::vector<std::unique_ptr<Mapping>> mappings_;
  std::map<std::string, TensorView, std::less<>> tensors_;
  std::shared_ptr<const gguf::File> gguf_;  // keeps a GGUF file's map alive
};

}  // namespace specd::model

// Hugging Face checkpoints on disk: config.json + model.safetensors (or a sharded
// model.safetensors.index.json + shards), memory-mapped. This layer only reads and validates;
// building a runnable model from it is model/llama.* .
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
using kernels::DType;
using kernels::bf16_to_f32;
using kernels::dtype_name;
using kernels::f16_to_f32;
using kernels::f32_to_bf16;
using kernels::f32_to_f16;
using kernels::parse_dtype;
// Bytes of one element of an unquantized dtype (f32, f16, bf16); throws kInternal otherwise.
size_t dtype_size(DType dtype);

enum class Architecture { kLlama, kMistral, kQwen2 };
std::string_view architecture_name(Architecture arch);  // the HF class name

struct RopeScaling {
  enum class Type { kNone, kLlama3, kLinear };
  Type type = Type::kNone;
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
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
  int64_t num_mtp_modules = 0;  // DeepSeek-V3-style MTP modules present as mtp.* tensors
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;  // config.json, overridden by generation_config.json
  std::string torch_dtype;             // as declared ("float32", "bfloat16", ...)
  // generation_config.json's sampling defaults: what a request that omits the field gets (vLLM).
  std::optional<double> default_temperature, default_top_p, default_min_p, default_repetition_penalty;
  std::optional<int64_t> default_top_k, default_max_tokens;
  std::filesystem::path config_path;   // the config.json this was read from (for messages)
};

// Parses config.json (+ generation_config.json beside it when present). Throws specd::Error
// (kModelFormat / kUnsupported) naming the file and the field.
ModelConfig read_model_config(const std::filesystem::path& model_dir);

// One tensor in a safetensors file, viewed in place in the memory map. `data` is aligned to
// the dtype's size when the writer aligned it (every current safetensors writer and
// specd-fixture do); Checkpoint::to_f32 copies safely either way.
struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // valid while the Checkpoint lives
  size_t nbytes = 0;
  std::filesystem::path file;       // for error messages
  int64_t numel() const;
};

class Checkpoint {
 public:
  // Opens a model directory: reads config.json, maps model.safetensors or every shard listed
  // in model.safetensors.index.json, and indexes all tensors. Throws specd::Error naming the
  // file on: missing files, truncated or corrupt header, offsets past the end of the file,
  // unsupported dtypes, unsupported architecture.
  static std::unique_ptr<Checkpoint> open(const std::filesystem::path& model_dir);
  ~Checkpoint();

  const std::filesystem::path& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  const TensorView* find(std::string_view name) const;
  // The tensor, checked to have exactly `shape`; throws naming the tensor, file, expected and
  // actual shape (or "missing tensor <name> in <dir>").
  const TensorView& require(std::string_view name, const std::vector<int64_t>& shape) const;
  std::vector<std::string> tensor_names() const;

  // Copies a tensor to F32 (F16/BF16 widened exactly).
  static void to_f32(const TensorView& t, float* out);

 private:
  Checkpoint() = default;
  struct Mapping;
  std::filesystem::path dir_;
  ModelConfig config_;
  std::vector<std::unique_ptr<Mapping>> mappings_;
  std::map<std::string, TensorView, std::less<>> tensors_;
};

}  // namespace specd::model

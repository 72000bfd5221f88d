#include "model/checkpoint.hpp"

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "common/untrusted.hpp"
#include "model/gguf.hpp"
#include "model/gguf_quants.hpp"
#include "model/json_file.hpp"
#include "model/mapped_file.hpp"
#include "model/safetensors.hpp"
#include "specd/error.hpp"
#include "specd/kernels/convert.hpp"

namespace specd::model {

struct Checkpoint::Mapping {
  explicit Mapping(MappedFile f) : file(std::move(f)) {}
  MappedFile file;
};

namespace {

using nlohmann::json;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

[[noreturn]] void fail(ErrorCode code, const std::filesystem::path& file, const std::string& what) {
  throw Error(code, file.string() + ": " + what);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// model.safetensors.index.json -> tensor name -> shard file name (relative to the directory).
std::map<std::string, std::string> read_weight_map(const std::filesystem::path& index_path) {
  json doc = read_json_file(index_path, kMaxIndexJsonBytes);
  if (!doc.contains("weight_map") || !doc["weight_map"].is_object()) {
    fail(ErrorCode::kModelFormat, index_path, "missing object 'weight_map'");
  }
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, shard] : doc["weight_map"].items()) {
    if (!shard.is_string()) {
      fail(ErrorCode::kModelFormat, index_path, "weight_map['" + clip(name) + "'] is not a string");
    }
    const std::string file = shard.get<std::string>();
    const std::filesystem::path rel(file);
    // Shards live beside the index; refuse paths that leave the model directory.
    if (file.empty() || rel.is_absolute() || rel.has_parent_path() || file == "." || file == "..") {
      fail(ErrorCode::kModelFormat, index_path,
           "weight_map['" + clip(name) + "'] names shard '" + clip(file) +
               "', which is not a file name in the model directory");
    }
    weight_map.emplace(name, file);
  }
  if (weight_map.empty()) fail(ErrorCode::kModelFormat, index_path, "weight_map is empty");
  return weight_map;
}

}  // namespace

Checkpoint::Checkpoint() = default;
Checkpoint::~Checkpoint() = default;

std::unique_ptr<Checkpoint> Checkpoint::open(const std::filesystem::path& path) {
  if (gguf::is_gguf_file(path)) return open_gguf(path);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return open_dir(path);
  if (std::filesystem::exists(path, ec)) {
    throw Error(ErrorCode::kModelFormat, path.string() +
                                             " is neither a model directory nor a GGUF file (it does not start "
                                             "with the GGUF magic)");
  }
  throw Error(ErrorCode::kNotFound, "model directory or GGUF file " + path.string() + " does not exist");
}

std::unique_ptr<Checkpoint> Checkpoint::open_dir(const std::filesystem::path& model_dir) {
  std::unique_ptr<Checkpoint> ckpt(new Checkpoint());
  ckpt->dir_ = model_dir;
  ckpt->config_ = read_model_config(model_dir);

  auto add_file = [&](const std::filesystem::path& path) {
    ckpt->mappings_.push_back(std::make_unique<Mapping>(MappedFile::open(path)));
    const MappedFile& file = ckpt->mappings_.back()->file;
    for (TensorView& view : parse_safetensors(file.data(), file.size(), path)) {
      std::string name = view.name;
      auto [it, inserted] = ckpt->tensors_.emplace(std::move(name), std::move(view));
      if (!inserted) {
        fail(ErrorCode::kModelFormat, path, "tensor '" + it->first + "' is also in " + it->second.file.string());
      }
    }
  };

  const std::filesystem::path single = model_dir / kSingleFile;
  const std::filesystem::path index = model_dir / kIndexFile;
  if (std::filesystem::exists(single)) {
    add_file(single);
  } else if (std::filesystem::exists(index)) {
    const std::map<std::string, std::string> weight_map = read_weight_map(index);
    std::set<std::string> shards;
    for (const auto& [name, shard] : weight_map) shards.insert(shard);
    for (const std::string& shard : shards) {
      const std::filesystem::path path = model_dir / shard;
      if (!std::filesystem::exists(path)) {
        fail(ErrorCode::kNotFound, index, "shard " + shard + " does not exist (" + path.string() + ")");
      }
      add_file(path);
    }
    for (const auto& [name, shard] : weight_map) {
      auto it = ckpt->tensors_.find(name);
      if (it == ckpt->tensors_.end() || it->second.file.filename() != shard) {
        fail(ErrorCode::kModelFormat, index,
             "weight_map puts tensor '" + clip(name) + "' in " + clip(shard) + ", which does not contain it");
      }
    }
  } else {
    throw Error(ErrorCode::kNotFound,
                "no " + std::string(kSingleFile) + " or " + kIndexFile + " in " + model_dir.string());
  }

  if (ckpt->config_.multimodal_text) ckpt->keep_language_model();

  // MTP modules: tensors mtp.<i>.*, numbered 0..M-1.
  std::set<int64_t> mtp;
  for (const auto& [name, view] : ckpt->tensors_) {
    if (name.rfind("mtp.", 0) != 0) continue;
    const size_t dot = name.find('.', 4);
    const std::string digits = name.substr(4, dot == std::string::npos ? std::string::npos : dot - 4);
    if (digits.empty() || digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) {
      fail(ErrorCode::kModelFormat, view.file, "tensor '" + clip(name) + "' is not named mtp.<index>.<...>");
    }
    mtp.insert(std::stoll(digits));
  }
  if (!mtp.empty()) {
    const auto count = static_cast<int64_t>(mtp.size());
    if (*mtp.rbegin() != count - 1) {
      fail(ErrorCode::kModelFormat, model_dir,
           "mtp.<i> module indices are not numbered 0.." + std::to_string(count - 1) + " (highest is " +
               std::to_string(*mtp.rbegin()) + ")");
    }
    if (ckpt->config_.num_mtp_modules != 0 && ckpt->config_.num_mtp_modules != count) {
      fail(ErrorCode::kModelFormat, ckpt->config_.config_path,
           "num_nextn_predict_layers is " + std::to_string(ckpt->config_.num_mtp_modules) + " but the weights hold " +
               std::to_string(count) + " mtp modules");
    }
    ckpt->config_.num_mtp_modules = count;
  }
  // Sizes from config.json that nothing else checks against the weights before allocating:
  // the layer count (the loader sizes its layer table from it).
  if (ckpt->config_.eagle3 && ckpt->find("midlayer.self_attn.q_proj.weight") == nullptr) {
    fail(ErrorCode::kModelFormat, ckpt->config_.config_path,
         "an EAGLE-3 head (LlamaForCausalLMEagle3) but the weights in " + model_dir.string() +
             " hold no midlayer.self_attn.q_proj.weight (its one decoder layer)");
  }
  if (!ckpt->config_.eagle3 && !ckpt->holds_last_layer()) {
    fail(ErrorCode::kModelFormat, ckpt->config_.config_path,
         "num_hidden_layers is " + std::to_string(ckpt->config_.num_layers) + " but the weights in " +
             model_dir.string() + " hold no tensor model.layers." + std::to_string(ckpt->config_.num_layers - 1) +
             ".*");
  }

  return ckpt;
}

void Checkpoint::keep_language_model() {
  // transformers wrote language_model.model.* (before 4.52) or model.language_model.*; the LM head
  // is language_model.lm_head.* or lm_head.*.
  constexpr std::pair<std::string_view, std::string_view> kPrefixes[] = {{"language_model.model.", "model."},
                                                                         {"model.language_model.", "model."},
                                                                         {"language_model.lm_head.", "lm_head."},
                                                                         {"lm_head.", "lm_head."}};
  std::map<std::string, TensorView, std::less<>> kept;
  for (auto& [name, view] : tensors_) {
    for (const auto& [from, to] : kPrefixes) {
      if (!name.starts_with(from)) continue;
      std::string renamed(to);
      renamed += std::string_view(name).substr(from.size());
      view.name = renamed;
      if (!kept.emplace(renamed, view).second)
        fail(ErrorCode::kModelFormat, view.file, "tensor '" + clip(renamed) + "' appears under two names");
      break;
    }  // anything else (vision_tower.*, multi_modal_projector.*) is not loaded
  }
  tensors_ = std::move(kept);
}

bool Checkpoint::holds_last_layer() const {
  const std::string prefix = "model.layers." + std::to_string(config_.num_layers - 1) + ".";
  const auto it = tensors_.lower_bound(prefix);
  return it != tensors_.end() && it->first.rfind(prefix, 0) == 0;
}

const TensorView* Checkpoint::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const TensorView& Checkpoint::require(std::string_view name, const std::vector<int64_t>& shape) const {
  const TensorView* view = find(name);
  if (view == nullptr) {
    throw Error(ErrorCode::kModelFormat, "missing tensor " + std::string(name) + " in " + dir_.string());
  }
  if (view->shape != shape) {
    fail(ErrorCode::kModelFormat, view->file,
         "tensor " + view->name + " has shape " + shape_text(view->shape) + ", expected " + shape_text(shape));
  }
  if (view->integer != TensorView::Integer::kNone)
    fail(ErrorCode::kModelFormat, view->file, "tensor " + view->name + " holds integers, expected floats");
  return *view;
}

std::vector<int64_t> Checkpoint::require_i64(std::string_view name, const std::vector<int64_t>& shape) const {
  const TensorView* view = find(name);
  if (view == nullptr)
    throw Error(ErrorCode::kModelFormat, "missing tensor " + std::string(name) + " in " + dir_.string());
  if (view->shape != shape)
    fail(ErrorCode::kModelFormat, view->file,
         "tensor " + view->name + " has shape " + shape_text(view->shape) + ", expected " + shape_text(shape));
  if (view->integer != TensorView::Integer::kI64)
    fail(ErrorCode::kModelFormat, view->file, "tensor " + view->name + " must hold I64 integers");
  std::vector<int64_t> out(static_cast<size_t>(view->numel()));
  std::memcpy(out.data(), view->data, out.size() * sizeof(int64_t));
  return out;
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, view] : tensors_) names.push_back(name);
  return names;
}

void Checkpoint::to_f32(const TensorView& t, float* out) {
  to_f32(t, t.data, out, t.numel());
}

void Checkpoint::to_f32(const TensorView& t, const std::byte* src, float* out, int64_t n) {
  if (t.converted_from) {
    gguf::dequantize(*t.converted_from, src, out, n);
  } else {
    kernels::to_f32(kernels::Device::kCpu, t.dtype, src, out, n);
  }
}

}  // namespace specd::model

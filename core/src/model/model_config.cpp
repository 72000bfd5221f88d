// config.json (+ generation_config.json) -> ModelConfig, for the Llama family.
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <string>

#include "common/untrusted.hpp"
#include "model/checkpoint.hpp"
#include "model/config_fields.hpp"
#include "model/json_file.hpp"
#include "specd/error.hpp"

namespace specd::model {

std::string_view architecture_name(Architecture arch) {
  switch (arch) {
    case Architecture::kLlama:
      return "LlamaForCausalLM";
    case Architecture::kMistral:
      return "MistralForCausalLM";
    case Architecture::kQwen2:
      return "Qwen2ForCausalLM";
    case Architecture::kQwen3:
      return "Qwen3ForCausalLM";
    case Architecture::kQwen3Moe:
      return "Qwen3MoeForCausalLM";
    case Architecture::kMixtral:
      return "MixtralForCausalLM";
    case Architecture::kPhi3:
      return "Phi3ForCausalLM";
    case Architecture::kGemma2:
      return "Gemma2ForCausalLM";
    case Architecture::kGemma3:
      return "Gemma3ForCausalLM";
  }
  return "unknown";
}

namespace {

using config_json::fail;
using config_json::Fields;
using config_json::read_family;
using config_json::read_moe;
using config_json::require_positive;
using nlohmann::json;

constexpr std::string_view kSupportedArchitectures =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, "
    "MixtralForCausalLM, Phi3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM";

Architecture parse_architecture(const Fields& f) {
  const json& doc = f.doc();
  auto from_class = [](const std::string& name, Architecture* out) {
    if (name == "LlamaForCausalLM")
      *out = Architecture::kLlama;
    else if (name == "MistralForCausalLM")
      *out = Architecture::kMistral;
    else if (name == "Qwen2ForCausalLM")
      *out = Architecture::kQwen2;
    else if (name == "Qwen3ForCausalLM")
      *out = Architecture::kQwen3;
    else if (name == "Qwen3MoeForCausalLM")
      *out = Architecture::kQwen3Moe;
    else if (name == "MixtralForCausalLM")
      *out = Architecture::kMixtral;
    else if (name == "Phi3ForCausalLM")
      *out = Architecture::kPhi3;
    else if (name == "Gemma2ForCausalLM")
      *out = Architecture::kGemma2;
    else if (name == "Gemma3ForCausalLM")
      *out = Architecture::kGemma3;
    else if (name == "LlamaForCausalLMEagle3" || name == "Eagle3LlamaForCausalLM")
      *out = Architecture::kLlama;  // an EAGLE-3 head: Llama blocks (read_eagle3)
    else
      return false;
    return true;
  };
  if (f.has("architectures")) {
    const json& list = doc.at("architectures");
    if (!list.is_array() || list.empty()) {
      fail(ErrorCode::kModelFormat, f.file(), "field 'architectures' must be a non-empty list of strings");
    }
    std::string names;
    for (const json& item : list) {
      if (!item.is_string()) {
        fail(ErrorCode::kModelFormat, f.file(), "field 'architectures' must be a list of strings");
      }
      Architecture arch{};
      if (from_class(item.get<std::string>(), &arch)) return arch;
      names += (names.empty() ? "'" : ", '") + clip(item.get<std::string>()) + "'";
    }
    fail(ErrorCode::kUnsupported, f.file(),
         "unsupported architecture " + names + " (specd runs " + std::string(kSupportedArchitectures) + ")");
  }
  // Older configs name only the model_type.
  const std::string model_type = f.string_or("model_type", "");
  if (model_type.empty()) fail(ErrorCode::kModelFormat, f.file(), "missing field 'architectures'");
  if (model_type == "llama") return Architecture::kLlama;
  if (model_type == "mistral") return Architecture::kMistral;
  if (model_type == "qwen2") return Architecture::kQwen2;
  if (model_type == "qwen3") return Architecture::kQwen3;
  if (model_type == "qwen3_moe") return Architecture::kQwen3Moe;
  if (model_type == "mixtral") return Architecture::kMixtral;
  if (model_type == "phi3") return Architecture::kPhi3;
  if (model_type == "gemma2") return Architecture::kGemma2;
  if (model_type == "gemma3_text") return Architecture::kGemma3;
  fail(ErrorCode::kUnsupported, f.file(),
       "unsupported model_type '" + clip(model_type) + "' (specd runs " + std::string(kSupportedArchitectures) + ")");
}

// Phi-3's longrope: per-frequency short and long factors of head_dim / 2 entries each, the
// original context (top-level original_max_position_embeddings) and the cos/sin scale
// (attention_factor, or sqrt(1 + ln(factor) / ln(original)) with factor = context / original).
RopeScaling parse_longrope(const Fields& config, const Fields& f, const ModelConfig& c) {
  RopeScaling scaling;
  scaling.type = RopeScaling::Type::kLongRope;
  const size_t n = static_cast<size_t>(c.head_dim / 2);
  for (const auto& [key, out] :
       {std::pair{"short_factor", &scaling.short_factor}, std::pair{"long_factor", &scaling.long_factor}}) {
    const json* v = f.has(key) ? &f.doc().at(key) : nullptr;
    if (v == nullptr || !v->is_array() || v->size() != n)
      fail(ErrorCode::kModelFormat, config.file(),
           std::string("rope_scaling.") + key + " must list head_dim / 2 = " + std::to_string(n) + " numbers");
    for (const json& x : *v) {
      if (!x.is_number() || !(x.get<double>() > 0))
        fail(ErrorCode::kModelFormat, config.file(),
             std::string("rope_scaling.") + key + " holds a factor that is not positive");
      out->push_back(static_cast<float>(x.get<double>()));
    }
  }
  scaling.original_max_position_embeddings =
      config.int_or("original_max_position_embeddings", f.int_or("original_max_position_embeddings", 0));
  require_positive(config, "original_max_position_embeddings", scaling.original_max_position_embeddings);
  const double factor = f.number_or("factor", static_cast<double>(c.max_position_embeddings) /
                                                  static_cast<double>(scaling.original_max_position_embeddings));
  scaling.factor = factor;
  scaling.attention_factor = f.number_or(
      "attention_factor",
      factor <= 1.0 ? 1.0
                    : std::sqrt(1.0 + std::log(factor) /
                                          std::log(static_cast<double>(scaling.original_max_position_embeddings))));
  if (!(scaling.attention_factor > 0))
    fail(ErrorCode::kModelFormat, config.file(), "rope_scaling.attention_factor must be positive");
  return scaling;
}

RopeScaling parse_rope_scaling(const Fields& config, const ModelConfig& c) {
  RopeScaling scaling;
  if (!config.has("rope_scaling")) return scaling;
  const json& doc = config.doc().at("rope_scaling");
  if (!doc.is_object()) fail(ErrorCode::kModelFormat, config.file(), "field 'rope_scaling' must be an object or null");
  const Fields f(doc, config.file());
  std::string type = f.string_or("rope_type", f.string_or("type", ""));
  if (type.empty()) fail(ErrorCode::kModelFormat, config.file(), "rope_scaling has neither 'rope_type' nor 'type'");
  if (type == "default") return scaling;
  auto positive = [&](const char* key, double v) {
    if (!(v > 0)) {
      fail(ErrorCode::kModelFormat, config.file(),
           std::string("rope_scaling.") + key + " must be positive, got " + std::to_string(v));
    }
    return v;
  };
  if (type == "linear") {
    scaling.type = RopeScaling::Type::kLinear;
    scaling.factor = positive("factor", f.require_number("factor"));
    return scaling;
  }
  if (type == "llama3") {
    scaling.type = RopeScaling::Type::kLlama3;
    scaling.factor = positive("factor", f.require_number("factor"));
    scaling.low_freq_factor = positive("low_freq_factor", f.require_number("low_freq_factor"));
    scaling.high_freq_factor = positive("high_freq_factor", f.require_number("high_freq_factor"));
    scaling.original_max_position_embeddings = f.require_int("original_max_position_embeddings");
    positive("original_max_position_embeddings", static_cast<double>(scaling.original_max_position_embeddings));
    if (!(scaling.high_freq_factor > scaling.low_freq_factor)) {
      fail(ErrorCode::kModelFormat, config.file(), "rope_scaling.high_freq_factor must exceed low_freq_factor");
    }
    return scaling;
  }
  if (type == "longrope" || type == "su") return parse_longrope(config, f, c);
  fail(ErrorCode::kUnsupported, config.file(),
       "rope_scaling type '" + clip(type) + "' is not supported (specd implements llama3, linear and longrope)");
}

}  // namespace

json read_json_file(const std::filesystem::path& file, uint64_t max_bytes) {
  json doc;
  try {
    doc = parse_json(read_file_limited(file, max_bytes, file.filename().string()));
  } catch (const JsonError& e) {
    fail(ErrorCode::kModelFormat, file, std::string("invalid JSON: ") + e.what());
  }
  if (!doc.is_object()) fail(ErrorCode::kModelFormat, file, "top level is not a JSON object");
  return doc;
}

namespace {

// The shape: sizes, heads (num_key_value_heads dividing num_attention_heads), head_dim.
void read_shape(const Fields& f, const std::filesystem::path& path, ModelConfig& c) {
  c.vocab_size = f.require_int("vocab_size");
  c.hidden_size = f.require_int("hidden_size");
  c.intermediate_size = f.require_int("intermediate_size");
  c.num_layers = f.require_int("num_hidden_layers");
  c.num_heads = f.require_int("num_attention_heads");
  require_positive(f, "vocab_size", c.vocab_size);
  require_positive(f, "hidden_size", c.hidden_size);
  require_positive(f, "intermediate_size", c.intermediate_size);
  require_positive(f, "num_hidden_layers", c.num_layers);
  require_positive(f, "num_attention_heads", c.num_heads);
  c.num_kv_heads = f.int_or("num_key_value_heads", c.num_heads);
  require_positive(f, "num_key_value_heads", c.num_kv_heads);
  if (c.num_heads % c.num_kv_heads != 0) {
    fail(ErrorCode::kModelFormat, path,
         "num_attention_heads " + std::to_string(c.num_heads) + " is not a multiple of num_key_value_heads " +
             std::to_string(c.num_kv_heads));
  }
  if (f.has("head_dim")) {
    c.head_dim = f.require_int("head_dim");
    require_positive(f, "head_dim", c.head_dim);
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      fail(ErrorCode::kModelFormat, path,
           "hidden_size " + std::to_string(c.hidden_size) + " is not a multiple of num_attention_heads " +
               std::to_string(c.num_heads) + " and no head_dim is given");
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) {
    fail(ErrorCode::kModelFormat, path, "head_dim " + std::to_string(c.head_dim) + " must be even for RoPE");
  }
}

// An EAGLE-3 head's fields (ModelConfig::Eagle3), when config.json names that architecture.
void read_eagle3(const Fields& f, const std::filesystem::path& path, ModelConfig& c) {
  bool eagle3 = false;
  if (f.has("architectures") && f.doc().at("architectures").is_array())
    for (const json& a : f.doc().at("architectures"))
      eagle3 = eagle3 || (a.is_string() && (a.get<std::string>() == "LlamaForCausalLMEagle3" ||
                                            a.get<std::string>() == "Eagle3LlamaForCausalLM"));
  if (!eagle3) return;
  ModelConfig::Eagle3 e;
  e.draft_vocab_size = f.int_or("draft_vocab_size", c.vocab_size);
  e.target_hidden_size = f.int_or("target_hidden_size", c.hidden_size);
  require_positive(f, "draft_vocab_size", e.draft_vocab_size);
  require_positive(f, "target_hidden_size", e.target_hidden_size);
  if (e.draft_vocab_size > c.vocab_size)
    fail(ErrorCode::kModelFormat, path,
         "draft_vocab_size " + std::to_string(e.draft_vocab_size) + " exceeds vocab_size " +
             std::to_string(c.vocab_size));
  if (c.num_layers != 1)
    fail(ErrorCode::kUnsupported, path,
         "an EAGLE-3 head of " + std::to_string(c.num_layers) + " layers (num_hidden_layers): specd runs one");
  auto layers = [&](const Fields& from, int32_t shift) {
    for (const int32_t l : from.int_list("eagle_aux_hidden_state_layer_ids")) {
      if (l < 0 || l > INT32_MAX - 1)
        fail(ErrorCode::kModelFormat, path, "eagle_aux_hidden_state_layer_ids: bad layer");
      e.aux_layers.push_back(l + shift);
    }
  };
  if (f.has("eagle_aux_hidden_state_layer_ids")) {
    layers(f, 0);
  } else if (f.has("eagle_config") && f.doc().at("eagle_config").is_object()) {
    layers(Fields(f.doc().at("eagle_config"), path), 1);
  }
  if (!e.aux_layers.empty() && e.aux_layers.size() != 3)
    fail(ErrorCode::kModelFormat, path,
         "eagle_aux_hidden_state_layer_ids lists " + std::to_string(e.aux_layers.size()) +
             " layers; an EAGLE-3 head fuses 3");
  c.eagle3 = std::move(e);
}

// Gemma3ForConditionalGeneration's config.json: the language model's text_config over
// transformers' Gemma3TextConfig defaults (the released configs leave many fields to them), as a
// Gemma3ForCausalLM config; BOS/EOS from the top level when text_config has none.
bool is_gemma3_multimodal(const json& doc) {
  const auto it = doc.find("architectures");
  if (it == doc.end() || !it->is_array()) return false;
  for (const json& a : *it)
    if (a.is_string() && a.get<std::string>() == "Gemma3ForConditionalGeneration") return true;
  return false;
}

json gemma3_text_config(const json& doc, const std::filesystem::path& path) {
  const auto text = doc.find("text_config");
  if (text == doc.end() || !text->is_object())
    fail(ErrorCode::kModelFormat, path, "Gemma3ForConditionalGeneration without a text_config object");
  json c = {{"vocab_size", 262208},
            {"hidden_size", 2304},
            {"intermediate_size", 9216},
            {"num_hidden_layers", 26},
            {"num_attention_heads", 8},
            {"num_key_value_heads", 4},
            {"head_dim", 256},
            {"hidden_activation", "gelu_pytorch_tanh"},
            {"max_position_embeddings", 131072},
            {"rms_norm_eps", 1e-6},
            {"rope_theta", 1000000.0},
            {"query_pre_attn_scalar", 256},
            {"sliding_window", 4096},
            {"rope_local_base_freq", 10000.0},
            {"tie_word_embeddings", true}};
  for (const auto& [key, value] : text->items()) c[key] = value;
  c["architectures"] = json::array({"Gemma3ForCausalLM"});
  for (const char* key : {"bos_token_id", "eos_token_id"})
    if (!c.contains(key) && doc.contains(key)) c[key] = doc.at(key);
  return c;
}

// generation_config.json, when present: BOS/EOS over config.json's, and the sampling defaults.
void read_generation_config(const std::filesystem::path& model_dir, ModelConfig& c) {
  const std::filesystem::path gen_path = model_dir / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(gen_path, ec)) return;
  const json gen_doc = read_json_file(gen_path);
  const Fields gen(gen_doc, gen_path);
  if (const std::vector<int32_t> bos = gen.int_list("bos_token_id"); !bos.empty()) c.bos_token_id = bos.front();
  if (gen.has("eos_token_id")) c.eos_token_ids = gen.int_list("eos_token_id");
  auto number = [&](const char* key) {
    return gen.has(key) ? std::optional<double>(gen.number_or(key, 0)) : std::nullopt;
  };
  auto integer = [&](const char* key) {
    return gen.has(key) ? std::optional<int64_t>(gen.int_or(key, 0)) : std::nullopt;
  };
  c.default_temperature = number("temperature");
  c.default_top_p = number("top_p");
  c.default_min_p = number("min_p");
  c.default_repetition_penalty = number("repetition_penalty");
  c.default_top_k = integer("top_k");
  c.default_max_tokens = integer("max_new_tokens");
}

}  // namespace

ModelConfig read_model_config(const std::filesystem::path& model_dir) {
  const std::filesystem::path path = model_dir / "config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {  // anything else that is there is read (and refused) below
    throw Error(ErrorCode::kNotFound, "missing config.json in " + model_dir.string() + " (" + path.string() + ")");
  }
  json doc = read_json_file(path);
  const bool multimodal = is_gemma3_multimodal(doc);
  if (multimodal) doc = gemma3_text_config(doc, path);
  const Fields f(doc, path);

  ModelConfig c;
  c.config_path = path;
  c.multimodal_text = multimodal;
  c.arch = parse_architecture(f);
  const bool gemma = c.arch == Architecture::kGemma2 || c.arch == Architecture::kGemma3;
  const std::string act =
      f.string_or("hidden_activation", f.string_or("hidden_act", gemma ? "gelu_pytorch_tanh" : "silu"));
  if (act != (gemma ? "gelu_pytorch_tanh" : "silu")) {
    fail(ErrorCode::kUnsupported, path,
         "hidden_act '" + clip(act) + "' is not supported (specd implements " +
             (gemma ? "gelu_pytorch_tanh for Gemma" : "silu") + ")");
  }
  read_shape(f, path, c);

  c.rms_norm_eps = f.number_or("rms_norm_eps", 1e-6);
  c.rope_theta = f.number_or("rope_theta", 10000.0);
  if (!(c.rms_norm_eps > 0)) fail(ErrorCode::kModelFormat, path, "field 'rms_norm_eps' must be positive");
  if (!(c.rope_theta > 0)) fail(ErrorCode::kModelFormat, path, "field 'rope_theta' must be positive");
  c.max_position_embeddings = f.int_or("max_position_embeddings", 2048);
  require_positive(f, "max_position_embeddings", c.max_position_embeddings);
  c.rope_scaling = parse_rope_scaling(f, c);
  c.tie_word_embeddings = f.bool_or("tie_word_embeddings", gemma);  // Gemma configs may leave it to the default
  read_family(f, path, c);
  read_moe(f, path, c);
  read_eagle3(f, path, c);

  c.num_mtp_modules = f.int_or("num_nextn_predict_layers", 0);
  if (c.num_mtp_modules < 0 || c.num_mtp_modules > INT32_MAX) {
    fail(ErrorCode::kModelFormat, path,
         "field 'num_nextn_predict_layers' must be in [0, " + std::to_string(INT32_MAX) + "], got " +
             std::to_string(c.num_mtp_modules));
  }
  c.torch_dtype = f.string_or("torch_dtype", f.string_or("dtype", ""));
  if (const std::vector<int32_t> bos = f.int_list("bos_token_id"); !bos.empty()) c.bos_token_id = bos.front();
  c.eos_token_ids = f.int_list("eos_token_id");
  read_generation_config(model_dir, c);
  return c;
}

}  // namespace specd::model

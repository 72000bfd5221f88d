// specd inspect FILE|DIR [--json]
// What a model is before running it: format, architecture and shapes, tensors by type (count
// and bytes), how model.dtype auto computes them, the tokenizer and its special tokens, and
// whether a chat template is present. A GGUF file specd cannot run is still listed, with the
// reason it cannot run.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.hpp"
#include "model/checkpoint.hpp"
#include "model/gguf.hpp"
#include "specd/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::cli {
namespace {

using nlohmann::json;

struct InspectOptions {
  std::string path;
  bool json = false;
};

struct TypeCount {
  int64_t count = 0;
  uint64_t bytes = 0;
};

// Tensors by stored type, and by the dtype model.dtype auto computes them in.
struct TensorSummary {
  std::map<std::string, TypeCount> stored;
  std::map<std::string, TypeCount> computed;
  int64_t count = 0;
  uint64_t bytes = 0;
};

void add(std::map<std::string, TypeCount>& m, const std::string& key, uint64_t bytes) {
  m[key].count += 1;
  m[key].bytes += bytes;
}

std::string special_text(const tokenizer::Tokenizer& tok, std::optional<int32_t> id) {
  return id ? std::to_string(*id) + " " +
                  json(tok.id_to_token(*id)).dump(-1, ' ', false, json::error_handler_t::replace)
            : std::string("none");
}

json token_json(const tokenizer::Tokenizer& tok, std::optional<int32_t> id) {
  if (!id) return nullptr;
  return {{"id", *id}, {"text", tok.id_to_token(*id)}};
}

json inspect(const std::filesystem::path& path) {
  json out = {{"path", path.string()}};
  std::shared_ptr<const model::gguf::File> gguf;
  if (model::gguf::is_gguf_file(path)) {
    gguf = model::gguf::File::open(path);
    out["format"] = "gguf";
    out["gguf_version"] = gguf->version();
    out["file_bytes"] = gguf->size();
    out["metadata_keys"] = gguf->metadata().size();
    if (const auto name = gguf->string("general.name")) out["name"] = std::string(*name);
  } else {
    out["format"] = "safetensors";
  }
  TensorSummary ts;
  std::unique_ptr<model::Checkpoint> ckpt;
  try {
    ckpt = model::Checkpoint::open(path);
    out["runnable"] = true;
  } catch (const Error& e) {
    if (!gguf) throw;  // a directory that cannot be read has nothing more to show
    out["runnable"] = false;
    out["error"] = e.what();
  }
  if (gguf) {
    for (const model::gguf::TensorInfo& t : gguf->tensors()) add(ts.stored, model::gguf::type_name(t.type), t.nbytes);
  }
  if (ckpt) {
    for (const std::string& name : ckpt->tensor_names()) {
      const model::TensorView& t = *ckpt->find(name);
      const std::string dtype(model::dtype_name(t.dtype));
      if (!gguf) add(ts.stored, dtype, t.nbytes);
      add(ts.computed, t.in_place() ? dtype : model::gguf::type_name(*t.converted_from) + " -> " + dtype, t.nbytes);
    }
    const model::ModelConfig& c = ckpt->config();
    out["architecture"] = std::string(model::architecture_name(c.arch));
    out["config"] = {{"layers", c.num_layers},
                     {"hidden", c.hidden_size},
                     {"intermediate", c.intermediate_size},
                     {"heads", c.num_heads},
                     {"kv_heads", c.num_kv_heads},
                     {"head_dim", c.head_dim},
                     {"vocab", c.vocab_size},
                     {"context", c.max_position_embeddings},
                     {"rope_theta", c.rope_theta},
                     {"rms_norm_eps", c.rms_norm_eps},
                     {"tied_embeddings", c.tie_word_embeddings},
                     {"qk_norm", c.qk_norm}};
    if (c.sliding_window > 0) {
      int64_t sliding = 0;
      for (int64_t l = 0; l < c.num_layers; ++l) sliding += c.layer_window(l) > 0 ? 1 : 0;
      out["config"]["sliding_window"] = {{"window", c.sliding_window}, {"layers", sliding}};
    }
    if (c.gemma)
      out["config"]["gemma"] = {{"query_scale", c.gemma->query_scale},
                                {"attn_logit_softcapping", c.gemma->attn_softcap},
                                {"final_logit_softcapping", c.gemma->final_softcap},
                                {"rope_local_base_freq", c.gemma->rope_local_theta}};
    if (c.rope_scaling.type == model::RopeScaling::Type::kLongRope)
      out["config"]["longrope"] = {
          {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings},
          {"attention_factor", c.rope_scaling.attention_factor}};
    if (c.moe)
      out["config"]["experts"] = {{"count", c.moe->num_experts},
                                  {"per_token", c.moe->experts_per_token},
                                  {"intermediate", c.moe->expert_intermediate},
                                  {"norm_topk_prob", c.moe->norm_topk_prob}};
  } else if (const auto arch = gguf->string("general.architecture")) {
    out["architecture"] = std::string(*arch);
  }
  for (const auto& [type, n] : ts.stored) {
    ts.count += n.count;
    ts.bytes += n.bytes;
  }
  auto types = [](const std::map<std::string, TypeCount>& m) {
    json list = json::array();
    for (const auto& [type, n] : m) list.push_back({{"type", type}, {"count", n.count}, {"bytes", n.bytes}});
    return list;
  };
  out["tensors"] = {{"count", ts.count}, {"bytes", ts.bytes}, {"by_type", types(ts.stored)}};
  if (ckpt) out["tensors"]["auto_compute"] = types(ts.computed);

  try {
    const auto tok = tokenizer::Tokenizer::load(path);
    json t = {{"vocab_size", tok->vocab_size()},
              {"bos", token_json(*tok, tok->bos_id())},
              {"eos", token_json(*tok, tok->eos_id())}};
    if (gguf) {
      t["kind"] = std::string(gguf->string("tokenizer.ggml.model").value_or(""));
      if (const auto pre = gguf->string("tokenizer.ggml.pre")) t["pre"] = std::string(*pre);
    } else {
      t["kind"] = "tokenizer.json";
    }
    int64_t specials = 0;
    for (int32_t id = 0; id < tok->vocab_size(); ++id) specials += tok->is_special(id) ? 1 : 0;
    t["special_tokens"] = specials;
    t["adds_bos"] = tok->bos_id() && !tok->encode("a").empty() && tok->encode("a").front() == *tok->bos_id();
    t["text"] = "bos " + special_text(*tok, tok->bos_id()) + ", eos " + special_text(*tok, tok->eos_id());
    out["tokenizer"] = t;
    const auto& templates = tok->chat_template_config().templates;
    out["chat_template_bytes"] = templates.empty() ? json(nullptr) : json(templates.front().second.size());
  } catch (const Error& e) {
    out["tokenizer"] = {{"error", e.what()}};
    out["chat_template_bytes"] = nullptr;
  }
  return out;
}

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

void print_text(const json& j) {
  std::printf("model         %s (%s", j["path"].get<std::string>().c_str(), j["format"].get<std::string>().c_str());
  if (j.contains("gguf_version")) {
    std::printf(" v%d, %s, %zu metadata keys", j["gguf_version"].get<int>(),
                mib(j["file_bytes"].get<uint64_t>()).c_str(), j["metadata_keys"].get<size_t>());
  }
  std::printf(")\n");
  if (j.contains("architecture")) std::printf("architecture  %s\n", j["architecture"].get<std::string>().c_str());
  if (!j["runnable"].get<bool>()) std::printf("runnable      no: %s\n", j["error"].get<std::string>().c_str());
  if (j.contains("config")) {
    const json& c = j["config"];
    std::printf(
        "shape         %lld layers, hidden %lld, intermediate %lld, %lld heads (%lld kv), head_dim %lld, vocab %lld, "
        "context %lld%s%s\n",
        c["layers"].get<long long>(), c["hidden"].get<long long>(), c["intermediate"].get<long long>(),
        c["heads"].get<long long>(), c["kv_heads"].get<long long>(), c["head_dim"].get<long long>(),
        c["vocab"].get<long long>(), c["context"].get<long long>(),
        c["tied_embeddings"].get<bool>() ? ", tied embeddings" : "", c["qk_norm"].get<bool>() ? ", q/k norm" : "");
    if (c.contains("sliding_window"))
      std::printf("window        %lld positions in %lld of the layers\n",
                  c["sliding_window"]["window"].get<long long>(), c["sliding_window"]["layers"].get<long long>());
    if (c.contains("gemma")) {
      const json& g = c["gemma"];
      std::printf("gemma         query scale %.6g, soft caps %g (attention) %g (logits), local RoPE base %g\n",
                  g["query_scale"].get<double>(), g["attn_logit_softcapping"].get<double>(),
                  g["final_logit_softcapping"].get<double>(), g["rope_local_base_freq"].get<double>());
    }
    if (c.contains("longrope"))
      std::printf("longrope      original context %lld, attention factor %.6g\n",
                  c["longrope"]["original_max_position_embeddings"].get<long long>(),
                  c["longrope"]["attention_factor"].get<double>());
    if (c.contains("experts")) {
      const json& e = c["experts"];
      std::printf("experts       %lld of width %lld, %lld per token%s\n", e["count"].get<long long>(),
                  e["intermediate"].get<long long>(), e["per_token"].get<long long>(),
                  e["norm_topk_prob"].get<bool>() ? ", weights renormalized" : "");
    }
  }
  const json& t = j["tensors"];
  std::printf("tensors       %lld, %s\n", t["count"].get<long long>(), mib(t["bytes"].get<uint64_t>()).c_str());
  for (const json& e : t["by_type"])
    std::printf("  %-10s %5lld tensors %12s\n", e["type"].get<std::string>().c_str(), e["count"].get<long long>(),
                mib(e["bytes"].get<uint64_t>()).c_str());
  if (t.contains("auto_compute")) {
    std::printf("model.dtype auto computes in\n");
    for (const json& e : t["auto_compute"])
      std::printf("  %-14s %5lld tensors\n", e["type"].get<std::string>().c_str(), e["count"].get<long long>());
  }
  const json& tok = j["tokenizer"];
  if (tok.contains("error")) {
    std::printf("tokenizer     none: %s\n", tok["error"].get<std::string>().c_str());
  } else {
    std::printf("tokenizer     %s%s, %d tokens (%lld special), %s, %s BOS\n", tok["kind"].get<std::string>().c_str(),
                tok.contains("pre") ? (" (pre " + tok["pre"].get<std::string>() + ")").c_str() : "",
                tok["vocab_size"].get<int>(), tok["special_tokens"].get<long long>(),
                tok["text"].get<std::string>().c_str(), tok["adds_bos"].get<bool>() ? "adds" : "no");
  }
  if (j["chat_template_bytes"].is_null())
    std::printf("chat template absent\n");
  else
    std::printf("chat template present (%zu bytes)\n", j["chat_template_bytes"].get<size_t>());
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto opts = std::make_shared<InspectOptions>();
  auto* cmd = app.add_subcommand("inspect", "Describe a model directory or GGUF file: shapes, tensor types, tokenizer");
  cmd->add_option("path", opts->path, "model directory or GGUF file")->required();
  cmd->add_flag("--json", opts->json, "print JSON");
  cmd->callback([opts] {
    const json j = inspect(opts->path);
    if (opts->json) {
      std::cout << j.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
    } else {
      print_text(j);
    }
  });
}

}  // namespace specd::cli

// Loading: tokenizer.json (+ tokenizer_config.json) into the pipeline components.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "common/untrusted.hpp"
#include "model/gguf.hpp"
#include "specd/error.hpp"
#include "specd/log.hpp"
#include "tokenizer/tokenizer_impl.hpp"

namespace specd::tokenizer {

namespace {

using nlohmann::json;

json parse_file_json(std::string_view text, const std::string& name) {
  json j;
  try {
    j = parse_json(text);
  } catch (const JsonError& e) {
    throw Error(ErrorCode::kModelFormat, name + ": not valid JSON: " + e.what());
  }
  return j;
}

// Ids a tokenizer may leave unused below its highest id: the id -> token table is sized by the
// highest id, so a lone huge id (2^31 - 1) must not decide how much memory loading takes.
constexpr int64_t kMaxUnusedIds = int64_t{1} << 16;

// "bos_token": "<s>" or {"content": "<s>", ...} or null.
std::optional<std::string> token_content(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object()) {
    if (const auto it = value.find("content"); it != value.end() && it->is_string()) return it->get<std::string>();
  }
  return std::nullopt;
}

// chat_template: a string (the "default" template) or [{"name": ..., "template": ...}]; a
// chat_template.jinja file beside the config replaces the default, as in transformers.
ChatTemplateConfig chat_template_config(const json& config, const std::filesystem::path& config_file) {
  ChatTemplateConfig c;
  c.origin = config_file.string();
  const std::string name = config_file.string();
  if (const auto it = config.find("chat_template"); it != config.end() && !it->is_null()) {
    if (it->is_string()) {
      c.templates.emplace_back("default", it->get<std::string>());
    } else if (it->is_array()) {
      for (const json& t : *it) {
        if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("template") ||
            !t["template"].is_string())
          throw Error(ErrorCode::kModelFormat, name +
                                                   ": chat_template list entries must be {\"name\": string, "
                                                   "\"template\": string}");
        c.templates.emplace_back(t["name"].get<std::string>(), t["template"].get<std::string>());
      }
    } else {
      throw Error(ErrorCode::kModelFormat, name + ": chat_template must be a string or a list of named templates");
    }
  }
  // A GGUF file carries its template in its metadata; only a tokenizer_config.json has a sidecar.
  const std::filesystem::path jinja_file = config_file.parent_path() / "chat_template.jinja";
  std::error_code ec;
  if (config_file.filename() == "tokenizer_config.json" && std::filesystem::is_regular_file(jinja_file, ec)) {
    std::ifstream in(jinja_file, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in && !in.eof()) throw Error(ErrorCode::kNotFound, "cannot read " + jinja_file.string());
    std::erase_if(c.templates, [](const auto& t) { return t.first == "default"; });
    c.templates.emplace(c.templates.begin(), "default", std::move(text));
    c.origin = jinja_file.string();
  }
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (const auto it = config.find(key); it != config.end())
      if (auto content = token_content(*it)) c.special_tokens.emplace_back(key, *content);
  }
  if (const auto it = config.find("additional_special_tokens"); it != config.end() && it->is_array())
    for (const auto& s : *it)
      if (auto content = token_content(s)) c.additional_special_tokens.push_back(*content);
  return c;
}

class ByteLevelPost final : public detail::PostProcessor {
 public:
  void process(std::vector<int32_t>&, bool) const override {}  // offsets only
};

class SequencePost final : public detail::PostProcessor {
 public:
  explicit SequencePost(std::vector<std::unique_ptr<detail::PostProcessor>> parts) : parts_(std::move(parts)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    for (const auto& part : parts_) part->process(ids, add_special_tokens);
  }
  std::vector<std::unique_ptr<detail::PostProcessor>>& parts() { return parts_; }

 private:
  std::vector<std::unique_ptr<detail::PostProcessor>> parts_;
};

class Loader {
 public:
  explicit Loader(std::string file) : file_(std::move(file)) {}

  std::unique_ptr<detail::PostProcessor> post_processor(const json& config, int depth = 0) {
    if (config.is_null()) return nullptr;
    if (!config.is_object() || !config.contains("type") || !config["type"].is_string())
      throw Error(ErrorCode::kModelFormat, file_ + ": post_processor must be an object with a \"type\"");
    const std::string type = clip(config["type"].get<std::string>());  // names it in errors
    const std::string where = file_ + ": post_processor " + type;
    if (type == "ByteLevel") return std::make_unique<ByteLevelPost>();
    if (type == "Sequence") {
      const auto it = config.find("processors");
      if (it == config.end() || !it->is_array())
        throw Error(ErrorCode::kModelFormat, where + ": missing 'processors' array");
      detail::check_sequence_depth(depth, where);
      std::vector<std::unique_ptr<detail::PostProcessor>> parts;
      for (const auto& part : *it)
        if (auto p = post_processor(part, depth + 1)) parts.push_back(std::move(p));
      return std::make_unique<SequencePost>(std::move(parts));
    }
    if (type == "TemplateProcessing") {
      auto tp = std::make_unique<detail::TemplateProcessing>(template_items(config, where));
      template_ = tp.get();
      return tp;
    }
    throw Error(ErrorCode::kUnsupported, file_ + ": unsupported post_processor type '" + type +
                                             "' (supported: TemplateProcessing, ByteLevel, Sequence)");
  }

  detail::TemplateProcessing* found_template() const { return template_; }

 private:
  std::vector<int32_t> special_ids(const json& config, const std::string& name, const std::string& where) {
    const auto specials = config.find("special_tokens");
    if (specials != config.end() && specials->is_object()) {
      if (const auto it = specials->find(name); it != specials->end()) {
        const auto ids = it->find("ids");
        if (ids == it->end() || !ids->is_array())
          throw Error(ErrorCode::kModelFormat, where + ": special token '" + clip(name) + "' has no 'ids'");
        std::vector<int32_t> out;
        for (const auto& id : *ids) {
          if (!id.is_number_integer())
            throw Error(ErrorCode::kModelFormat, where + ": special token '" + clip(name) + "' has a non-integer id");
          out.push_back(id.get<int32_t>());
        }
        return out;
      }
    }
    throw Error(ErrorCode::kModelFormat,
                where + ": template uses special token '" + clip(name) + "' missing from 'special_tokens'");
  }

  std::vector<detail::TemplateItem> template_items(const json& config, const std::string& where) {
    const auto single = config.find("single");
    if (single == config.end()) throw Error(ErrorCode::kModelFormat, where + ": missing 'single' template");
    std::vector<detail::TemplateItem> items;
    auto add_piece = [&](const std::string& piece) {  // "$A", "$A:0", "$", "<s>", "<s>:1"
      const std::string name = piece.substr(
          0, piece.rfind(':') == std::string::npos || piece.rfind(':') == 0 ? piece.size() : piece.rfind(':'));
      if (name == "$" || name == "$A" || name == "$0") {
        items.push_back({true, {}});
      } else if (name == "$B" || name == "$1") {
        throw Error(ErrorCode::kModelFormat, where + ": the single template uses the pair sequence $B");
      } else {
        items.push_back({false, special_ids(config, name, where)});
      }
    };
    if (single->is_string()) {
      const std::string text = single->get<std::string>();
      size_t pos = 0;
      while (pos < text.size()) {
        const size_t end = std::min(text.find(' ', pos), text.size());
        if (end > pos) add_piece(text.substr(pos, end - pos));
        pos = end + 1;
      }
      return items;
    }
    if (!single->is_array()) throw Error(ErrorCode::kModelFormat, where + ": 'single' must be a list or a string");
    for (const auto& item : *single) {
      if (item.contains("Sequence")) {
        const std::string id = item["Sequence"].value("id", std::string("A"));
        if (id != "A") throw Error(ErrorCode::kModelFormat, where + ": the single template uses sequence " + id);
        items.push_back({true, {}});
      } else if (item.contains("SpecialToken")) {
        const auto& st = item["SpecialToken"];
        if (!st.contains("id") || !st["id"].is_string())
          throw Error(ErrorCode::kModelFormat, where + ": SpecialToken without an id");
        items.push_back({false, special_ids(config, st["id"].get<std::string>(), where)});
      } else {
        throw Error(ErrorCode::kModelFormat, where + ": template item is neither Sequence nor SpecialToken");
      }
    }
    return items;
  }

  std::string file_;
  detail::TemplateProcessing* template_ = nullptr;
};

std::optional<int32_t> lookup(const Tokenizer::Impl& impl, const std::string& content) {
  if (const auto it = impl.added_ids.find(content); it != impl.added_ids.end()) return it->second;
  if (const auto it = impl.model->vocab().find(content); it != impl.model->vocab().end()) return it->second;
  return std::nullopt;
}

std::unique_ptr<Tokenizer::Impl> build_pipeline(json& root, const json& config, const std::string& file,
                                                const std::string& config_name);

}  // namespace

std::unique_ptr<Tokenizer::Impl> load_impl(const std::filesystem::path& path) {
  if (model::gguf::is_gguf_file(path)) {
    TokenizerDocuments docs = gguf_tokenizer_documents(*model::gguf::File::open(path));
    return build_impl(std::move(docs.tokenizer), docs.config, path, path.string());
  }
  std::error_code ec;
  std::filesystem::path tokenizer_file = path;
  if (std::filesystem::is_directory(path, ec)) tokenizer_file = path / "tokenizer.json";
  if (!std::filesystem::exists(tokenizer_file, ec))
    throw Error(ErrorCode::kNotFound, "tokenizer not found: " + tokenizer_file.string() +
                                          " (expected a model directory with tokenizer.json, a tokenizer.json file or "
                                          "a GGUF file)");
  const std::filesystem::path config_file = tokenizer_file.parent_path() / "tokenizer_config.json";
  const std::string text = read_file_limited(tokenizer_file, kMaxTokenizerJsonBytes, "tokenizer.json");
  const std::string config_text = std::filesystem::exists(config_file, ec)
                                      ? read_file_limited(config_file, kMaxSmallJsonBytes, "tokenizer_config.json")
                                      : std::string("{}");
  return load_impl_from_text(text, config_text, tokenizer_file, config_file.string());
}

std::unique_ptr<Tokenizer::Impl> load_impl_from_text(std::string_view tokenizer_json, std::string_view config_json,
                                                     const std::filesystem::path& source,
                                                     const std::string& config_name) {
  const std::string file = source.string();
  return build_impl(parse_file_json(tokenizer_json, file), parse_file_json(config_json, config_name), source,
                    config_name);
}

std::unique_ptr<Tokenizer::Impl> build_impl(json root, const json& config, const std::filesystem::path& source,
                                            const std::string& config_name) {
  const std::string file = source.string();
  if (!root.is_object()) throw Error(ErrorCode::kModelFormat, file + ": the top level is not an object");
  if (!config.is_object()) throw Error(ErrorCode::kModelFormat, config_name + ": the top level is not an object");
  try {
    auto impl = build_pipeline(root, config, file, config_name);
    impl->source = source;
    return impl;
  } catch (const json::exception& e) {
    // A value of the wrong type where a component reads it with json::value / get.
    throw Error(ErrorCode::kModelFormat, file + ": " + e.what());
  }
}

namespace {

// The model and the pipeline components of tokenizer.json; settings the engine does not follow.
void read_components(Tokenizer::Impl& impl, Loader& loader, const json& root, const json& config,
                     const std::string& file, const std::string& config_name) {
  auto member = [&](const char* key) -> const json& {
    static const json null_value;
    const auto it = root.find(key);
    return it == root.end() ? null_value : *it;
  };
  const json& model = member("model");
  if (!model.is_object()) throw Error(ErrorCode::kModelFormat, file + ": missing 'model'");
  std::string model_type = model.value("type", std::string());
  if (model_type.empty() && model.contains("merges") && model.contains("vocab")) model_type = "BPE";
  if (model_type != "BPE")
    throw Error(ErrorCode::kUnsupported, file + ": unsupported model type '" + clip(model_type) + "' (supported: BPE)");
  impl.model = std::make_unique<detail::BpeModel>(model, file);
  impl.normalizer = detail::make_normalizer(member("normalizer"), file);
  impl.pre_tokenizer = detail::make_pre_tokenizer(member("pre_tokenizer"), file);
  impl.decoder = detail::make_decoder(member("decoder"), file);
  impl.post_processor = loader.post_processor(member("post_processor"));
  for (const char* key : {"truncation", "padding"})
    if (!member(key).is_null())
      log::get("tokenizer").info("{}: ignoring '{}' (the engine enforces sequence lengths itself)", file, key);
  for (const char* key : {"remove_space", "do_lowercase_and_remove_accent"})
    if (config.value(key, false))
      throw Error(ErrorCode::kUnsupported, config_name + ": '" + std::string(key) + "' is not supported");
}

// added_tokens: the list, the content -> id map and the tries that match them in text.
void read_added_tokens(Tokenizer::Impl& impl, const json& added, const std::string& file) {
  if (!added.is_null() && !added.is_array())
    throw Error(ErrorCode::kModelFormat, file + ": 'added_tokens' must be an array");
  if (added.is_array()) {
    for (const auto& entry : added) {
      if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string() || !entry.contains("id") ||
          !entry["id"].is_number_integer() || entry["id"].get<int64_t>() < 0 || entry["id"].get<int64_t>() > INT32_MAX)
        throw Error(ErrorCode::kModelFormat, file + ": an added token needs a string 'content' and an int32 'id'");
      detail::AddedToken t;
      t.content = entry["content"].get<std::string>();
      t.id = static_cast<int32_t>(entry["id"].get<int64_t>());
      t.special = entry.value("special", false);
      t.lstrip = entry.value("lstrip", false);
      t.rstrip = entry.value("rstrip", false);
      t.single_word = entry.value("single_word", false);
      t.normalized = entry.value("normalized", !t.special);
      if (!detail::is_valid_utf8(t.content))
        throw Error(ErrorCode::kModelFormat, file + ": added token content is not UTF-8");
      impl.added.push_back(std::move(t));
    }
  }
  for (size_t i = 0; i < impl.added.size(); ++i) {
    const auto& t = impl.added[i];
    impl.added_ids[t.content] = t.id;
    if (t.normalized && impl.normalizer) {
      const std::string normalized = impl.normalizer->normalize(t.content);
      impl.added_ids[normalized] = t.id;
      impl.normalized_trie.insert(normalized, static_cast<int32_t>(i));
    } else {
      impl.unnormalized_trie.insert(t.content, static_cast<int32_t>(i));
    }
  }
  impl.model->resolve_unk(impl.added_ids);
}

// The id -> token table over the vocab and the added tokens, with each id's special and
// added-content flags.
void build_token_table(Tokenizer::Impl& impl, const json& config, const std::string& file) {
  int64_t max_id = -1;
  for (const auto& [token, id] : impl.model->vocab()) max_id = std::max<int64_t>(max_id, id);
  for (const auto& t : impl.added) max_id = std::max<int64_t>(max_id, t.id);
  const auto defined = static_cast<int64_t>(impl.model->vocab().size() + impl.added.size());
  if (max_id >= defined + kMaxUnusedIds) {
    throw Error(ErrorCode::kModelFormat, file + ": token id " + std::to_string(max_id) + " leaves more than " +
                                             std::to_string(kMaxUnusedIds) + " ids unused (the file defines " +
                                             std::to_string(defined) + " tokens)");
  }
  const auto size = static_cast<size_t>(max_id + 1);
  impl.tokens.assign(size, std::string());
  impl.has_token.assign(size, 0);
  impl.special.assign(size, 0);
  impl.added_content.assign(size, 0);
  for (const auto& [token, id] : impl.model->vocab()) {
    impl.tokens[id] = token;
    impl.has_token[id] = 1;
  }
  std::set<std::string, std::less<>> special_contents, added_contents;
  for (const auto& t : impl.added) {
    impl.tokens[t.id] = t.content;
    impl.has_token[t.id] = 1;
    added_contents.insert(t.content);
    if (t.special) special_contents.insert(t.content);
  }
  if (const auto it = config.find("additional_special_tokens"); it != config.end() && it->is_array())
    for (const auto& sp : *it)
      if (auto content = token_content(sp)) special_contents.insert(*content);
  // skip_special_tokens and ByteLevel's pass-through compare token strings, as the official
  // implementation does, so a vocab entry spelled like a special token counts too.
  for (size_t id = 0; id < size; ++id) {
    if (!impl.has_token[id]) continue;
    impl.special[id] = special_contents.count(impl.tokens[id]) ? 1 : 0;
    impl.added_content[id] = added_contents.count(impl.tokens[id]) ? 1 : 0;
  }
}

// BOS/EOS: tokenizer_config.json's bos_token / eos_token, else the special tokens the
// post-processor's template puts around $A.
void resolve_bos_eos(Tokenizer::Impl& impl, const detail::TemplateProcessing* tp, const json& config,
                     const std::string& file, const std::string& config_name) {
  auto resolve = [&](const char* key) -> std::optional<int32_t> {
    const auto it = config.find(key);
    if (it == config.end()) return std::nullopt;
    const auto content = token_content(*it);
    if (!content) return std::nullopt;
    const auto id = lookup(impl, *content);
    if (!id)
      throw Error(ErrorCode::kModelFormat,
                  config_name + ": " + key + " '" + clip(*content) + "' is not a token of " + file);
    return id;
  };
  impl.bos = resolve("bos_token");
  impl.eos = resolve("eos_token");
  if (tp == nullptr) return;
  const auto& items = tp->single();
  const auto first_seq = std::find_if(items.begin(), items.end(), [](const auto& i) { return i.is_sequence; });
  if (!impl.bos && !config.contains("bos_token") && first_seq != items.begin() && !items.front().special_ids.empty())
    impl.bos = items.front().special_ids.front();
  if (!impl.eos && !config.contains("eos_token") && !items.empty() && !items.back().is_sequence &&
      first_seq != items.end() && !items.back().special_ids.empty())
    impl.eos = items.back().special_ids.back();
}

// add_bos_token / add_eos_token, where the config sets them, decide whether encode adds BOS /
// EOS (transformers rebuilds the template from them in that case).
void apply_add_bos_eos(Tokenizer::Impl& impl, detail::TemplateProcessing* tp, const json& config,
                       const std::string& config_name) {
  const bool has_add_bos = config.contains("add_bos_token") && config["add_bos_token"].is_boolean();
  const bool has_add_eos = config.contains("add_eos_token") && config["add_eos_token"].is_boolean();
  if (!has_add_bos && !has_add_eos) return;
  const std::vector<detail::TemplateItem> none;
  const auto& items = tp ? tp->single() : none;
  const bool cur_bos = !items.empty() && !items.front().is_sequence && impl.bos &&
                       items.front().special_ids == std::vector<int32_t>{*impl.bos};
  const bool cur_eos = !items.empty() && !items.back().is_sequence && impl.eos &&
                       items.back().special_ids == std::vector<int32_t>{*impl.eos};
  const bool want_bos = has_add_bos ? config["add_bos_token"].get<bool>() : cur_bos;
  const bool want_eos = has_add_eos ? config["add_eos_token"].get<bool>() : cur_eos;
  if (want_bos == cur_bos && want_eos == cur_eos) return;
  if (want_bos && !impl.bos)
    throw Error(ErrorCode::kModelFormat, config_name + ": add_bos_token is true but there is no bos_token");
  if (want_eos && !impl.eos)
    throw Error(ErrorCode::kModelFormat, config_name + ": add_eos_token is true but there is no eos_token");
  std::vector<detail::TemplateItem> single;
  if (want_bos) single.push_back({false, {*impl.bos}});
  single.push_back({true, {}});
  if (want_eos) single.push_back({false, {*impl.eos}});
  if (tp) {
    tp->single() = std::move(single);
  } else {
    auto fresh = std::make_unique<detail::TemplateProcessing>(std::move(single));
    if (!impl.post_processor) {
      impl.post_processor = std::move(fresh);
    } else {
      std::vector<std::unique_ptr<detail::PostProcessor>> parts;
      parts.push_back(std::move(impl.post_processor));
      parts.push_back(std::move(fresh));
      impl.post_processor = std::make_unique<SequencePost>(std::move(parts));
    }
  }
  log::get("tokenizer")
      .debug("{}: add_bos_token={} add_eos_token={} override the post-processor template", config_name, want_bos,
             want_eos);
}

std::unique_ptr<Tokenizer::Impl> build_pipeline(json& root, const json& config, const std::string& file,
                                                const std::string& config_name) {
  auto impl = std::make_unique<Tokenizer::Impl>();
  Loader loader(file);
  read_components(*impl, loader, root, config, file, config_name);
  root.erase("model");  // the model holds its vocab and merges now
  const auto added = root.find("added_tokens");
  read_added_tokens(*impl, added == root.end() ? json() : *added, file);
  root.erase("added_tokens");
  build_token_table(*impl, config, file);
  // Decode options, chat templates and BOS/EOS from tokenizer_config.json.
  impl->clean_up_spaces = config.value("clean_up_tokenization_spaces", true);
  impl->chat = chat_template_config(config, config_name);
  resolve_bos_eos(*impl, loader.found_template(), config, file, config_name);
  apply_add_bos_eos(*impl, loader.found_template(), config, config_name);
  log::get("tokenizer")
      .debug("loaded {}: {} tokens ({} added), bos={}, eos={}", file, impl->tokens.size(), impl->added.size(),
             impl->bos ? std::to_string(*impl->bos) : "none", impl->eos ? std::to_string(*impl->eos) : "none");
  return impl;
}

}  // namespace

}  // namespace specd::tokenizer

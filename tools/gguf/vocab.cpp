// tokenizer.* metadata: the vocabulary of a tokenizer.json in llama.cpp's two BPE flavours.
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/untrusted.hpp"
#include "convert.hpp"
#include "model/json_file.hpp"
#include "specd/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace specd::gguf {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// llama_token_type values for tokenizer.ggml.token_type.
enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

constexpr const char* kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// Split patterns of the byte-level pre-tokenizers llama.cpp knows, by tokenizer.ggml.pre name.
struct KnownPre {
  const char* name;
  const char* pattern;
};
constexpr KnownPre kKnownPres[] = {
    {"llama-bpe",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {"qwen2",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
};

// The component itself, or its direct children when it is a Sequence (under `list_key`).
std::vector<const json*> components(const json& node, const char* list_key) {
  std::vector<const json*> out;
  if (!node.is_object()) return out;
  if (node.value("type", std::string()) == "Sequence" && node.contains(list_key) && node[list_key].is_array()) {
    for (const json& child : node[list_key]) out.push_back(&child);
  } else {
    out.push_back(&node);
  }
  return out;
}

bool is_byte_level(const json& root) {
  const auto it = root.find("pre_tokenizer");
  if (it == root.end()) return false;
  for (const json* c : components(*it, "pretokenizers"))
    if (c->is_object() && c->value("type", std::string()) == "ByteLevel") return true;
  return false;
}

// tokenizer.ggml.pre for a byte-level BPE tokenizer, recognised from its Split regex.
std::string pre_tokenizer_name(const json& root, const std::string& file) {
  std::optional<std::string> pattern;
  bool byte_level_regex = false;
  for (const json* c : components(root["pre_tokenizer"], "pretokenizers")) {
    const std::string type = c->value("type", std::string());
    if (type == "Split" && c->contains("pattern") && (*c)["pattern"].contains("Regex"))
      pattern = (*c)["pattern"]["Regex"].get<std::string>();
    if (type == "ByteLevel") byte_level_regex = c->value("use_regex", true);
  }
  if (!pattern && byte_level_regex) return "gpt-2";
  if (pattern) {
    for (const KnownPre& known : kKnownPres)
      if (*pattern == known.pattern) return known.name;
  }
  std::string names;
  for (const KnownPre& known : kKnownPres) names += std::string(names.empty() ? "" : ", ") + known.name;
  throw Error(ErrorCode::kUnsupported, file +
                                           ": pre_tokenizer Split pattern matches no llama.cpp pre-tokenizer "
                                           "this writer knows (" +
                                           names + ", gpt-2)");
}

// "a b" or ["a", "b"] -> {"a", "b"}.
std::pair<std::string, std::string> merge_pair(const json& merge, const std::string& file) {
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
    return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  if (merge.is_string()) {
    const std::string text = merge.get<std::string>();
    const size_t space = text.find(' ', 1);
    if (space != std::string::npos) return {text.substr(0, space), text.substr(space + 1)};
  }
  throw Error(ErrorCode::kModelFormat, file + ": a model.merges entry is neither \"a b\" nor [\"a\", \"b\"]");
}

bool is_byte_token(const std::string& token) {
  auto hex = [](char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'A' && ch <= 'F') || (ch >= 'a' && ch <= 'f'); };
  return token.size() == 6 && token.starts_with("<0x") && token[5] == '>' && hex(token[3]) && hex(token[4]);
}

// SentencePiece scores for llama.cpp's SPM tokenizer, which merges the adjacent pair whose
// result scores highest: a token made by merge rank r scores -r, so the merge order equals
// tokenizer.json's. Tokens no merge makes rank below every merge result.
std::vector<float> spm_scores(const json& merges, const std::vector<std::string>& tokens,
                              const std::vector<int32_t>& types, const std::string& file) {
  std::unordered_map<std::string, size_t> first_rank;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    auto [left, right] = merge_pair(merges[rank], file);
    first_rank.try_emplace(left + right, rank);
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (types[id] != kNormal && types[id] != kUserDefined) continue;
    const auto it = first_rank.find(tokens[id]);
    scores[id] = -static_cast<float>(it != first_rank.end() ? it->second : merges.size() + id);
  }
  return scores;
}

std::optional<int32_t> token_id(const tokenizer::Tokenizer& tok, const json& value) {
  std::optional<std::string> content;
  if (value.is_string()) content = value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string())
    content = value["content"].get<std::string>();
  return content ? tok.token_to_id(*content) : std::nullopt;
}

// Token texts and llama_token_type values for ids [0, n_vocab): the model vocab and the added
// tokens (ids range-checked by Tokenizer::load), "[PAD<id>]" where no token has the id.
struct TokenTable {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
};

TokenTable token_table(const json& root, const tokenizer::Tokenizer& tok, int64_t n_vocab, bool byte_level,
                       int64_t unk) {
  TokenTable t{std::vector<std::string>(static_cast<size_t>(n_vocab)),
               std::vector<int32_t>(static_cast<size_t>(n_vocab), kNormal)};
  std::vector<char> present(t.tokens.size(), 0), added(t.tokens.size(), 0);
  for (const auto& [text, id] : root["model"]["vocab"].items()) {
    t.tokens[id.get<size_t>()] = text;
    present[id.get<size_t>()] = 1;
  }
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    for (const json& a : root["added_tokens"]) {
      const auto id = a["id"].get<size_t>();
      t.tokens[id] = a["content"].get<std::string>();
      present[id] = added[id] = 1;
    }
  }
  for (size_t id = 0; id < t.tokens.size(); ++id) {
    if (!present[id]) {
      t.tokens[id] = "[PAD" + std::to_string(id) + "]";
      t.types[id] = kUnused;
    } else if (static_cast<int64_t>(id) == unk) {
      t.types[id] = kUnknown;
    } else if (tok.is_special(static_cast<int32_t>(id))) {
      t.types[id] = kControl;
    } else if (!byte_level && is_byte_token(t.tokens[id])) {
      t.types[id] = kByte;
    } else if (added[id]) {
      t.types[id] = kUserDefined;
    }
  }
  return t;
}

// Special ids, and whether encoding adds BOS/EOS or a leading space, as the engine's
// tokenizer does it.
void add_special_tokens(Writer& w, const tokenizer::Tokenizer& tok, const json& config, int64_t unk, bool byte_level) {
  if (tok.bos_id()) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(*tok.bos_id()));
  if (tok.eos_id()) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(*tok.eos_id()));
  if (unk >= 0) w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(unk));
  if (config.contains("pad_token"))
    if (const auto pad = token_id(tok, config["pad_token"]))
      w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(*pad));
  const std::vector<int32_t> plain = tok.encode("a", {.add_special_tokens = false});
  const std::vector<int32_t> with = tok.encode("a", {.add_special_tokens = true});
  const bool extra = with.size() > plain.size();
  w.set_bool("tokenizer.ggml.add_bos_token", extra && tok.bos_id() && with.front() == *tok.bos_id());
  w.set_bool("tokenizer.ggml.add_eos_token", extra && tok.eos_id() && with.back() == *tok.eos_id());
  if (!byte_level) {
    const bool prefix = !plain.empty() && tok.id_to_token(plain.front()).starts_with(kSpaceMarker);
    w.set_bool("tokenizer.ggml.add_space_prefix", prefix);
  }
}

}  // namespace

std::string add_vocab(Writer& w, const fs::path& model_dir, int64_t n_vocab) {
  const auto tok = tokenizer::Tokenizer::load(model_dir);
  const std::string file = tok->source().string();
  const json root = model::read_json_file(tok->source(), kMaxTokenizerJsonBytes);
  const fs::path config_file = tok->source().parent_path() / "tokenizer_config.json";
  const json config = fs::is_regular_file(config_file) ? model::read_json_file(config_file) : json::object();
  const json& bpe = root["model"];  // Tokenizer::load accepted it: a BPE model object
  static const json kNoMerges = json::array();
  const json& merges = bpe.contains("merges") ? bpe["merges"] : kNoMerges;

  const bool byte_level = is_byte_level(root);
  if (!byte_level && !bpe.value("byte_fallback", false)) {
    throw Error(ErrorCode::kUnsupported, file +
                                             ": neither byte-level BPE (GGUF 'gpt2') nor BPE with byte_fallback "
                                             "(GGUF 'llama'); no tokenizer.ggml.model fits");
  }
  if (tok->vocab_size() > n_vocab) {
    throw Error(ErrorCode::kModelFormat, file + ": the tokenizer has ids up to " +
                                             std::to_string(tok->vocab_size() - 1) + " but the model's vocab_size is " +
                                             std::to_string(n_vocab));
  }
  // -1: none (an int rather than an optional: GCC 12 misreports the optional as uninitialized).
  const int64_t unk = bpe.contains("unk_token") ? token_id(*tok, bpe["unk_token"]).value_or(-1) : -1;
  const TokenTable table = token_table(root, *tok, n_vocab, byte_level, unk);

  w.set_string("tokenizer.ggml.model", byte_level ? "gpt2" : "llama");
  if (byte_level) w.set_string("tokenizer.ggml.pre", pre_tokenizer_name(root, file));
  w.set_strings("tokenizer.ggml.tokens", table.tokens);
  if (!byte_level) w.set_f32s("tokenizer.ggml.scores", spm_scores(merges, table.tokens, table.types, file));
  w.set_i32s("tokenizer.ggml.token_type", table.types);
  if (byte_level) {
    std::vector<std::string> merge_texts;
    merge_texts.reserve(merges.size());
    for (const json& m : merges) {
      auto [left, right] = merge_pair(m, file);
      merge_texts.push_back(left + " " + right);
    }
    w.set_strings("tokenizer.ggml.merges", merge_texts);
  }
  add_special_tokens(w, *tok, config, unk, byte_level);
  if (config.contains("chat_template") && config["chat_template"].is_string())
    w.set_string("tokenizer.chat_template", config["chat_template"].get<std::string>());
  return byte_level ? "gpt2" : "llama";
}

}  // namespace specd::gguf

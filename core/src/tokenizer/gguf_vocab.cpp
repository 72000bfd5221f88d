// A GGUF vocabulary (tokenizer.ggml.*) as the tokenizer.json + tokenizer_config.json documents
// of the same tokenizer, which build_impl() turns into the one pipeline specd has.
//
//   tokenizer.ggml.model "llama" (SentencePiece BPE): the vocab is every token (unused ones
//     aside); merges are what Hugging Face's SentencePiece converter derives from the scores:
//     every split of a token into two vocab tokens, ordered by the token's score (highest
//     first, ties by token id, then by the ids of the two halves). Normalizer: Prepend "▁"
//     (add_space_prefix) + Replace " " -> "▁"; decoder Replace "▁" -> " ", ByteFallback, Fuse,
//     Strip one leading space; byte_fallback and fuse_unk on, as in Llama 2's tokenizer.json.
//   tokenizer.ggml.model "gpt2" (byte-level BPE): vocab = normal and byte tokens, merges as
//     stored; the pre-tokenizer, normalizer, ignore_merges and clean-up of the named
//     tokenizer.ggml.pre variant (kPreTokenizers).
//   Control and unknown tokens are special added tokens, user-defined tokens non-special added
//   tokens (both matched on the raw text); BOS/EOS from the ids, add-BOS/EOS from the flags
//   (defaults as llama.cpp: SPM adds BOS, llama3 adds BOS, others add nothing).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/untrusted.hpp"
#include "model/gguf.hpp"
#include "specd/error.hpp"
#include "tokenizer/tokenizer_impl.hpp"

namespace specd::tokenizer {

namespace {

using model::gguf::File;
using model::gguf::Value;
using model::gguf::ValueType;
using nlohmann::json;

// llama_token_type.
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

constexpr const char* kSpaceMarker = "\xE2\x96\x81";  // U+2581

// The longest token accepted (bytes). Real vocabularies stay far below (Llama 2's longest token
// is 16 bytes, Gemma's runs of spaces 31, byte-level BPE vocabularies' longest about 256); the
// bound keeps the SentencePiece merge derivation below (every cut of every token is looked up)
// within kMaxTokenBytes times the vocabulary's bytes.
constexpr size_t kMaxTokenBytes = 1024;
// The most tokens and merges accepted: twice and seven times the largest real vocabularies
// (Gemma 3's 262,144 tokens, Llama 3's 280,147 merges). The tokenizer built from a vocabulary
// takes a few hundred bytes per token; a million tokens took 550 MB.
constexpr size_t kMaxTokens = size_t{1} << 19;
constexpr size_t kMaxMerges = size_t{2} << 20;

// Split patterns (Oniguruma syntax, as tokenizer.json writes them), applied in sequence.
constexpr const char* kLlama3Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Split =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kGpt2Words = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* kCjk = "[\xE4\xB8\x80-\xE9\xBE\xA5\xE0\xA0\x80-\xE4\xB8\x80\xEA\xB0\x80-\xED\x9F\xBF]+";

struct PreTokenizer {
  std::vector<const char*> names;  // tokenizer.ggml.pre values
  std::vector<const char*> splits;
  bool byte_level_regex = false;  // ByteLevel with the GPT-2 regex instead of Splits
  bool nfc = false;
  bool ignore_merges = false;
  bool clean_spaces = true;
  bool add_bos = false;
};

const std::vector<PreTokenizer>& pre_tokenizers() {
  static const std::vector<PreTokenizer> kPre = {
      {{"default"},
       {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Words, R"(\p{N}+)", "[0-9][0-9][0-9]"},
       false,
       false,
       false,
       true,
       false},
      {{"llama3", "llama-v3", "llama-bpe"}, {kLlama3Split}, false, false, true, true, true},
      {{"qwen2", "deepseek-r1-qwen"}, {kQwen2Split}, false, true, false, false, false},
      {{"deepseek-llm"},
       {"[\\r\\n]",
        "\\s?[A-Za-z\xC2\xB5\xC3\x80-\xC3\x96\xC3\x98-\xC3\xB6\xC3\xB8-\xC6\xBA\xC6\xBC-\xC6\xBF\xC7\x84-\xCA\x93"
        "\xCA\x95-\xCA\xAF\xCD\xB0-\xCD\xB3\xCD\xB6\xCD\xB7\xCD\xBB-\xCD\xBD\xCD\xBF\xCE\x86\xCE\x88-\xCE\x8A\xCE\x8C"
        "\xCE\x8E-\xCE\xA1\xCE\xA3-\xCF\xB5\xCF\xB7-\xD2\x81\xD2\x8A-\xD4\xAF\xD4\xB1-\xD5\x96\xE1\x82\xA0-\xE1\x83\x85"
        "\xE1\x8E\xA0-\xE1\x8F\xB5\xE1\x8F\xB8-\xE1\x8F\xBD\xE1\xB2\x90-\xE1\xB2\xBA\xE1\xB2\xBD-\xE1\xB2\xBF"
        "\xE1\xB4\x80-\xE1\xB4\xAB\xE1\xB5\xAB-\xE1\xB5\xB7\xE1\xB5\xB9-\xE1\xB6\x9A\xE1\xB8\x80-\xE1\xBC\x95"
        "\xE1\xBC\x98-\xE1\xBC\x9D\xE1\xBC\xA0-\xE1\xBD\x85\xE1\xBD\x88-\xE1\xBD\x8D\xE1\xBD\x90-\xE1\xBD\x97"
        "\xE1\xBD\x99\xE1\xBD\x9B\xE1\xBD\x9D\xE1\xBD\x9F-\xE1\xBD\xBD\xE1\xBE\x80-\xE1\xBE\xB4\xE1\xBE\xB6-"
        "\xE1\xBE\xBC"
        "\xE1\xBE\xBE\xE1\xBF\x82-\xE1\xBF\x84\xE1\xBF\x86-\xE1\xBF\x8C\xE1\xBF\x90-\xE1\xBF\x93\xE1\xBF\x96-"
        "\xE1\xBF\x9B"
        "\xE1\xBF\xA0-\xE1\xBF\xAC\xE1\xBF\xB2-\xE1\xBF\xB4\xE1\xBF\xB6-\xE1\xBF\xBC\xE2\x84\x82\xE2\x84\x87"
        "\xE2\x84\x8A-\xE2\x84\x93\xE2\x84\x95\xE2\x84\x99-\xE2\x84\x9D\xE2\x84\xA4\xE2\x84\xA6\xE2\x84\xA8"
        "\xE2\x84\xAA-\xE2\x84\xAD\xE2\x84\xAF-\xE2\x84\xB4\xE2\x84\xB9\xE2\x84\xBC-\xE2\x84\xBF\xE2\x85\x85-"
        "\xE2\x85\x89"
        "\xE2\x85\x8E\xE2\x86\x83\xE2\x86\x84\xE2\xB0\x80-\xE2\xB1\xBB\xE2\xB1\xBE-\xE2\xB3\xA4\xE2\xB3\xAB-"
        "\xE2\xB3\xAE"
        "\xE2\xB3\xB2\xE2\xB3\xB3\xEA\x99\x80-\xEA\x99\xAD\xEA\x9A\x80-\xEA\x9A\x9B\xEA\x9C\xA2-\xEA\x9D\xAF"
        "\xEA\x9D\xB1-\xEA\x9E\x87\xEA\x9E\x8B-\xEA\x9E\x8E\xEA\xAD\xB0-\xEA\xAE\xBF\xEF\xAC\x80-\xEF\xAC\x86"
        "\xEF\xAC\x93-\xEF\xAC\x97\xEF\xBC\xA1-\xEF\xBC\xBA\xEF\xBD\x81-\xEF\xBD\x9A\xF0\x90\x90\x80-\xF0\x90\x91\x8F"
        "\xF0\x90\x92\xB0-\xF0\x90\x93\x93\xF0\x90\x93\x98-\xF0\x90\x93\xBB\xF0\x90\xB2\x80-\xF0\x90\xB2\xB2"
        "\xF0\x90\xB3\x80-\xF0\x90\xB3\xB2\xF0\x91\xA2\xA0-\xF0\x91\xA3\x9F\xF0\x9E\xA4\x80-\xF0\x9E\xA5\x83]+",
        "\\s?[!-/"
        ":-~\xEF\xBC\x81-\xEF\xBC\x8F\xEF\xBC\x9A-\xEF\xBD\x9E\xE2\x80\x98-\xE2\x80\x9F\xE3\x80\x80-\xE3\x80\x82]+",
        "\\s+$", kCjk, "\\p{N}+"},
       false,
       false,
       false,
       false,
       false},
      {{"deepseek-coder"},
       {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"},
       false,
       false,
       false,
       false,
       false},
      {{"gpt-2"}, {}, true, false, false, true, false},
  };
  return kPre;
}

std::string pre_names() {
  std::string names;
  for (const PreTokenizer& p : pre_tokenizers())
    for (const char* n : p.names) names += std::string(names.empty() ? "" : ", ") + n;
  return names;
}

// The token strings and types, checked to have one entry per token.
struct TokenList {
  std::vector<std::string_view> text;
  std::vector<int64_t> type;
};

TokenList token_list(const File& f) {
  const Value* tokens = f.array("tokenizer.ggml.tokens", ValueType::kString);
  if (tokens == nullptr) f.fail("missing metadata key 'tokenizer.ggml.tokens'");
  if (tokens->count > kMaxTokens)
    f.fail("tokenizer.ggml.tokens holds " + std::to_string(tokens->count) + " tokens; more than " +
           std::to_string(kMaxTokens) + " are refused (twice the largest real vocabulary)");
  TokenList list;
  list.text.reserve(tokens->count);
  for (uint64_t i = 0; i < tokens->count; ++i) {
    list.text.push_back(f.string_at(*tokens, i, "tokenizer.ggml.tokens"));
    if (list.text.back().size() > kMaxTokenBytes)
      f.fail("tokenizer.ggml.tokens[" + std::to_string(i) + "] is " + std::to_string(list.text.back().size()) +
             " bytes long; tokens longer than " + std::to_string(kMaxTokenBytes) +
             " bytes are refused (no real vocabulary has one)");
  }
  list.type.assign(list.text.size(), kNormal);
  if (const Value* types = f.array("tokenizer.ggml.token_type", ValueType::kInt64)) {
    if (types->count != tokens->count) {
      f.fail("tokenizer.ggml.token_type holds " + std::to_string(types->count) + " entries for " +
             std::to_string(tokens->count) + " tokens");
    }
    for (uint64_t i = 0; i < types->count; ++i) list.type[i] = f.integer_at(*types, i, "tokenizer.ggml.token_type");
  }
  return list;
}

std::optional<int64_t> special_id(const File& f, const char* key, const TokenList& t) {
  const std::optional<int64_t> id = f.integer(key);
  if (!id) return std::nullopt;
  if (*id < 0 || *id >= static_cast<int64_t>(t.text.size())) {
    // llama.cpp writes -1 style "none" ids as out-of-range values in some files.
    return std::nullopt;
  }
  return id;
}

bool is_added(int64_t type) {
  return type == kControl || type == kUnknown || type == kUserDefined;
}

json added_tokens(const TokenList& t) {
  json added = json::array();
  for (size_t id = 0; id < t.text.size(); ++id) {
    if (!is_added(t.type[id]) || t.text[id].empty()) continue;
    added.push_back({{"id", id},
                     {"content", t.text[id]},
                     {"special", t.type[id] != kUserDefined},
                     {"normalized", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"single_word", false}});
  }
  return added;
}

// Every split of a token into two vocab tokens, ordered as Hugging Face's SentencePiece
// converter orders them (see the top of the file), as packed (left, right, token) id triples in
// a JSON binary value (BpeModel::read_merge_ids): 12 bytes a merge, where strings would take the
// token's length twice, which grows with the square of the length over a token's cuts.
json spm_merges(const File& f, const TokenList& t, const std::unordered_map<std::string_view, int64_t>& vocab) {
  const Value* scores = f.array("tokenizer.ggml.scores", ValueType::kFloat64);
  if (scores != nullptr && scores->count != t.text.size()) {
    f.fail("tokenizer.ggml.scores holds " + std::to_string(scores->count) + " entries for " +
           std::to_string(t.text.size()) + " tokens");
  }
  struct Merge {
    double score;
    int32_t id, left, right, result;  // result: the vocab's id of the token's text (duplicates: the last)
  };
  // Each token's splits into two vocab tokens: counted first, so that a vocabulary with too many
  // is refused before they are held (chains like 'z'..'z'x1024 have every cut).
  auto for_each_split = [&](auto on_split) {
    for (size_t id = 0; id < t.text.size(); ++id) {
      if (t.type[id] == kUnused) continue;
      const std::string_view text = t.text[id];
      for (size_t cut = 1; cut < text.size(); ++cut) {
        if ((static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) continue;  // inside a code point
        const auto l = vocab.find(text.substr(0, cut));
        if (l == vocab.end()) continue;
        const auto r = vocab.find(text.substr(cut));
        if (r != vocab.end()) on_split(id, text, l->second, r->second);
      }
    }
  };
  size_t count = 0;
  for_each_split([&](size_t, std::string_view, int64_t, int64_t) { ++count; });
  if (count > kMaxMerges)
    f.fail("the tokens split into two tokens in " + std::to_string(count) + " ways; more than " +
           std::to_string(kMaxMerges) + " merges are refused (seven times the most a real vocabulary has)");
  std::vector<Merge> merges;
  merges.reserve(count);
  for_each_split([&](size_t id, std::string_view text, int64_t left, int64_t right) {
    const double score = scores != nullptr ? f.real_at(*scores, id, "tokenizer.ggml.scores") : 0.0;
    merges.push_back({score, static_cast<int32_t>(id), static_cast<int32_t>(left), static_cast<int32_t>(right),
                      static_cast<int32_t>(vocab.at(text))});
  });
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.id != b.id) return a.id < b.id;
    return a.left != b.left ? a.left < b.left : a.right < b.right;
  });
  json::binary_t packed;
  packed.resize(merges.size() * 3 * sizeof(int32_t));
  for (size_t i = 0; i < merges.size(); ++i) {
    const int32_t ids[3] = {merges[i].left, merges[i].right, merges[i].result};
    std::memcpy(packed.data() + i * sizeof(ids), ids, sizeof(ids));
  }
  return json::binary(std::move(packed));
}

// tokenizer.ggml.merges ("left right" strings) as packed (left, right, merged) id triples, read
// as BpeModel::read_merges reads strings (the text after a second space is ignored; every token
// must be in the vocab): 12 bytes a merge instead of a JSON string each (a million merges took
// 180 MB as strings).
json packed_merges(const File& f, const std::unordered_map<std::string_view, int64_t>& ids) {
  json::binary_t packed;
  const Value* m = f.array("tokenizer.ggml.merges", ValueType::kString);
  if (m == nullptr) return json::binary(std::move(packed));
  if (m->count > kMaxMerges)
    f.fail("tokenizer.ggml.merges holds " + std::to_string(m->count) + " merges; more than " +
           std::to_string(kMaxMerges) + " are refused (seven times the most a real vocabulary has)");
  packed.resize(m->count * 3 * sizeof(int32_t));
  std::string joined;
  for (uint64_t i = 0; i < m->count; ++i) {
    const std::string_view text = f.string_at(*m, i, "tokenizer.ggml.merges");
    const size_t space = text.find(' ');
    const std::string where = "tokenizer.ggml.merges[" + std::to_string(i) + "] '" + clip(text) + "'";
    if (space == std::string_view::npos) f.fail(where + " is not two tokens separated by a space");
    const std::string_view left = text.substr(0, space);
    const std::string_view right = text.substr(space + 1, text.find(' ', space + 1) - space - 1);
    joined.assign(left);
    joined += right;
    const auto l = ids.find(left), r = ids.find(right), j = ids.find(joined);
    if (l == ids.end() || r == ids.end() || j == ids.end()) f.fail(where + " uses a token that is not in the vocab");
    const int32_t triple[3] = {static_cast<int32_t>(l->second), static_cast<int32_t>(r->second),
                               static_cast<int32_t>(j->second)};
    std::memcpy(packed.data() + i * sizeof(triple), triple, sizeof(triple));
  }
  return json::binary(std::move(packed));
}

json template_processing(const TokenList& t, std::optional<int64_t> bos, std::optional<int64_t> eos, bool add_bos,
                         bool add_eos) {
  json single = json::array();
  json specials = json::object();
  auto special = [&](int64_t id) {
    const std::string text(t.text[static_cast<size_t>(id)]);
    single.push_back({{"SpecialToken", {{"id", text}, {"type_id", 0}}}});
    specials[text] = {{"id", text}, {"ids", {id}}, {"tokens", {text}}};
  };
  if (add_bos && bos) special(*bos);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (add_eos && eos) special(*eos);
  return {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", specials}};
}

json replace(const char* from, const char* to) {
  return {{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
}

// SentencePiece BPE (tokenizer.ggml.model "llama").
void spm(const File& f, const TokenList& t, json& root, json& config, bool& add_bos, bool& add_eos) {
  std::unordered_map<std::string_view, int64_t> vocab;
  for (size_t id = 0; id < t.text.size(); ++id)
    if (t.type[id] != kUnused) vocab[t.text[id]] = static_cast<int64_t>(id);
  json merges = spm_merges(f, t, vocab);  // refused before the JSON vocab is built when too many
  json vocab_json = json::object();
  for (size_t id = 0; id < t.text.size(); ++id)
    if (t.type[id] != kUnused) vocab_json[std::string(t.text[id])] = id;
  json model = {{"type", "BPE"},
                {"vocab", std::move(vocab_json)},
                {"merges", std::move(merges)},
                {"fuse_unk", true},
                {"byte_fallback", true}};
  if (const auto unk = special_id(f, "tokenizer.ggml.unknown_token_id", t)) model["unk_token"] = t.text[*unk];
  root["model"] = std::move(model);
  const bool prefix = f.boolean("tokenizer.ggml.add_space_prefix").value_or(true);
  json normalizers = json::array();
  if (prefix) normalizers.push_back({{"type", "Prepend"}, {"prepend", kSpaceMarker}});
  normalizers.push_back(replace(" ", kSpaceMarker));
  root["normalizer"] = {{"type", "Sequence"}, {"normalizers", normalizers}};
  json decoders = json::array({replace(kSpaceMarker, " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}});
  if (prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  root["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
  config["clean_up_tokenization_spaces"] = false;
  add_bos = true;
  add_eos = false;
}

// Byte-level BPE (tokenizer.ggml.model "gpt2").
void byte_level_bpe(const File& f, const TokenList& t, json& root, json& config, bool& add_bos, bool& add_eos) {
  const std::string pre(f.string("tokenizer.ggml.pre").value_or("default"));
  const auto& all = pre_tokenizers();
  const auto it = std::find_if(all.begin(), all.end(), [&](const PreTokenizer& p) {
    return std::find(p.names.begin(), p.names.end(), pre) != p.names.end();
  });
  if (it == all.end()) {
    f.fail("tokenizer.ggml.pre '" + pre.substr(0, 40) + "' is not a pre-tokenizer specd knows (" + pre_names() + ")",
           true);
  }
  json vocab = json::object();
  std::unordered_map<std::string_view, int64_t> ids;  // a duplicate token: the last id, as in `vocab`
  for (size_t id = 0; id < t.text.size(); ++id) {
    if (t.type[id] != kNormal && t.type[id] != kByte) continue;
    vocab[std::string(t.text[id])] = id;
    ids[t.text[id]] = static_cast<int64_t>(id);
  }
  root["model"] = {{"type", "BPE"},
                   {"vocab", std::move(vocab)},
                   {"merges", packed_merges(f, ids)},
                   {"ignore_merges", it->ignore_merges}};
  json parts = json::array();
  for (const char* split : it->splits)
    parts.push_back({{"type", "Split"}, {"pattern", {{"Regex", split}}}, {"behavior", "Isolated"}, {"invert", false}});
  parts.push_back({{"type", "ByteLevel"},
                   {"add_prefix_space", false},
                   {"trim_offsets", false},
                   {"use_regex", it->byte_level_regex}});
  root["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", parts}};
  if (it->nfc) root["normalizer"] = {{"type", "NFC"}};
  root["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  config["clean_up_tokenization_spaces"] = it->clean_spaces;
  add_bos = it->add_bos;
  add_eos = false;
}

}  // namespace

TokenizerDocuments gguf_tokenizer_documents(const File& f) {
  const std::string kind(f.require_string("tokenizer.ggml.model"));
  const TokenList t = token_list(f);
  TokenizerDocuments docs{json::object(), json::object()};
  bool add_bos = false, add_eos = false;
  if (kind == "llama") {
    spm(f, t, docs.tokenizer, docs.config, add_bos, add_eos);
  } else if (kind == "gpt2") {
    byte_level_bpe(f, t, docs.tokenizer, docs.config, add_bos, add_eos);
  } else {
    f.fail("tokenizer.ggml.model '" + kind.substr(0, 40) +
               "' is not supported (specd reads llama: SentencePiece BPE, and gpt2: byte-level BPE)",
           true);
  }
  docs.tokenizer["added_tokens"] = added_tokens(t);
  add_bos = f.boolean("tokenizer.ggml.add_bos_token").value_or(add_bos);
  add_eos = f.boolean("tokenizer.ggml.add_eos_token").value_or(add_eos);
  const std::optional<int64_t> bos = special_id(f, "tokenizer.ggml.bos_token_id", t);
  const std::optional<int64_t> eos = special_id(f, "tokenizer.ggml.eos_token_id", t);
  if (add_bos && !bos) f.fail("tokenizer.ggml.add_bos_token is true but there is no tokenizer.ggml.bos_token_id");
  if (add_eos && !eos) f.fail("tokenizer.ggml.add_eos_token is true but there is no tokenizer.ggml.eos_token_id");
  docs.tokenizer["post_processor"] = template_processing(t, bos, eos, add_bos, add_eos);
  if (bos) docs.config["bos_token"] = t.text[static_cast<size_t>(*bos)];
  if (eos) docs.config["eos_token"] = t.text[static_cast<size_t>(*eos)];
  if (const std::optional<std::string_view> tmpl = f.string("tokenizer.chat_template"))
    docs.config["chat_template"] = *tmpl;
  return docs;
}

}  // namespace specd::tokenizer

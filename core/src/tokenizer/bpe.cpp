// The BPE model: merges applied lowest rank first, ties to the leftmost pair, with a binary
// heap over a linked list of symbols — O(n log n) in the length of a word, so a 100 kB word
// without spaces is as cheap per byte as ordinary text.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/untrusted.hpp"
#include "specd/error.hpp"
#include "tokenizer/components.hpp"

namespace specd::tokenizer::detail {

namespace {
constexpr char32_t kSmallChars = 0x10000;
constexpr int32_t kUnknown = -1;  // a character that is not in the vocab

std::atomic<uint64_t> next_serial{1};

// Per-thread direct-mapped cache of short words -> ids: text repeats its words, and a cache
// per thread needs no locking (encode is called concurrently).
struct WordCache {
  static constexpr size_t kSlots = 8192;
  static constexpr size_t kMaxWord = 48;
  struct Slot {
    uint64_t serial = 0;
    std::string word;
    std::vector<int32_t> ids;
  };
  std::vector<Slot> slots{kSlots};
};

WordCache& word_cache() {
  thread_local WordCache cache;
  return cache;
}

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

// Fibonacci hashing: the top bits of the product mix every bit of the key.
size_t slot_of(uint64_t key, size_t mask) {
  const uint64_t h = key * 0x9E3779B97F4A7C15ull;
  return static_cast<size_t>(h ^ (h >> 29) ^ (h >> 47)) & mask;
}
}  // namespace

const BpeModel::Merge* BpeModel::find_merge(int32_t left, int32_t right) const {
  const uint64_t key = pair_key(left, right);
  const size_t mask = merges_.size() - 1;
  for (size_t i = slot_of(key, mask);; i = (i + 1) & mask) {
    const Merge& m = merges_[i];
    if (m.key == key) return &m;
    if (m.key == kEmptyKey) return nullptr;
  }
}

void BpeModel::add_merge(int32_t left, int32_t right, uint32_t rank, int32_t result) {
  const uint64_t key = pair_key(left, right);
  const size_t mask = merges_.size() - 1;
  for (size_t i = slot_of(key, mask);; i = (i + 1) & mask) {
    Merge& m = merges_[i];
    if (m.key == key || m.key == kEmptyKey) {
      m = Merge{key, rank, result};  // a pair listed twice keeps its last rank
      return;
    }
  }
}

struct BpeModel::Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  uint32_t begin;   // bytes of the character in the word (for byte fallback)
  uint32_t length;  // 0: merged into the symbol before it
};

BpeModel::BpeModel(const nlohmann::json& config, const std::string& file) : serial_(next_serial++) {
  const std::string where = file + ": model";
  read_vocab(config, where);
  read_options(config, where);
  index_single_symbols();
  read_merges(config, where);
}

void BpeModel::read_vocab(const nlohmann::json& config, const std::string& where) {
  const auto vocab_it = config.find("vocab");
  if (vocab_it == config.end() || !vocab_it->is_object())
    throw Error(ErrorCode::kModelFormat, where + ": BPE 'vocab' must be an object of token -> id");
  vocab_.reserve(vocab_it->size());
  for (const auto& [token, id] : vocab_it->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      throw Error(ErrorCode::kModelFormat, where + ": vocab id of '" + clip(token) + "' is not a non-negative int32");
    vocab_[token] = static_cast<int32_t>(id.get<int64_t>());
  }
}

void BpeModel::read_options(const nlohmann::json& config, const std::string& where) {
  auto optional_string = [&](const char* key) {
    const auto it = config.find(key);
    return it != config.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  continuing_subword_prefix_ = optional_string("continuing_subword_prefix");
  end_of_word_suffix_ = optional_string("end_of_word_suffix");
  if (!optional_string("continuing_subword_suffix").empty())
    throw Error(ErrorCode::kUnsupported, where + ": 'continuing_subword_suffix' is not supported");
  if (const auto it = config.find("dropout"); it != config.end() && !it->is_null() && it->get<double>() > 0.0)
    throw Error(ErrorCode::kUnsupported,
                where + ": BPE dropout is not supported (inference tokenizers set it to null)");
  fuse_unk_ = config.value("fuse_unk", false);
  byte_fallback_ = config.value("byte_fallback", false);
  ignore_merges_ = config.value("ignore_merges", false);
  if (const std::string unk = optional_string("unk_token"); !unk.empty()) {
    if (const auto it = vocab_.find(unk); it != vocab_.end())
      unk_id_ = it->second;
    else
      unk_token_ = unk;
  }
}

// The byte tokens <0xNN> (byte_fallback) and the ids of single characters, looked up per
// character by merge_word without hashing.
void BpeModel::index_single_symbols() {
  all_byte_ids_ = true;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const auto it = vocab_.find(std::string_view(name));
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
    all_byte_ids_ = all_byte_ids_ && byte_ids_[b] >= 0;
  }

  for (const auto& entry : vocab_) max_token_bytes_ = std::max(max_token_bytes_, entry.first.size());
  small_char_ids_.assign(kSmallChars, -1);
  if (continuing_subword_prefix_.empty() && end_of_word_suffix_.empty()) {
    for (const auto& [token, id] : vocab_) {
      if (token.empty() || !is_valid_utf8(token)) continue;
      size_t pos = 0;
      const char32_t cp = next_code_point(token, pos);
      if (pos == token.size() && cp < kSmallChars) small_char_ids_[cp] = id;
    }
  }
}

void BpeModel::read_merges(const nlohmann::json& config, const std::string& where) {
  const auto merges_it = config.find("merges");
  if (merges_it == config.end() || (!merges_it->is_array() && !merges_it->is_binary()))
    throw Error(ErrorCode::kModelFormat, where + ": BPE 'merges' must be an array");
  if (merges_it != config.end() && merges_it->is_binary()) return read_merge_ids(merges_it->get_binary(), where);
  size_t capacity = 16;
  while (capacity < merges_it->size() * 2) capacity *= 2;
  merges_.assign(capacity, Merge{kEmptyKey, 0, 0});
  uint32_t rank = 0;
  for (const auto& merge : *merges_it) {
    std::string left, right;
    if (merge.is_string()) {
      const auto& text = merge.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos)
        throw Error(ErrorCode::kModelFormat,
                    where + ": merge '" + clip(text) + "' is not two tokens separated by a space");
      left = text.substr(0, space);
      right = text.substr(space + 1, text.find(' ', space + 1) - space - 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      throw Error(ErrorCode::kModelFormat,
                  where + ": merge #" + std::to_string(rank) + " is neither \"a b\" nor [\"a\", \"b\"]");
    }
    std::string joined = left;
    joined += std::string_view(right).substr(!continuing_subword_prefix_.empty() &&
                                                     right.starts_with(continuing_subword_prefix_)
                                                 ? continuing_subword_prefix_.size()
                                                 : 0);
    const auto l = vocab_.find(left), r = vocab_.find(right), j = vocab_.find(joined);
    if (l == vocab_.end() || r == vocab_.end() || j == vocab_.end())
      throw Error(ErrorCode::kModelFormat, where + ": merge #" + std::to_string(rank) + " ('" + clip(left) + "', '" +
                                               clip(right) + "') uses a token that is not in the vocab");
    // A pair listed twice keeps its last rank, as the official implementations do.
    add_merge(l->second, r->second, rank, j->second);
    rank_pairs_.push_back(pair_key(l->second, r->second));
    rank_results_.push_back(j->second);
    ++rank;
  }
}

// Merges as packed (left, right, result) int32 id triples in rank order: what the GGUF
// converter writes for SentencePiece vocabularies (a JSON binary value, which no JSON text can
// hold), 12 bytes a merge instead of two strings.
void BpeModel::read_merge_ids(const std::vector<uint8_t>& packed, const std::string& where) {
  constexpr size_t kTriple = 3 * sizeof(int32_t);
  if (packed.size() % kTriple != 0)
    throw Error(ErrorCode::kModelFormat, where + ": packed merges are not whole id triples");
  const size_t count = packed.size() / kTriple;
  rank_pairs_.reserve(count);
  rank_results_.reserve(count);
  size_t capacity = 16;
  while (capacity < count * 2) capacity *= 2;
  merges_.assign(capacity, Merge{kEmptyKey, 0, 0});
  std::vector<bool> known;  // ids the vocab holds
  for (const auto& [token, id] : vocab_) {
    if (static_cast<size_t>(id) >= known.size()) known.resize(static_cast<size_t>(id) + 1, false);
    known[static_cast<size_t>(id)] = true;
  }
  for (size_t i = 0; i < count; ++i) {
    int32_t ids[3];
    std::memcpy(ids, packed.data() + i * kTriple, kTriple);
    for (const int32_t id : ids)
      if (id < 0 || static_cast<size_t>(id) >= known.size() || !known[static_cast<size_t>(id)])
        throw Error(ErrorCode::kModelFormat,
                    where + ": merge #" + std::to_string(i) + " uses id " + std::to_string(id) + ", not in the vocab");
    add_merge(ids[0], ids[1], static_cast<uint32_t>(i), ids[2]);
    rank_pairs_.push_back(pair_key(ids[0], ids[1]));
    rank_results_.push_back(ids[2]);
  }
}

BpeModel::~BpeModel() = default;

void BpeModel::resolve_unk(const Vocab& added_tokens) {
  if (unk_id_ || unk_token_.empty()) return;
  if (const auto it = added_tokens.find(unk_token_); it != added_tokens.end()) unk_id_ = it->second;
}

int32_t BpeModel::symbol_id(std::string_view piece) const {
  const auto it = vocab_.find(piece);
  return it == vocab_.end() ? kUnknown : it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (const auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  WordCache::Slot* slot = nullptr;
  if (word.size() <= WordCache::kMaxWord) {
    slot = &word_cache().slots[std::hash<std::string_view>{}(word) % WordCache::kSlots];
    if (slot->serial == serial_ && slot->word == word) {
      out.insert(out.end(), slot->ids.begin(), slot->ids.end());
      return;
    }
  }
  const size_t first = out.size();
  merge_word(word, out);
  if (slot != nullptr) {
    slot->serial = serial_;
    slot->word.assign(word);
    slot->ids.assign(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  }
}

// The id of the character at [begin, pos) of `word` as a symbol (with the affixes where the model
// has them), or kUnknown. scratch: a buffer for the affixed form.
int32_t BpeModel::char_symbol(std::string_view word, size_t begin, size_t pos, char32_t cp,
                              std::string& scratch) const {
  const bool affixes = !continuing_subword_prefix_.empty() || !end_of_word_suffix_.empty();
  if (!affixes && cp < kSmallChars) return small_char_ids_[cp];
  if (!affixes) return symbol_id(word.substr(begin, pos - begin));
  scratch.clear();
  if (begin > 0) scratch += continuing_subword_prefix_;
  scratch.append(word.substr(begin, pos - begin));
  if (pos == word.size()) scratch += end_of_word_suffix_;
  return symbol_id(scratch);
}

size_t BpeModel::min_tokens(std::string_view word) const {
  std::string scratch;
  size_t known = 0;
  for (size_t pos = 0; pos < word.size();) {
    const size_t begin = pos;
    const char32_t cp = next_code_point(word, pos);
    if (char_symbol(word, begin, pos, cp, scratch) >= 0) known += pos - begin;
  }
  return known / max_token_bytes_;
}

size_t BpeModel::known_ascii_bytes(std::string_view text) const {
  if (!continuing_subword_prefix_.empty() || !end_of_word_suffix_.empty()) return 0;
  size_t known = 0;
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    known += b > 0x20 && b < 0x7F && small_char_ids_[b] >= 0;
  }
  return known;
}

// The word's characters as symbols (with continuing_subword_prefix / end_of_word_suffix where the
// model has them), linked in order.
void BpeModel::split_symbols(std::string_view word, std::vector<Symbol>& symbols) const {
  thread_local std::string scratch;
  symbols.clear();
  // One symbol per character: reserved exactly (a long word would otherwise hold up to twice its
  // symbols while the vector grows).
  symbols.reserve(static_cast<size_t>(
      std::count_if(word.begin(), word.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; })));
  for (size_t pos = 0; pos < word.size();) {
    const size_t begin = pos;
    const char32_t cp = next_code_point(word, pos);
    const int32_t id = char_symbol(word, begin, pos, cp, scratch);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, static_cast<uint32_t>(begin), static_cast<uint32_t>(pos - begin)});
  }
  symbols.back().next = -1;
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  split_symbols(word, symbols);

  // Candidates are (rank << 32 | position of the left symbol): the smallest is the lowest rank,
  // ties to the leftmost pair. 8-byte entries keep the heap of a long word cache-friendly.
  thread_local std::vector<uint64_t> heap;
  heap.clear();
  const std::greater<uint64_t> later;  // min-heap
  auto candidate = [&](int32_t pos) -> std::optional<uint64_t> {
    const int32_t next = symbols[pos].next;
    if (next < 0) return std::nullopt;
    const int32_t left = symbols[pos].id, right = symbols[next].id;
    if (left < 0 || right < 0) return std::nullopt;
    const Merge* merge = find_merge(left, right);
    if (merge == nullptr) return std::nullopt;
    return (static_cast<uint64_t>(merge->rank) << 32) | static_cast<uint32_t>(pos);
  };
  heap.reserve(symbols.size());
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i)
    if (const auto c = candidate(i)) heap.push_back(*c);
  std::make_heap(heap.begin(), heap.end(), later);
  auto consider = [&](int32_t pos) {
    if (const auto c = candidate(pos)) {
      heap.push_back(*c);
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const uint64_t top = heap.back();
    heap.pop_back();
    const auto rank = static_cast<uint32_t>(top >> 32);
    const auto pos = static_cast<int32_t>(top & 0xFFFFFFFFu);
    Symbol& sym = symbols[pos];
    // Stale entries: the pair at pos changed since it was queued. A rank names exactly one
    // pair, so the pair is current iff it is still the pair of that rank.
    if (sym.length == 0 || sym.next < 0 || rank_pairs_[rank] != pair_key(sym.id, symbols[sym.next].id)) continue;
    Symbol& nxt = symbols[sym.next];
    sym.id = rank_results_[rank];
    sym.length += nxt.length;
    nxt.length = 0;
    sym.next = nxt.next;
    if (sym.next >= 0) symbols[sym.next].prev = pos;
    if (sym.prev >= 0) consider(sym.prev);
    consider(pos);
  }
  emit_symbols(word, symbols, out);
  // The buffers are kept per thread for the next word, but not the memory of a huge one.
  constexpr size_t kKeepSymbols = size_t{1} << 16;
  if (symbols.capacity() > kKeepSymbols) std::vector<Symbol>().swap(symbols);
  if (heap.capacity() > kKeepSymbols) std::vector<uint64_t>().swap(heap);
}

// The merged symbols' ids; a symbol with no id falls back to its bytes (byte_fallback) or unk.
void BpeModel::emit_symbols(std::string_view word, const std::vector<Symbol>& symbols,
                            std::vector<int32_t>& out) const {
  for (int32_t i = 0; i >= 0; i = symbols[i].next) {
    const Symbol& sym = symbols[i];
    if (sym.id >= 0) {
      out.push_back(sym.id);
      continue;
    }
    bool fell_back = false;
    if (byte_fallback_) {
      bool all = true;
      for (uint32_t k = 0; k < sym.length; ++k)
        all = all && byte_ids_[static_cast<unsigned char>(word[sym.begin + k])] >= 0;
      if (all) {
        for (uint32_t k = 0; k < sym.length; ++k)
          out.push_back(byte_ids_[static_cast<unsigned char>(word[sym.begin + k])]);
        fell_back = true;
      }
    }
    if (!fell_back && unk_id_) out.push_back(*unk_id_);
  }
}

}  // namespace specd::tokenizer::detail

// Decoders: turn the token strings of a sequence back into text, as tokenizer.json declares.
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/untrusted.hpp"
#include "specd/error.hpp"
#include "tokenizer/components.hpp"

namespace specd::tokenizer::detail {

namespace {

class ByteLevel final : public Decoder {
 public:
  // Byte-level characters back to bytes, then UTF-8 with replacement. Added tokens (known to the
  // top-level decoder only) are text already and pass through, ending the byte run before them.
  void decode_chain(std::vector<std::string>& tokens, const std::vector<char>* added) const override {
    std::vector<std::string> out;
    std::string bytes;
    auto flush = [&] {
      if (!bytes.empty()) out.push_back(utf8_lossy(bytes));
      bytes.clear();
    };
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::string& token = tokens[i];
      if (added != nullptr && (*added)[i]) {
        flush();
        out.push_back(token);
        continue;
      }
      const size_t mark = bytes.size();
      bool mapped = true;
      for (size_t pos = 0; pos < token.size();) {
        const int b = unicode_to_byte(next_code_point(token, pos));
        if (b < 0) {
          mapped = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
      }
      if (!mapped) {  // not a byte-level token: its own UTF-8 bytes
        bytes.resize(mark);
        bytes += token;
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class Metaspace final : public Decoder {
 public:
  Metaspace(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens, const std::vector<char>*) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& token = tokens[i];
      std::string out;
      out.reserve(token.size());
      for (size_t pos = 0; pos < token.size();) {
        if (token.compare(pos, replacement_.size(), replacement_) == 0) {
          out += ' ';
          pos += replacement_.size();
        } else {
          out += token[pos++];
        }
      }
      if (i == 0 && strip_first_ && out.starts_with(' ')) out.erase(0, 1);
      token = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

class ByteFallback final : public Decoder {
 public:
  // Runs of <0xHH> tokens are one byte string, decoded as UTF-8 with replacement.
  void decode_chain(std::vector<std::string>& tokens, const std::vector<char>*) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;
    bool in_run = false;
    for (auto& token : tokens) {
      int byte = -1;
      if (token.size() == 6 && token.starts_with("<0x") && token[5] == '>') {
        const int hi = hex_value(token[3]), lo = hex_value(token[4]);
        if (hi >= 0 && lo >= 0) byte = hi * 16 + lo;
      }
      if (byte >= 0) {
        run.push_back(static_cast<char>(byte));
        in_run = true;
        continue;
      }
      if (in_run) {
        out.push_back(utf8_lossy(run));
        run.clear();
        in_run = false;
      }
      out.push_back(std::move(token));
    }
    if (in_run) out.push_back(utf8_lossy(run));
    tokens = std::move(out);
  }
};

class Fuse final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, const std::vector<char>*) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.resize(1);
    tokens[0] = std::move(all);
  }
};

class Strip final : public Decoder {
 public:
  Strip(char32_t content, size_t start, size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens, const std::vector<char>*) const override {
    for (auto& token : tokens) {
      size_t begin = 0;
      for (size_t n = 0; n < start_ && begin < token.size(); ++n) {
        size_t pos = begin;
        // pos past the end: half a code point (token_bytes reads raw byte-fallback runs)
        if (next_code_point(token, pos) != content_ || pos > token.size()) break;
        begin = pos;
      }
      size_t end = token.size();
      for (size_t n = 0; n < stop_ && end > begin; ++n) {
        size_t start = end - 1;
        while (start > begin && (static_cast<unsigned char>(token[start]) & 0xC0) == 0x80) --start;
        size_t pos = start;
        if (next_code_point(token, pos) != content_ || pos > token.size()) break;
        end = start;
      }
      token = token.substr(begin, end - begin);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class Replace final : public Decoder {
 public:
  Replace(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens, const std::vector<char>*) const override {
    for (auto& token : tokens) token = pattern_->replace_all(token, content_);
  }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  // Only the top-level decoder knows which tokens are added tokens; the parts of a sequence
  // see plain strings.
  void decode_chain(std::vector<std::string>& tokens, const std::vector<char>*) const override {
    for (const auto& part : parts_) part->decode_chain(tokens, nullptr);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

// fused: whether a Fuse came earlier in the chain (the strings are then the whole text rather
// than one per token, which matters for streaming).
std::unique_ptr<Decoder> make(const nlohmann::json& config, const std::string& file, bool& fused, int depth) {
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string())
    throw Error(ErrorCode::kModelFormat, file + ": decoder must be an object with a \"type\"");
  const std::string type = clip(config["type"].get<std::string>());  // names it in errors
  const std::string where = file + ": decoder " + type;
  if (type == "ByteLevel") return std::make_unique<ByteLevel>();
  if (type == "Metaspace") {
    std::string replacement = config.value("replacement", std::string("\u2581"));
    if (replacement.empty()) throw Error(ErrorCode::kModelFormat, where + ": empty 'replacement'");
    bool strip_first = true;
    if (const auto it = config.find("prepend_scheme"); it != config.end() && it->is_string())
      strip_first = it->get<std::string>() != "never";
    else if (const auto legacy = config.find("add_prefix_space"); legacy != config.end() && legacy->is_boolean())
      strip_first = legacy->get<bool>();
    return std::make_unique<Metaspace>(replacement, strip_first);
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") {
    fused = true;
    return std::make_unique<Fuse>();
  }
  if (type == "Strip") {
    const std::string content = config.value("content", std::string(" "));
    size_t pos = 0;
    if (content.empty() || !is_valid_utf8(content) || (next_code_point(content, pos), pos != content.size()))
      throw Error(ErrorCode::kModelFormat, where + ": 'content' must be one character");
    pos = 0;
    const auto start = config.value("start", 0), stop = config.value("stop", 0);
    if (start < 0 || stop < 0) throw Error(ErrorCode::kModelFormat, where + ": 'start'/'stop' must be >= 0");
    return std::make_unique<Strip>(next_code_point(content, pos), static_cast<size_t>(start),
                                   static_cast<size_t>(stop));
  }
  if (type == "Replace") {
    if (!config.contains("pattern")) throw Error(ErrorCode::kModelFormat, where + ": missing 'pattern'");
    const auto& pattern = config["pattern"];
    if (fused) {
      // On the fused text a match can span two tokens; streaming would then have to take back
      // text it already emitted. One character cannot span tokens.
      const bool one_char = pattern.is_object() && pattern.contains("String") && pattern["String"].is_string() && [&] {
        const std::string s = pattern["String"].get<std::string>();
        size_t p = 0;
        return !s.empty() && is_valid_utf8(s) && (next_code_point(s, p), p == s.size());
      }();
      if (!one_char)
        throw Error(ErrorCode::kUnsupported, where +
                                                 ": a Replace after Fuse whose pattern can match more than one "
                                                 "character is not supported");
    }
    return std::make_unique<Replace>(make_pattern(pattern, where), config.value("content", std::string()));
  }
  if (type == "Sequence") {
    const auto it = config.find("decoders");
    if (it == config.end() || !it->is_array())
      throw Error(ErrorCode::kModelFormat, where + ": missing 'decoders' array");
    check_sequence_depth(depth, where);
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const auto& part : *it) parts.push_back(make(part, file, fused, depth + 1));
    return std::make_unique<Sequence>(std::move(parts));
  }
  throw Error(ErrorCode::kUnsupported,
              file + ": unsupported decoder type '" + type +
                  "' (supported: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence)");
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& config, const std::string& file) {
  if (config.is_null()) return nullptr;
  bool fused = false;
  return make(config, file, fused, 0);
}

std::string clean_up_tokenization(std::string_view text, std::vector<char>* keep) {
  if (keep) keep->assign(text.size(), 1);
  if (text.find(' ') == std::string_view::npos) return std::string(text);
  // The replacements run one after another over the whole string (JavaScript replaceAll /
  // Python str.replace), so a later pattern can match text an earlier one produced.
  struct Rule {
    std::string_view from;
    bool drop_trailing_space;  // " ' " -> "'" drops both spaces
  };
  static constexpr Rule kRules[] = {{" .", false},   {" ?", false},  {" !", false},  {" ,", false},   {" ' ", true},
                                    {" n't", false}, {" 'm", false}, {" 's", false}, {" 've", false}, {" 're", false}};
  std::string cur(text);
  std::vector<uint32_t> origin;  // input offset of each byte of cur, only when keep is wanted
  if (keep) {
    origin.resize(text.size());
    for (uint32_t i = 0; i < origin.size(); ++i) origin[i] = i;
  }
  std::string next;
  std::vector<uint32_t> next_origin;
  for (const auto& rule : kRules) {
    if (cur.find(rule.from) == std::string::npos) continue;
    next.clear();
    next_origin.clear();
    size_t i = 0;
    for (size_t at = cur.find(rule.from); at != std::string::npos; at = cur.find(rule.from, i)) {
      next.append(cur, i, at - i);
      if (keep)
        next_origin.insert(next_origin.end(), origin.begin() + static_cast<std::ptrdiff_t>(i),
                           origin.begin() + static_cast<std::ptrdiff_t>(at));
      // Keep all but the leading space (and, for " ' ", the trailing one).
      const size_t keep_len = rule.from.size() - 1 - (rule.drop_trailing_space ? 1 : 0);
      next.append(cur, at + 1, keep_len);
      if (keep)
        next_origin.insert(next_origin.end(), origin.begin() + static_cast<std::ptrdiff_t>(at + 1),
                           origin.begin() + static_cast<std::ptrdiff_t>(at + 1 + keep_len));
      i = at + rule.from.size();
    }
    next.append(cur, i, std::string::npos);
    if (keep) next_origin.insert(next_origin.end(), origin.begin() + static_cast<std::ptrdiff_t>(i), origin.end());
    cur.swap(next);
    origin.swap(next_origin);
  }
  if (keep) {
    keep->assign(text.size(), 0);
    for (const uint32_t o : origin) (*keep)[o] = 1;
  }
  return cur;
}

}  // namespace specd::tokenizer::detail

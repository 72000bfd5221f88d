// Pre-tokenizers: split normalized text into the words the model encodes one at a time.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/untrusted.hpp"
#include "specd/error.hpp"
#include "tokenizer/components.hpp"

namespace specd::tokenizer::detail {

namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Span {
  size_t begin, end;
  bool delim;
};

// Applies a split behaviour (the official semantics of SplitDelimiterBehavior) to the pieces of
// one pre-token and appends the non-empty results to out.
void apply_behavior(const PreToken& piece, std::vector<Span>& spans, Behavior behavior, std::vector<PreToken>& out) {
  std::vector<Span> merged;
  merged.reserve(spans.size());
  switch (behavior) {
    case Behavior::kRemoved:
      for (const auto& s : spans)
        if (!s.delim) merged.push_back(s);
      break;
    case Behavior::kIsolated:
      merged = spans;
      break;
    case Behavior::kMergedWithPrevious: {
      bool previous_delim = false;
      for (const auto& s : spans) {
        if (s.delim && !previous_delim && !merged.empty())
          merged.back().end = s.end;
        else
          merged.push_back(s);
        previous_delim = s.delim;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool previous_delim = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->delim && !previous_delim && !merged.empty())
          merged.back().begin = it->begin;
        else
          merged.push_back(*it);
        previous_delim = it->delim;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    }
    case Behavior::kContiguous: {
      bool previous_delim = false;
      for (const auto& s : spans) {
        if (s.delim == previous_delim && !merged.empty())
          merged.back().end = s.end;
        else
          merged.push_back(s);
        previous_delim = s.delim;
      }
      break;
    }
  }
  for (const auto& s : merged) {
    if (s.end == s.begin) continue;
    out.push_back({piece.text.substr(s.begin, s.end - s.begin), piece.at_origin && s.begin == 0});
  }
}

// Spans of text: the matches (delim = !invert) and the gaps between them (delim = invert).
void spans_from_matches(size_t length, const std::vector<std::pair<size_t, size_t>>& matches, bool invert,
                        std::vector<Span>& spans) {
  spans.clear();
  size_t prev = 0;
  for (const auto& [b, e] : matches) {
    if (b > prev) spans.push_back({prev, b, invert});
    spans.push_back({b, e, !invert});
    prev = e;
  }
  if (prev < length) spans.push_back({prev, length, invert});
}

Behavior parse_behavior(const nlohmann::json& config, const std::string& where) {
  const std::string b = config.value("behavior", std::string("Isolated"));
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  throw Error(ErrorCode::kUnsupported, where + ": unsupported split behavior '" + clip(b) + "'");
}

class Split final : public PreTokenizer {
 public:
  Split(std::unique_ptr<Regex> pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void split(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    out.reserve(pieces.size() * 2);
    std::vector<std::pair<size_t, size_t>> matches;
    std::vector<Span> spans;
    for (const auto& piece : pieces) {
      matches.clear();
      pattern_->find_all(piece.text, matches);
      spans_from_matches(piece.text.size(), matches, invert_, spans);
      apply_behavior(piece, spans, behavior_, out);
    }
    pieces = std::move(out);
  }
  bool may_remove() const override { return behavior_ == Behavior::kRemoved; }

 private:
  std::unique_ptr<Regex> pattern_;
  Behavior behavior_;
  bool invert_;
};

// GPT-2's pattern as the official implementation compiles it (a JavaScript /u regex, where \s
// also covers U+FEFF and not U+0085).
constexpr const char* kJsSpace =
    "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex, const std::string& where) : add_prefix_space_(add_prefix_space) {
    if (use_regex) {
      const std::string s = std::string("[") + kJsSpace + "]";
      const std::string not_s = std::string("[^") + kJsSpace + "]";
      const std::string pattern = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" + std::string(kJsSpace) +
                                  "\\p{L}\\p{N}]+|" + s + "+(?!" + not_s + ")|" + s + "+";
      regex_ = Regex::from_pcre2(pattern, where);
    }
  }
  void split(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    out.reserve(pieces.size());
    std::vector<std::pair<size_t, size_t>> matches;
    for (auto& piece : pieces) {
      if (add_prefix_space_ && !piece.text.starts_with(' ')) piece.text.insert(0, 1, ' ');
      if (!regex_) {
        out.push_back({map_bytes(piece.text), piece.at_origin});
        continue;
      }
      matches.clear();
      regex_->find_all(piece.text, matches);
      for (const auto& [b, e] : matches) {
        if (e == b) continue;
        out.push_back({map_bytes(std::string_view(piece.text).substr(b, e - b)), piece.at_origin && b == 0});
      }
    }
    pieces = std::move(out);
  }

 private:
  static std::string map_bytes(std::string_view text) {
    std::string out;
    out.reserve(text.size() * 2);
    for (const char c : text) out += byte_to_unicode(static_cast<unsigned char>(c));
    return out;
  }

  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

class Metaspace final : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  Metaspace(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split) {}
  void split(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    out.reserve(pieces.size());
    std::vector<Span> spans;
    for (const auto& piece : pieces) {
      PreToken replaced{{}, piece.at_origin};
      replaced.text.reserve(piece.text.size() + replacement_.size());
      for (const char c : piece.text) {
        if (c == ' ')
          replaced.text += replacement_;
        else
          replaced.text += c;
      }
      const bool prepend = prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && piece.at_origin);
      if (prepend && !replaced.text.starts_with(replacement_)) replaced.text.insert(0, replacement_);
      if (!split_) {
        if (!replaced.text.empty()) out.push_back(std::move(replaced));
        continue;
      }
      spans.clear();
      size_t prev = 0;
      for (size_t at = replaced.text.find(replacement_); at != std::string::npos;
           at = replaced.text.find(replacement_, at + replacement_.size())) {
        if (at > prev) spans.push_back({prev, at, false});
        spans.push_back({at, at + replacement_.size(), true});
        prev = at + replacement_.size();
      }
      if (prev < replaced.text.size()) spans.push_back({prev, replaced.text.size(), false});
      apply_behavior(replaced, spans, Behavior::kMergedWithNext, out);
    }
    pieces = std::move(out);
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
};

class Digits final : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual) {}
  void split(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    std::vector<Span> spans;
    for (const auto& piece : pieces) {
      spans.clear();
      for (size_t i = 0; i < piece.text.size(); ++i) {
        const bool digit = piece.text[i] >= '0' && piece.text[i] <= '9';
        if (!digit) {
          if (!spans.empty() && !spans.back().delim)
            spans.back().end = i + 1;
          else
            spans.push_back({i, i + 1, false});
        } else {
          spans.push_back({i, i + 1, true});
        }
      }
      apply_behavior(piece, spans, individual_ ? Behavior::kIsolated : Behavior::kContiguous, out);
    }
    pieces = std::move(out);
  }

 private:
  bool individual_;
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void split(std::vector<PreToken>& pieces) const override {
    for (const auto& part : parts_) part->split(pieces);
  }
  bool may_remove() const override {
    return std::any_of(parts_.begin(), parts_.end(), [](const auto& part) { return part->may_remove(); });
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& config, const std::string& file, int depth) {
  if (config.is_null()) return nullptr;
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string())
    throw Error(ErrorCode::kModelFormat, file + ": pre_tokenizer must be an object with a \"type\"");
  const std::string type = clip(config["type"].get<std::string>());  // names it in errors
  const std::string where = file + ": pre_tokenizer " + type;
  if (type == "Split") {
    if (!config.contains("pattern")) throw Error(ErrorCode::kModelFormat, where + ": missing 'pattern'");
    return std::make_unique<Split>(make_pattern(config["pattern"], where), parse_behavior(config, where),
                                   config.value("invert", false));
  }
  if (type == "ByteLevel")
    return std::make_unique<ByteLevel>(config.value("add_prefix_space", true), config.value("use_regex", true), where);
  if (type == "Metaspace") {
    std::string replacement = config.value("replacement", std::string("\u2581"));
    if (const auto it = config.find("str_rep");
        it != config.end() && it->is_string() && !it->get<std::string>().empty())
      replacement = it->get<std::string>();
    size_t pos = 0;
    if (replacement.empty() || !is_valid_utf8(replacement) ||
        (next_code_point(replacement, pos), pos != replacement.size()))
      throw Error(ErrorCode::kModelFormat, where + ": 'replacement' must be one character");
    auto prepend = Metaspace::Prepend::kAlways;
    if (const auto it = config.find("prepend_scheme"); it != config.end() && it->is_string()) {
      const std::string scheme = it->get<std::string>();
      if (scheme == "always")
        prepend = Metaspace::Prepend::kAlways;
      else if (scheme == "first")
        prepend = Metaspace::Prepend::kFirst;
      else if (scheme == "never")
        prepend = Metaspace::Prepend::kNever;
      else
        throw Error(ErrorCode::kUnsupported, where + ": unsupported prepend_scheme '" + clip(scheme) + "'");
    } else if (const auto legacy = config.find("add_prefix_space"); legacy != config.end() && legacy->is_boolean()) {
      prepend = legacy->get<bool>() ? Metaspace::Prepend::kAlways : Metaspace::Prepend::kNever;
    }
    return std::make_unique<Metaspace>(replacement, prepend, config.value("split", true));
  }
  if (type == "Digits") return std::make_unique<Digits>(config.value("individual_digits", false));
  if (type == "Sequence") {
    const auto it = config.find("pretokenizers");
    if (it == config.end() || !it->is_array())
      throw Error(ErrorCode::kModelFormat, where + ": missing 'pretokenizers' array");
    check_sequence_depth(depth, where);
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (const auto& part : *it)
      if (auto p = make_pre_tokenizer(part, file, depth + 1)) parts.push_back(std::move(p));
    return std::make_unique<Sequence>(std::move(parts));
  }
  throw Error(ErrorCode::kUnsupported, file + ": unsupported pre_tokenizer type '" + type +
                                           "' (supported: ByteLevel, Split, Metaspace, Digits, Sequence)");
}

}  // namespace specd::tokenizer::detail

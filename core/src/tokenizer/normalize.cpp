// Normalizers: Unicode forms via ICU, and the string edits tokenizer.json can declare.
#include <nlohmann/json.hpp>
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/untrusted.hpp"
#include "specd/error.hpp"
#include "tokenizer/components.hpp"

namespace specd::tokenizer::detail {

namespace {

bool is_ascii(std::string_view text) {
  for (const char c : text)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

std::string to_utf8(const icu::UnicodeString& s) {
  std::string out;
  s.toUTF8String(out);
  return out;
}

class UnicodeForm final : public Normalizer {
 public:
  UnicodeForm(const std::string& form, const std::string& file) {
    UErrorCode status = U_ZERO_ERROR;
    if (form == "NFC")
      norm_ = icu::Normalizer2::getNFCInstance(status);
    else if (form == "NFD")
      norm_ = icu::Normalizer2::getNFDInstance(status);
    else if (form == "NFKC")
      norm_ = icu::Normalizer2::getNFKCInstance(status);
    else
      norm_ = icu::Normalizer2::getNFKDInstance(status);
    if (U_FAILURE(status) || norm_ == nullptr)
      throw Error(ErrorCode::kInternal,
                  file + ": ICU cannot provide the " + form + " normalizer: " + u_errorName(status));
  }
  std::string normalize(std::string_view text) const override {
    if (is_ascii(text)) return std::string(text);  // every form leaves ASCII unchanged
    UErrorCode status = U_ZERO_ERROR;
    const auto src = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
    if (norm_->isNormalized(src, status) && U_SUCCESS(status)) return std::string(text);
    status = U_ZERO_ERROR;
    const icu::UnicodeString out = norm_->normalize(src, status);
    if (U_FAILURE(status))
      throw Error(ErrorCode::kInternal, std::string("tokenizer: ICU normalization failed: ") + u_errorName(status));
    return to_utf8(out);
  }

 private:
  const icu::Normalizer2* norm_ = nullptr;
};

class Lowercase final : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override {
    if (is_ascii(text)) {
      std::string out(text);
      for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      return out;
    }
    auto s = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
    s.toLower(icu::Locale::getRoot());
    return to_utf8(s);
  }
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string_view text) const override {
    if (left_) text = js_trim_start(text);
    if (right_) text = js_trim_end(text);
    return std::string(text);
  }

 private:
  bool left_, right_;
};

class StripAccents final : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
      const size_t start = pos;
      const char32_t cp = next_code_point(text, pos);
      if ((U_GET_GC_MASK(static_cast<UChar32>(cp)) & U_GC_M_MASK) == 0) out.append(text.substr(start, pos - start));
    }
    return out;
  }
};

class Replace final : public Normalizer {
 public:
  Replace(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string_view text) const override { return pattern_->replace_all(text, content_); }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string_view text) const override {
    if (text.empty()) return {};
    return prefix_ + std::string(text);
  }

 private:
  std::string prefix_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  std::string normalize(std::string_view text) const override {
    std::string current(text);
    for (const auto& part : parts_) current = part->normalize(current);
    return current;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

std::string string_field(const nlohmann::json& config, const char* key, const std::string& where) {
  const auto it = config.find(key);
  if (it == config.end() || !it->is_string())
    throw Error(ErrorCode::kModelFormat, where + ": missing string field '" + key + "'");
  return it->get<std::string>();
}

}  // namespace

// Shared with pre-tokenizers and decoders: {"String": "x"} or {"Regex": "..."}.
std::unique_ptr<Regex> make_pattern(const nlohmann::json& pattern, const std::string& where) {
  if (pattern.is_object()) {
    if (const auto it = pattern.find("String"); it != pattern.end() && it->is_string())
      return Regex::literal(it->get<std::string>(), where);
    if (const auto it = pattern.find("Regex"); it != pattern.end() && it->is_string())
      return Regex::from_oniguruma(it->get<std::string>(), where);
  }
  throw Error(ErrorCode::kModelFormat, where + ": pattern must be {\"String\": ...} or {\"Regex\": ...}");
}

void check_sequence_depth(int depth, const std::string& where) {
  if (depth >= kMaxSequenceDepth) {
    throw Error(ErrorCode::kUnsupported,
                where + ": Sequences nested more than " + std::to_string(kMaxSequenceDepth) + " deep");
  }
}

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& config, const std::string& file, int depth) {
  if (config.is_null()) return nullptr;
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string())
    throw Error(ErrorCode::kModelFormat, file + ": normalizer must be an object with a \"type\"");
  const std::string type = clip(config["type"].get<std::string>());  // names it in errors
  const std::string where = file + ": normalizer " + type;
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD")
    return std::make_unique<UnicodeForm>(type, file);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip")
    return std::make_unique<Strip>(config.value("strip_left", false), config.value("strip_right", false));
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Replace") {
    if (!config.contains("pattern")) throw Error(ErrorCode::kModelFormat, where + ": missing 'pattern'");
    return std::make_unique<Replace>(make_pattern(config["pattern"], where), config.value("content", std::string()));
  }
  if (type == "Prepend") return std::make_unique<Prepend>(string_field(config, "prepend", where));
  if (type == "Sequence") {
    const auto it = config.find("normalizers");
    if (it == config.end() || !it->is_array())
      throw Error(ErrorCode::kModelFormat, where + ": missing 'normalizers' array");
    check_sequence_depth(depth, where);
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const auto& part : *it)
      if (auto n = make_normalizer(part, file, depth + 1)) parts.push_back(std::move(n));
    return std::make_unique<Sequence>(std::move(parts));
  }
  throw Error(ErrorCode::kUnsupported, file + ": unsupported normalizer type '" + type +
                                           "' (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, "
                                           "Replace, Prepend, Sequence)");
}

}  // namespace specd::tokenizer::detail

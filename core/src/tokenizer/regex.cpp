// PCRE2 patterns for the tokenizer (components.hpp: Regex): compiled once with JIT where
// available, matched with JavaScript matchAll semantics. Oniguruma patterns from tokenizer.json
// are translated first (onig_translate.cpp).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>
#include <string_view>
#include <vector>

#include "common/untrusted.hpp"
#include "specd/error.hpp"
#include "tokenizer/components.hpp"

namespace specd::tokenizer::detail {

namespace {

// Per-thread JIT stack and match context: compiled patterns are shared, these are not.
struct MatchResources {
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  MatchResources() {
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(size_t{32} << 10, size_t{8} << 20, nullptr);
    if (context && jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~MatchResources() {
    if (jit_stack) pcre2_jit_stack_free(jit_stack);
    if (context) pcre2_match_context_free(context);
  }
  MatchResources(const MatchResources&) = delete;
  MatchResources& operator=(const MatchResources&) = delete;
};

MatchResources& match_resources() {
  thread_local MatchResources resources;
  return resources;
}

}  // namespace

Regex::~Regex() {
  if (code_) pcre2_code_free(static_cast<pcre2_code*>(code_));
}

std::unique_ptr<Regex> Regex::from_pcre2(const std::string& pattern, const std::string& where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw Error(ErrorCode::kUnsupported, where + ": cannot compile regex '" + clip(pattern, 200) +
                                             "': " + reinterpret_cast<const char*>(message) + " at offset " +
                                             std::to_string(offset));
  }
  // JIT is an optimisation: without it (unsupported CPU, no executable memory) the
  // interpreter gives the same matches.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  std::unique_ptr<Regex> regex(new Regex());
  regex->code_ = code;
  return regex;
}

std::unique_ptr<Regex> Regex::from_oniguruma(std::string_view pattern, const std::string& where) {
  return from_pcre2(oniguruma_to_pcre2(pattern, where), where);
}

std::unique_ptr<Regex> Regex::literal(std::string_view text, const std::string& where) {
  if (!is_valid_utf8(text)) throw Error(ErrorCode::kModelFormat, where + ": pattern is not valid UTF-8");
  std::string pattern;
  for (size_t pos = 0; pos < text.size();) pattern += hex_escape(next_code_point(text, pos));
  auto regex = from_pcre2(pattern, where);
  regex->literal_ = std::string(text);
  return regex;
}

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  if (!literal_.empty()) {  // left to right, non-overlapping: what the regex would find
    for (size_t at = text.find(literal_); at != std::string_view::npos; at = text.find(literal_, at + literal_.size()))
      out.emplace_back(at, at + literal_.size());
    return;
  }
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(code, nullptr);
  if (data == nullptr) throw Error(ErrorCode::kOutOfMemory, "tokenizer: cannot allocate regex match data");
  auto& resources = match_resources();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, data, resources.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(data);
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw Error(ErrorCode::kInternal,
                  std::string("tokenizer: regex match failed: ") + reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data);
    const size_t b = ov[0], e = ov[1];
    out.emplace_back(b, e);
    if (e == b) {
      if (e >= text.size()) break;
      start = e + utf8_length(static_cast<unsigned char>(text[e]));
    } else {
      start = e;
    }
  }
  pcre2_match_data_free(data);
}

std::string Regex::replace_all(std::string_view text, std::string_view with) const {
  if (!literal_.empty() && text.find(literal_) == std::string_view::npos) return std::string(text);
  std::vector<std::pair<size_t, size_t>> matches;
  find_all(text, matches);
  if (matches.empty()) return std::string(text);
  std::string out;
  size_t prev = 0;
  for (const auto& [b, e] : matches) {
    out.append(text.substr(prev, b - prev));
    out.append(with);
    prev = e;
  }
  out.append(text.substr(prev));
  return out;
}

}  // namespace specd::tokenizer::detail

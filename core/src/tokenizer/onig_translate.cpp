// The translation of tokenizer.json's Oniguruma patterns to PCRE2 (components.hpp: Regex).
//
// The official implementations give Oniguruma escapes their Unicode meanings: \s is
// White_Space, \d is Nd, \w is Alphabetic + M + Nd + Pc (+ a few Latin-1 digits), `.` excludes
// only \n, ^/$ see only \n, and an inline (?i:...) folds ASCII letters only. PCRE2's own
// defaults differ on each point, so every such construct is rewritten to an explicit PCRE2
// equivalent instead of relying on PCRE2_UCP. Anything not understood is an error naming the
// pattern, never a different match.
#include <cctype>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/untrusted.hpp"
#include "specd/error.hpp"
#include "tokenizer/components.hpp"

namespace specd::tokenizer::detail {

std::string hex_escape(char32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\x{%X}", static_cast<unsigned>(cp));
  return buf;
}

namespace {

constexpr std::string_view kWordProps = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";
const std::string kWordClass = "[" + std::string(kWordProps) + "]";
const std::string kNonWordClass = "[^" + std::string(kWordProps) + "]";
const std::string kWordBoundary =
    "(?:(?<!" + kWordClass + ")(?=" + kWordClass + ")|(?<=" + kWordClass + ")(?!" + kWordClass + "))";
const std::string kNonWordBoundary =
    "(?:(?<!" + kWordClass + ")(?!" + kWordClass + ")|(?<=" + kWordClass + ")(?=" + kWordClass + "))";

bool is_ascii_letter(char32_t c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
char32_t swap_ascii_case(char32_t c) {
  return c >= 'a' ? c - 32 : c + 32;
}

class OnigTranslator {
 public:
  OnigTranslator(std::string_view src, const std::string& where) : src_(src), where_(where) {}

  std::string run() {
    while (pos_ < src_.size()) step();
    if (!groups_.empty()) fail("unbalanced parenthesis");
    return out_;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorCode::kUnsupported,
                where_ + ": regex " + quote(src_) + ": " + what + " at offset " + std::to_string(pos_));
  }
  static std::string quote(std::string_view s) { return "'" + std::string(s) + "'"; }

  char32_t peek_cp(size_t at) const {
    size_t p = at;
    return next_code_point(src_, p);
  }
  bool starts_with(std::string_view s) const { return src_.substr(pos_).starts_with(s); }

  void emit_atom(const std::string& text) {
    atom_start_ = static_cast<long>(out_.size());
    out_ += text;
    last_was_quantifier_ = false;
  }

  std::string literal_atom(char32_t cp) const {
    if (!fold_ || !is_ascii_letter(cp)) return hex_escape(cp);
    std::string out = "[";
    out += hex_escape(cp);
    out += hex_escape(swap_ascii_case(cp));
    out += ']';
    return out;
  }

  // Reads hex digits {...}, HH or HHHH after \x / \u. Returns the code point.
  char32_t read_hex(size_t digits_at, size_t count, size_t& end) {
    if (count == 0) {  // braced
      const size_t close = src_.find('}', digits_at);
      if (close == std::string_view::npos) fail("unterminated \\x{...}");
      const std::string body(src_.substr(digits_at, close - digits_at));
      if (body.empty() || body.size() > 8 || body.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
        fail("bad code point escape");
      end = close + 1;
      return static_cast<char32_t>(std::stoul(body, nullptr, 16));
    }
    if (digits_at + count > src_.size()) fail("bad hex escape");
    const std::string body(src_.substr(digits_at, count));
    if (body.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) fail("bad hex escape");
    end = digits_at + count;
    return static_cast<char32_t>(std::stoul(body, nullptr, 16));
  }

  // Escapes that stand for one code point: returns true and sets cp/end.
  bool single_char_escape(size_t at, char32_t& cp, size_t& end) {
    const char c = src_[at + 1];
    // The escapes of one fixed code point: \t \n \r \f \v \a \e \0.
    static constexpr std::pair<char, char32_t> kFixed[] = {{'t', '\t'}, {'n', '\n'}, {'r', '\r'}, {'f', '\f'},
                                                           {'v', 0x0B}, {'a', 0x07}, {'e', 0x1B}, {'0', 0}};
    for (const auto& [name, value] : kFixed)
      if (c == name) {
        cp = value;
        end = at + 2;
        return true;
      }
    if (c == 'x') {
      cp = at + 2 < src_.size() && src_[at + 2] == '{' ? read_hex(at + 3, 0, end) : read_hex(at + 2, 2, end);
      return true;
    }
    if (c == 'u') {
      cp = read_hex(at + 2, 4, end);
      return true;
    }
    const auto uc = static_cast<unsigned char>(c);
    if (uc >= 0x80 || !std::isalnum(uc)) {
      cp = peek_cp(at + 1);
      end = at + 1 + utf8_length(uc);
      return true;
    }
    return false;
  }

  // \p{...} / \P{...} at pos_: returns the property body and advances.
  std::string read_property(bool& negated) {
    negated = src_[pos_ + 1] == 'P';
    if (pos_ + 2 >= src_.size() || src_[pos_ + 2] != '{') fail("\\p without braces");
    const size_t close = src_.find('}', pos_ + 3);
    if (close == std::string_view::npos) fail("unterminated \\p{...}");
    std::string body(src_.substr(pos_ + 3, close - pos_ - 3));
    pos_ = close + 1;
    if (body.starts_with("^")) {
      negated = !negated;
      body.erase(0, 1);
    }
    if (body.empty() || body.find_first_of("\\{}[]") != std::string::npos) fail("bad property name");
    return body;
  }

  void escape_outside_class() {
    if (pos_ + 1 >= src_.size()) fail("trailing backslash");
    const char c = src_[pos_ + 1];
    if (c == 'p' || c == 'P') {
      bool negated = false;
      const std::string body = read_property(negated);
      if (body == "Word") {
        emit_atom(negated ? kNonWordClass : kWordClass);
      } else {
        emit_atom(std::string(negated ? "\\P{" : "\\p{") + body + "}");
      }
      return;
    }
    if (c == 'c') {
      if (pos_ + 2 >= src_.size() || !is_ascii_letter(static_cast<unsigned char>(src_[pos_ + 2])))
        fail("bad \\c escape");
      emit_atom(hex_escape(static_cast<unsigned char>(src_[pos_ + 2]) & 0x1Fu));
      pos_ += 3;
      return;
    }
    char32_t cp = 0;
    size_t end = 0;
    if (single_char_escape(pos_, cp, end)) {
      emit_atom(literal_atom(cp));
      pos_ = end;
      return;
    }
    pos_ += 2;
    switch (c) {
      case 'G':
        return;  // start of the search: every search here starts where the last ended
      case 'A':
        emit_atom("\\A");
        return;
      case 'z':
        emit_atom("\\z");
        return;
      case 'Z':
        emit_atom("(?=\\n?\\z)");
        return;
      case 'h':
        emit_atom("[0-9A-Fa-f]");
        return;
      case 'H':
        emit_atom("[^0-9A-Fa-f]");
        return;
      case 'w':
        emit_atom(kWordClass);
        return;
      case 'W':
        emit_atom(kNonWordClass);
        return;
      case 'd':
        emit_atom("\\p{Nd}");
        return;
      case 'D':
        emit_atom("\\P{Nd}");
        return;
      case 's':
        emit_atom("\\p{White_Space}");
        return;
      case 'S':
        emit_atom("\\P{White_Space}");
        return;
      case 'b':
        emit_atom(kWordBoundary);
        return;
      case 'B':
        emit_atom(kNonWordBoundary);
        return;
      default:
        break;
    }
    if (c >= '1' && c <= '9') {
      emit_atom(std::string("\\g{") + c + "}");
      return;
    }
    pos_ -= 2;
    fail(std::string("unsupported escape \\") + c);
  }

  // A character class: items re-emitted canonically so PCRE2 sees no ambiguity.
  void character_class() {
    std::string body;
    std::vector<std::pair<char32_t, char32_t>> ranges;  // literal code points, for ASCII folding
    const bool negated = class_body(body, ranges, false);
    if (fold_) {
      for (const auto& [lo, hi] : ranges) {
        for (char32_t x = lo; x <= hi && x < 0x80; ++x)
          if (is_ascii_letter(x)) body += hex_escape(swap_ascii_case(x));
      }
    }
    if (body.empty()) fail("empty character class");
    emit_atom(std::string(negated ? "[^" : "[") + body + "]");
  }

  // A backslash escape at pos_ inside [...]: a single code point (returned in cp: true), or a
  // set appended to body/ranges (false).
  bool class_escape(std::string& body, std::vector<std::pair<char32_t, char32_t>>& ranges, char32_t& cp) {
    if (pos_ + 1 >= src_.size()) fail("trailing backslash");
    const char e = src_[pos_ + 1];
    if (e == 'p' || e == 'P') {
      bool neg = false;
      const std::string name = read_property(neg);
      if (name == "Word") {
        if (neg) fail("\\P{Word} inside a class is not supported");
        body += kWordProps;
      } else {
        body += std::string(neg ? "\\P{" : "\\p{") + name + "}";
      }
      return false;
    }
    size_t end = 0;
    if (single_char_escape(pos_, cp, end)) {
      pos_ = end;
      return true;
    }
    pos_ += 2;
    switch (e) {
      case 's':
        body += "\\p{White_Space}";
        break;
      case 'S':
        body += "\\P{White_Space}";
        break;
      case 'd':
        body += "\\p{Nd}";
        break;
      case 'D':
        body += "\\P{Nd}";
        break;
      case 'w':
        body += kWordProps;
        break;
      case 'h':
        body += "0-9A-Fa-f";
        ranges.push_back({'A', 'F'});
        ranges.push_back({'a', 'f'});
        break;
      default:
        pos_ -= 2;
        fail(std::string("unsupported escape \\") + e + " inside a character class");
    }
    return false;
  }

  // '-' at pos_ after the single code point lo: the range lo-hi replaces lo's item.
  void class_range(std::string& body, std::vector<std::pair<char32_t, char32_t>>& ranges, char32_t lo) {
    ++pos_;
    char32_t hi = 0;
    if (src_[pos_] == '\\') {
      size_t end = 0;
      if (!single_char_escape(pos_, hi, end)) fail("range ends in a set");
      pos_ = end;
    } else if (src_[pos_] == '[') {
      fail("range ends in a set");
    } else {
      hi = peek_cp(pos_);
      pos_ += utf8_length(static_cast<unsigned char>(src_[pos_]));
    }
    if (hi < lo) fail("character class range out of order");
    const std::string lo_text = hex_escape(lo);
    body.erase(body.size() - lo_text.size());
    body += lo_text + "-" + hex_escape(hi);
    ranges.back() = {lo, hi};
  }

  // Parses [...] at pos_ into body/ranges; returns whether it is negated. A nested class is a
  // union member (Oniguruma), merged into the outer body; a negated nested class is refused.
  bool class_body(std::string& body, std::vector<std::pair<char32_t, char32_t>>& ranges, bool nested) {
    const size_t start = pos_;
    ++pos_;
    bool negated = false;
    if (pos_ < src_.size() && src_[pos_] == '^') {
      negated = true;
      ++pos_;
    }
    if (nested && negated) fail("negated nested character classes are not supported");
    bool first = true;
    bool have_single = false;  // the last item is a single code point (can start a range)
    char32_t last_single = 0;
    while (true) {
      if (pos_ >= src_.size()) {
        pos_ = start;
        fail("unterminated character class");
      }
      const char c = src_[pos_];
      if (c == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (c == '[') {
        if (pos_ + 1 < src_.size() && (src_[pos_ + 1] == ':' || src_[pos_ + 1] == '.' || src_[pos_ + 1] == '=')) {
          // [:alpha:], [.x.], [=x=]: the same mark must close it before the next ']'.
          const char mark = src_[pos_ + 1];
          const size_t close = src_.find(']', pos_ + 2);
          if (close != std::string_view::npos && close > pos_ + 2 && src_[close - 1] == mark)
            fail("POSIX bracket expressions are not supported");
        }
        class_body(body, ranges, true);
        have_single = false;
        continue;
      }
      if (c == '&' && pos_ + 1 < src_.size() && src_[pos_ + 1] == '&') fail("class intersection && is not supported");
      char32_t cp = 0;
      bool is_single = false;
      if (c == '\\') {
        is_single = class_escape(body, ranges, cp);
        if (!is_single) {
          have_single = false;
          continue;
        }
      } else if (c == '-' && have_single && pos_ + 1 < src_.size() && src_[pos_ + 1] != ']') {
        class_range(body, ranges, last_single);
        have_single = false;
        continue;
      } else {
        cp = peek_cp(pos_);
        pos_ += utf8_length(static_cast<unsigned char>(c));
        is_single = true;
      }
      if (is_single) {
        body += hex_escape(cp);
        ranges.push_back({cp, cp});
        have_single = true;
        last_single = cp;
      }
    }
    return negated;
  }

  void open_group() {
    std::string_view prefix = "(";
    bool fold = fold_;
    if (starts_with("(?i:")) {
      fold = true;
      groups_.push_back({static_cast<long>(out_.size()), fold_});
      out_ += "(?:";
      pos_ += 4;
      fold_ = fold;
      last_was_quantifier_ = false;
      return;
    }
    if (starts_with("(?")) {
      static constexpr std::string_view kKnown[] = {"(?:", "(?=", "(?!", "(?<=", "(?<!", "(?>"};
      prefix = {};
      for (auto k : kKnown)
        if (starts_with(k)) prefix = k;
      if (prefix.empty() && starts_with("(?<")) {
        const size_t close = src_.find('>', pos_);
        if (close == std::string_view::npos) fail("bad named group");
        prefix = src_.substr(pos_, close - pos_ + 1);
      }
      if (prefix.empty()) fail("unsupported group syntax");
    }
    groups_.push_back({static_cast<long>(out_.size()), fold_});
    out_ += prefix;
    pos_ += prefix.size();
    last_was_quantifier_ = false;
  }

  void close_group() {
    if (groups_.empty()) fail("unbalanced parenthesis");
    out_ += ')';
    atom_start_ = groups_.back().first;
    fold_ = groups_.back().second;
    groups_.pop_back();
    last_was_quantifier_ = false;
    ++pos_;
  }

  // {n}, {n,}, {n,m}, {,m}; anything else is a literal brace (as in Oniguruma).
  void brace() {
    size_t p = pos_ + 1;
    std::string lo, hi;
    bool comma = false;
    while (p < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p]))) lo += src_[p++];
    if (p < src_.size() && src_[p] == ',') {
      comma = true;
      ++p;
      while (p < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p]))) hi += src_[p++];
    }
    const bool valid = p < src_.size() && src_[p] == '}' && (!lo.empty() || (comma && !hi.empty()));
    if (!valid || atom_start_ < 0) {
      emit_atom("\\{");
      ++pos_;
      return;
    }
    const std::string body = (lo.empty() ? "0" : lo) + (comma ? "," + hi : "");
    pos_ = p + 1;
    const char following = pos_ < src_.size() ? src_[pos_] : '\0';
    if (following == '+' || following == '*') {
      // In Oniguruma X{n,m}+ repeats X{n,m}; it is not possessive as in PCRE2.
      out_ = out_.substr(0, atom_start_) + "(?:" + out_.substr(atom_start_) + "{" + body + "})" + following;
      ++pos_;
    } else {
      out_ += "{" + body + "}";
    }
    last_was_quantifier_ = true;
  }

  void step() {
    const char c = src_[pos_];
    switch (c) {
      case '\\':
        escape_outside_class();
        return;
      case '[':
        character_class();
        return;
      case ']':
        emit_atom("\\]");
        ++pos_;
        return;
      case '.':
        emit_atom("[^\\n]");
        ++pos_;
        return;
      case '^':
        emit_atom("(?:\\A|(?<=\\n))");
        ++pos_;
        return;
      case '$':
        emit_atom("(?:(?=\\n)|\\z)");
        ++pos_;
        return;
      case '(':
        open_group();
        return;
      case ')':
        close_group();
        return;
      case '|':
        out_ += '|';
        atom_start_ = -1;
        last_was_quantifier_ = false;
        ++pos_;
        return;
      case '{':
        brace();
        return;
      case '}':
        emit_atom("\\}");
        ++pos_;
        return;
      case '+':
      case '*':
      case '?':
        // After a quantifier: '?' makes it lazy, '+' possessive (Oniguruma's Ruby syntax and
        // PCRE2 agree on both).
        out_ += c;
        last_was_quantifier_ = !last_was_quantifier_;
        ++pos_;
        return;
      default: {
        const char32_t cp = peek_cp(pos_);
        pos_ += utf8_length(static_cast<unsigned char>(c));
        if (cp < 0x80 && !std::isalnum(static_cast<int>(cp)) && cp != ' ' && cp != '_') {
          emit_atom(hex_escape(cp));
        } else if (fold_ && is_ascii_letter(cp)) {
          emit_atom(literal_atom(cp));
        } else {
          std::string raw;
          append_utf8(raw, cp);
          emit_atom(raw);
        }
        return;
      }
    }
  }

  std::string_view src_;
  const std::string& where_;
  size_t pos_ = 0;
  std::string out_;
  long atom_start_ = -1;
  bool last_was_quantifier_ = false;
  bool fold_ = false;
  std::vector<std::pair<long, bool>> groups_;
};

}  // namespace

std::string oniguruma_to_pcre2(std::string_view pattern, const std::string& where) {
  if (!is_valid_utf8(pattern)) throw Error(ErrorCode::kModelFormat, where + ": regex is not valid UTF-8");
  return OnigTranslator(pattern, where).run();
}

}  // namespace specd::tokenizer::detail

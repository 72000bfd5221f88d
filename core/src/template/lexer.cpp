#include "template/lexer.hpp"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "template/pystr.hpp"
#include "template/value.hpp"

namespace specd::jinja {
namespace {

[[noreturn]] void fail(int line, const std::string& message) {
  throw TemplateError("line " + std::to_string(line) + ": " + message);
}

// Python's \s over UTF-8: the whitespace code point starting at s[i], or 0 bytes.
size_t space_at(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return pystr::is_space(b) ? 1 : 0;
  size_t len = (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
  if (i + len > s.size()) return 0;
  const std::u32string c = pystr::decode(s.substr(i, len));
  return c.size() == 1 && pystr::is_space(c[0]) ? len : 0;
}

size_t skip_spaces(std::string_view s, size_t i) {
  while (i < s.size()) {
    const size_t n = space_at(s, i);
    if (n == 0) break;
    i += n;
  }
  return i;
}

// A prefix of s (never longer: invalid UTF-8 is kept byte for byte, not re-encoded as U+FFFD),
// without its trailing whitespace code points.
std::string rstrip_spaces(std::string_view s) {
  size_t e = s.size();
  while (e > 0) {
    size_t b = e - 1;  // start of the last code point (at most 4 bytes back)
    while (b > 0 && e - b < 4 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
    const std::u32string cp = pystr::decode(s.substr(b, e - b));
    if (cp.size() != 1 || !pystr::is_space(cp[0])) break;
    e = b;
  }
  return std::string(s.substr(0, e));
}

bool all_spaces(std::string_view s) {
  if (s.empty()) return false;
  return skip_spaces(s, 0) == s.size();
}

int count_lines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Python's "unicode-escape" decoding of a string literal's body (unknown escapes stay).
std::string unescape(std::string_view s, int line) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    auto hex = [&](size_t n) {
      if (i + n >= s.size()) fail(line, "truncated \\x/\\u escape in a string");
      uint32_t v = 0;
      const auto r = std::from_chars(s.data() + i + 1, s.data() + i + 1 + n, v, 16);
      if (r.ec != std::errc() || r.ptr != s.data() + i + 1 + n) fail(line, "truncated \\x/\\u escape in a string");
      i += n;
      pystr::append_utf8(out, static_cast<char32_t>(v));
    };
    switch (c) {
      case '\n':
        break;
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
        hex(2);
        break;
      case 'u':
        hex(4);
        break;
      case 'U':
        hex(8);
        break;
      default:
        if (c >= '0' && c <= '7') {
          uint32_t v = 0;
          size_t n = 0;
          while (n < 3 && i < s.size() && s[i] >= '0' && s[i] <= '7')
            v = v * 8 + static_cast<uint32_t>(s[i++] - '0'), ++n;
          --i;
          pystr::append_utf8(out, static_cast<char32_t>(v));
        } else {
          out += '\\';
          out += c;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view raw) {
    // Newlines: \r\n and \r read as \n; one trailing newline dropped.
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\r') {
        src_ += '\n';
        if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
      } else {
        src_ += raw[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) root_step();
    push(Token::Type::kEof, "");
    return std::move(out_);
  }

 private:
  // A real chat template is a few thousand tokens; each costs a token here and a node or more in
  // the parser's tree (an 8 MB template of 900k expressions took 500 MB to parse).
  static constexpr size_t kMaxTokens = 200'000;
  void emit(Token&& tok) {
    if (out_.size() >= kMaxTokens)
      fail(line_,
           "the template has more than " + std::to_string(kMaxTokens) + " tokens (a chat template has a few thousand)");
    out_.push_back(std::move(tok));
  }

  void push(Token::Type t, std::string text) {
    Token tok;
    tok.type = t;
    tok.text = std::move(text);
    tok.line = line_;
    emit(std::move(tok));
  }

  // Data up to the next tag, with the tag's whitespace control applied to it.
  void root_step() {
    size_t tag = std::string::npos;
    for (size_t i = src_.find('{', pos_); i != std::string::npos && i + 1 < src_.size(); i = src_.find('{', i + 1)) {
      const char n = src_[i + 1];
      if (n == '{' || n == '%' || n == '#') {
        tag = i;
        break;
      }
    }
    if (tag == std::string::npos) {
      emit_data(src_.substr(pos_));
      pos_ = src_.size();
      return;
    }
    const char kind = src_[tag + 1];
    const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
    std::string text = src_.substr(pos_, tag - pos_);
    if (sign == '-') {
      std::string stripped = rstrip_spaces(text);
      pending_lines_ = count_lines(std::string_view(text).substr(stripped.size()));
      text = std::move(stripped);
    } else if (sign != '+' && kind != '{') {
      const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if ((l_pos > 0 || line_starting_) && all_spaces(std::string_view(text).substr(l_pos))) text.resize(l_pos);
    }
    emit_data(text);
    line_ += pending_lines_;
    pending_lines_ = 0;
    pos_ = tag + 2 + (sign ? 1 : 0);
    if (kind == '#') return comment();
    if (kind == '%' && raw_block()) return;
    push(kind == '{' ? Token::Type::kVarBegin : Token::Type::kBlockBegin, "");
    inside_tag(kind == '{');
  }

  void emit_data(const std::string& text) {
    if (!text.empty()) push(Token::Type::kData, text);
    line_ += count_lines(text);
  }

  // After a block or comment end: `-` strips all whitespace, `+` nothing, else one newline.
  void after_block_end(char sign) {
    if (sign == '-') {
      const size_t e = skip_spaces(src_, pos_);
      line_ += count_lines(std::string_view(src_).substr(pos_, e - pos_));
      line_starting_ = e > pos_ ? src_[e - 1] == '\n' : false;
      pos_ = e;
    } else if (sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
      ++line_;
      line_starting_ = true;
    } else {
      line_starting_ = false;
    }
  }

  void comment() {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail(line_, "missing end of comment tag");
    char sign = 0;
    if (end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+')) sign = src_[end - 1];
    line_ += count_lines(std::string_view(src_).substr(pos_, end - pos_));
    pos_ = end + 2;
    after_block_end(sign);
  }

  // {% raw %} ... {% endraw %}: the text between, as data. False when the tag is not `raw`.
  bool raw_block() {
    size_t i = skip_spaces(src_, pos_);
    if (src_.compare(i, 3, "raw") != 0) return false;
    i = skip_spaces(src_, i + 3);
    char sign = 0;
    if (i < src_.size() && src_[i] == '-') sign = '-', ++i;
    if (src_.compare(i, 2, "%}") != 0) return false;
    pos_ = i + 2;
    if (sign == '-') pos_ = skip_spaces(src_, pos_);
    for (size_t at = src_.find("{%", pos_); at != std::string::npos; at = src_.find("{%", at + 2)) {
      size_t j = at + 2;
      const char s1 = j < src_.size() && (src_[j] == '-' || src_[j] == '+') ? src_[j++] : 0;
      j = skip_spaces(src_, j);
      if (src_.compare(j, 6, "endraw") != 0) continue;
      j = skip_spaces(src_, j + 6);
      char s2 = 0;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) s2 = src_[j++];
      if (src_.compare(j, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos_, at - pos_);
      if (s1 == '-') {
        text = rstrip_spaces(text);
      } else if (s1 != '+') {
        const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (l_pos > 0 && all_spaces(std::string_view(text).substr(l_pos))) text.resize(l_pos);
      }
      emit_data(text);
      line_ += count_lines(std::string_view(src_).substr(pos_ + text.size(), j - pos_ - text.size()));
      pos_ = j + 2;
      after_block_end(s2);
      return true;
    }
    fail(line_, "missing end of raw directive");
  }

  // Tokens up to the tag's end (found only where brackets are balanced).
  void inside_tag(bool variable) {
    std::string balance;
    for (;;) {
      pos_ = skip_spaces_counting(pos_);
      if (pos_ >= src_.size())
        fail(line_, std::string("unexpected end of template: missing '") + (variable ? "}}" : "%}") + "'");
      if (balance.empty() && tag_end(variable)) return;
      lex_one(balance);
    }
  }

  size_t skip_spaces_counting(size_t i) {
    const size_t e = skip_spaces(src_, i);
    line_ += count_lines(std::string_view(src_).substr(i, e - i));
    return e;
  }

  bool tag_end(bool variable) {
    const char* end = variable ? "}}" : "%}";
    char sign = 0;
    size_t at = pos_;
    if ((src_[at] == '-' || (!variable && src_[at] == '+')) && src_.compare(at + 1, 2, end) == 0) sign = src_[at++];
    if (src_.compare(at, 2, end) != 0) return false;
    push(variable ? Token::Type::kVarEnd : Token::Type::kBlockEnd, "");
    pos_ = at + 2;
    if (variable) {
      if (sign == '-') pos_ = skip_spaces_counting(pos_);
      line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
    } else {
      after_block_end(sign);
    }
    return true;
  }

  void lex_one(std::string& balance) {
    const char c = src_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c))) return number();
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = pos_;
      while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
      push(Token::Type::kName, src_.substr(pos_, e - pos_));
      pos_ = e;
      return;
    }
    if (c == '\'' || c == '"') return string_literal(c);
    static const char* kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                 "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};
    for (const char* op : kOps) {
      const size_t n = std::char_traits<char>::length(op);
      if (src_.compare(pos_, n, op) != 0) continue;
      if (n == 1 && (c == '{' || c == '(' || c == '[')) balance += c == '{' ? '}' : c == '(' ? ')' : ']';
      if (n == 1 && (c == '}' || c == ')' || c == ']')) {
        if (balance.empty()) fail(line_, std::string("unexpected '") + c + "'");
        if (balance.back() != c) fail(line_, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
        balance.pop_back();
      }
      push(Token::Type::kOp, op);
      pos_ += n;
      return;
    }
    fail(line_, std::string("unexpected character '") + c + "'");
  }

  void number() {
    size_t e = pos_;
    auto digits = [&](size_t i) {
      while (i < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[i])) || src_[i] == '_')) ++i;
      return i;
    };
    const bool prefixed =
        src_[pos_] == '0' && pos_ + 1 < src_.size() && std::strchr("bBoOxX", src_[pos_ + 1]) != nullptr;
    if (prefixed) {
      const int base = std::tolower(src_[pos_ + 1]) == 'b' ? 2 : std::tolower(src_[pos_ + 1]) == 'o' ? 8 : 16;
      e = pos_ + 2;
      std::string digits_only;
      while (e < src_.size() && (std::isxdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_'))
        if (src_[e++] != '_') digits_only += src_[e - 1];
      int64_t v = 0;
      const auto r = std::from_chars(digits_only.data(), digits_only.data() + digits_only.size(), v, base);
      if (digits_only.empty() || r.ec != std::errc() || r.ptr != digits_only.data() + digits_only.size())
        fail(line_, "invalid integer literal");
      push_int(v);
      pos_ = e;
      return;
    }
    e = digits(pos_);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      e = digits(e + 1);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
        e = digits(x);
        is_float = true;
      }
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i)
      if (src_[i] != '_') text += src_[i];
    pos_ = e;
    if (is_float) {
      Token tok;
      tok.type = Token::Type::kFloat;
      tok.float_value = std::strtod(text.c_str(), nullptr);
      tok.line = line_;
      emit(std::move(tok));
      return;
    }
    int64_t v = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    if (r.ec != std::errc()) fail(line_, "integer literal " + text + " does not fit in 64 bits");
    push_int(v);
  }

  void push_int(int64_t v) {
    Token tok;
    tok.type = Token::Type::kInt;
    tok.int_value = v;
    tok.line = line_;
    emit(std::move(tok));
  }

  void string_literal(char quote) {
    size_t i = pos_ + 1;
    while (i < src_.size() && src_[i] != quote) i += src_[i] == '\\' ? 2 : 1;
    if (i >= src_.size()) fail(line_, "unterminated string");
    const std::string_view body = std::string_view(src_).substr(pos_ + 1, i - pos_ - 1);
    push(Token::Type::kString, unescape(body, line_));
    line_ += count_lines(body);
    pos_ = i + 1;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  int pending_lines_ = 0;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  return Lexer(source).run();
}

}  // namespace specd::jinja

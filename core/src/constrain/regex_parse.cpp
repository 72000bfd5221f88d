// Regex parser: the ECMAScript/Python subset listed in regex_gbnf.hpp, into a RegexAst.
// Iterative: groups are an explicit stack of frames, refused beyond kMaxGroupNesting, so the
// regex's shape never chooses the depth of the C++ stack.
#include <algorithm>
#include <cctype>
#include <string>

#include "constrain/grammar.hpp"
#include "constrain/regex_ast.hpp"
#include "specd/error.hpp"

namespace specd::constrain::regex_detail {

void normalize(CodeRanges& r) {
  std::sort(r.begin(), r.end());
  CodeRanges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  r = std::move(out);
}

CodeRanges complement(const CodeRanges& r) {
  CodeRanges out;
  uint32_t next = 0;  // first code point not yet covered
  for (const auto& [lo, hi] : r) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

CodeRanges intersect(const CodeRanges& a, const CodeRanges& b) {
  CodeRanges out;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    uint32_t lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (lo <= hi) out.emplace_back(lo, hi);
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return out;
}

CodeRanges subtract(const CodeRanges& a, const CodeRanges& b) {
  return intersect(a, complement(b));
}

bool contains(const CodeRanges& r, uint32_t c) {
  auto it = std::upper_bound(r.begin(), r.end(), c, [](uint32_t v, const auto& range) { return v < range.first; });
  return it != r.begin() && std::prev(it)->second >= c;
}

namespace {

const CodeRanges kDigit = {{'0', '9'}};
const CodeRanges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodeRanges kSpace = {{'\t', '\r'}, {' ', ' '}};  // \t \n \v \f \r are 9..13

[[noreturn]] void fail(std::string_view what, size_t offset) {
  std::string msg = "regex: ";
  msg += what;
  msg += " at offset ";
  msg += std::to_string(offset);
  throw Error(ErrorCode::kInvalidArgument, msg);
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
uint32_t hex_value(char c) {
  return c <= '9' ? uint32_t(c - '0') : uint32_t((c | 0x20) - 'a' + 10);
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
CodeRanges single_cp(uint32_t cp) {
  return CodeRanges{{cp, cp}};
}
bool single(const CodeRanges& r) {
  return r.size() == 1 && r[0].first == r[0].second;
}

class Parser {
 public:
  explicit Parser(std::string_view re) : re_(re) {}
  RegexAst parse();

 private:
  struct Frame {
    size_t open_offset = 0;
    std::vector<uint32_t> alternatives;  // finished alternatives of this group
    std::vector<uint32_t> seq;           // atoms of the alternative being read
  };

  bool more() const { return pos_ < re_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < re_.size() ? re_[pos_ + ahead] : '\0'; }
  uint32_t add(RegexNode node) {
    ast_.nodes.push_back(std::move(node));
    return uint32_t(ast_.nodes.size() - 1);
  }
  uint32_t add_chars(CodeRanges set) { return add(RegexNode{NodeKind::kChars, std::move(set), {}, 0, 0}); }
  uint32_t make_list(NodeKind kind, std::vector<uint32_t> kids) {
    if (kids.empty()) return add(RegexNode{});
    if (kids.size() == 1) return kids[0];
    return add(RegexNode{kind, {}, std::move(kids), 0, 0});
  }

  void open_group();
  void close_group();
  void end_alternative();
  void anchor(char c);
  void quantifier();
  bool read_quantifier(uint32_t& min, uint32_t& max);
  uint32_t read_count();
  CodeRanges escape(bool in_class);
  uint32_t unicode_escape(size_t at);
  CodeRanges char_class();
  uint32_t code_point();

  std::string_view re_;
  size_t pos_ = 0;
  std::vector<Frame> frames_;
  RegexAst ast_;
  bool anchored_start_ = false;  // of the top-level alternative being read
  bool anchored_end_ = false;
};

RegexAst Parser::parse() {
  frames_.push_back(Frame{});
  while (more()) {
    const char c = peek();
    switch (c) {
      case '(':
        open_group();
        continue;
      case '|':
        end_alternative();
        continue;
      case '^':
      case '$':
        anchor(c);
        continue;
      case ')':
        close_group();
        break;
      case '[':
        frames_.back().seq.push_back(add_chars(char_class()));
        break;
      case '.':
        ++pos_;
        frames_.back().seq.push_back(add_chars(complement({{'\n', '\n'}})));
        break;
      case '\\':
        frames_.back().seq.push_back(add_chars(escape(false)));
        break;
      case '*':
      case '+':
      case '?':
        fail(std::string("nothing to repeat before '") + c + "'", pos_);
      default: {
        uint32_t min = 0, max = 0;
        const size_t at = pos_;
        if (c == '{' && read_quantifier(min, max)) fail("nothing to repeat before '{'", at);
        const uint32_t cp = code_point();
        frames_.back().seq.push_back(add_chars({{cp, cp}}));
      }
    }
    quantifier();
  }
  if (frames_.size() > 1) fail("unbalanced parenthesis: '(' is not closed", frames_.back().open_offset);
  end_alternative();
  return std::move(ast_);
}

void Parser::open_group() {
  const size_t at = pos_++;
  if (frames_.size() > size_t(kMaxGroupNesting)) fail("groups nested deeper than 128", at);
  if (peek() == '?') {
    ++pos_;
    const char k = peek(), k2 = peek(1);
    const bool named = (k == 'P' && k2 == '<') || (k == '<' && k2 != '=' && k2 != '!');
    if (k == ':') {
      ++pos_;
    } else if (named) {  // a named group is a plain group here: names only serve backreferences
      pos_ += k == 'P' ? 2 : 1;
      const size_t name_at = pos_;
      while (more() && (std::isalnum(static_cast<unsigned char>(peek())) || peek() == '_')) ++pos_;
      if (pos_ == name_at || peek() != '>') fail("malformed group name", name_at);
      ++pos_;
    } else if (k == '=' || k == '!') {
      fail("lookahead '(?" + std::string(1, k) + "' is not supported", at);
    } else if (k == '<') {
      fail("lookbehind '(?<" + std::string(1, k2) + "' is not supported", at);
    } else if (k == 'P' && k2 == '=') {
      fail("backreference '(?P=' is not supported", at);
    } else if (k == '>') {
      fail("atomic group '(?>' is not supported", at);
    } else if (k == '#') {
      fail("comment group '(?#' is not supported", at);
    } else {
      fail("inline flags or group syntax '(?" + std::string(k ? 1 : 0, k) + "' are not supported", at);
    }
  }
  frames_.push_back(Frame{at, {}, {}});
}

void Parser::close_group() {
  if (frames_.size() == 1) fail("unbalanced parenthesis: ')' without '('", pos_);
  ++pos_;
  Frame f = std::move(frames_.back());
  frames_.pop_back();
  f.alternatives.push_back(make_list(NodeKind::kSeq, std::move(f.seq)));
  frames_.back().seq.push_back(make_list(NodeKind::kAlt, std::move(f.alternatives)));
}

void Parser::end_alternative() {
  Frame& f = frames_.back();
  const uint32_t node = make_list(NodeKind::kSeq, std::move(f.seq));
  f.seq.clear();
  if (frames_.size() == 1) {
    ast_.alternatives.push_back(TopAlternative{node, anchored_start_, anchored_end_});
    anchored_start_ = anchored_end_ = false;
  } else {
    f.alternatives.push_back(node);
  }
  if (more()) ++pos_;  // the '|'
}

// `^` and `$` are accepted only where they anchor the whole match (or a whole top-level
// alternative): elsewhere they would need assertions, which a grammar has no way to express.
void Parser::anchor(char c) {
  const bool top = frames_.size() == 1;
  if (c == '^' && (!top || anchored_start_ || !frames_.back().seq.empty())) {
    fail("'^' is only supported at the start of the regex (or of a top-level alternative)", pos_);
  }
  if (c == '$' && (!top || (pos_ + 1 < re_.size() && re_[pos_ + 1] != '|'))) {
    fail("'$' is only supported at the end of the regex (or of a top-level alternative)", pos_);
  }
  (c == '^' ? anchored_start_ : anchored_end_) = true;
  ++pos_;
}

// The quantifier after the atom just read, if any. Lazy forms match the same strings, so
// they are read as greedy; possessive forms and a second quantifier are refused.
void Parser::quantifier() {
  uint32_t min = 0, max = 0;
  if (!read_quantifier(min, max)) return;
  if (peek() == '?') {
    ++pos_;
  } else if (peek() == '+') {
    fail("possessive quantifier", pos_ - 1);
  }
  uint32_t a = 0, b = 0;
  const size_t at = pos_;
  if (more() && read_quantifier(a, b)) fail("a quantifier after a quantifier", at);
  uint32_t& atom = frames_.back().seq.back();
  atom = add(RegexNode{NodeKind::kRepeat, {}, {atom}, min, max});
}

// Reads * + ? {m} {m,} {m,n} at pos_; a '{' that starts none of these is a literal (as in
// both ECMAScript and Python) and is left unread.
bool Parser::read_quantifier(uint32_t& min, uint32_t& max) {
  const char c = peek();
  if (c == '*' || c == '+' || c == '?') {
    ++pos_;
    min = c == '+' ? 1 : 0;
    max = c == '?' ? 1 : kUnbounded;
    return true;
  }
  if (c != '{') return false;
  const size_t at = pos_;
  size_t end = pos_ + 1;
  while (end < re_.size() && (is_digit(re_[end]) || re_[end] == ',')) ++end;
  const std::string_view body = re_.substr(pos_ + 1, end - pos_ - 1);
  const size_t comma = body.find(',');
  const bool two_commas = comma != body.npos && body.find(',', comma + 1) != body.npos;
  if (end >= re_.size() || re_[end] != '}' || body.empty() || two_commas) return false;
  if (comma == 0) fail("'{,n}' is ambiguous between regex dialects (write {0,n})", at);
  ++pos_;
  min = read_count();
  max = min;
  if (peek() == ',') {
    ++pos_;
    max = peek() == '}' ? kUnbounded : read_count();
  }
  ++pos_;  // '}'
  if (max < min) fail("repetition {n,m} with n > m", at);
  return true;
}

uint32_t Parser::read_count() {
  const size_t at = pos_;
  uint64_t v = 0;
  while (is_digit(peek())) {
    v = std::min<uint64_t>(v * 10 + uint64_t(peek() - '0'), uint64_t(Grammar::kMaxRepeat) + 1);
    ++pos_;
  }
  if (v > Grammar::kMaxRepeat) fail("repetition count over 10000", at);
  return uint32_t(v);
}

CodeRanges Parser::escape(bool in_class) {
  const size_t at = pos_++;
  if (!more()) fail("trailing backslash", at);
  const char c = peek();
  auto one = [&](uint32_t cp) {
    ++pos_;
    return CodeRanges{{cp, cp}};
  };
  switch (c) {
    case 'd':
      ++pos_;
      return kDigit;
    case 'w':
      ++pos_;
      return kWord;
    case 's':
      ++pos_;
      return kSpace;
    case 'D':
      ++pos_;
      return complement(kDigit);
    case 'W':
      ++pos_;
      return complement(kWord);
    case 'S':
      ++pos_;
      return complement(kSpace);
    case 'n':
      return one('\n');
    case 't':
      return one('\t');
    case 'r':
      return one('\r');
    case 'f':
      return one('\f');
    case 'v':
      return one('\v');
    case '0':
      if (is_digit(peek(1))) fail("octal escape", at);
      return one(0);
    case 'x':
      if (!is_hex(peek(1)) || !is_hex(peek(2))) fail("'\\x' needs two hex digits", at);
      pos_ += 3;
      return single_cp(hex_value(re_[pos_ - 2]) * 16 + hex_value(re_[pos_ - 1]));
    case 'u': {
      const uint32_t cp = unicode_escape(at);
      return CodeRanges{{cp, cp}};
    }
    case 'b':
      if (in_class) return one('\b');
      fail("word boundary '\\b' is not supported", at);
    case 'B':
      fail("word boundary '\\B' is not supported", at);
    case 'k':
      fail("backreference '\\k' is not supported", at);
    case 'p':
    case 'P':
      fail("Unicode property escape is not supported", at);
    default:
      break;
  }
  if (c >= '1' && c <= '9') fail(std::string("backreference '\\") + c + "' is not supported", at);
  if (std::isalnum(static_cast<unsigned char>(c))) fail(std::string("unknown escape '\\") + c + "'", at);
  const uint32_t cp = code_point();  // an escaped metacharacter or other punctuation: itself
  return CodeRanges{{cp, cp}};
}

// \uHHHH at pos_ (on the 'u'); a surrogate pair written as two escapes is one code point.
uint32_t Parser::unicode_escape(size_t at) {
  auto hex4 = [&](size_t p, uint32_t& v) {
    v = 0;
    for (size_t i = 0; i < 4; ++i) {
      if (p + i >= re_.size() || !is_hex(re_[p + i])) return false;
      v = v * 16 + hex_value(re_[p + i]);
    }
    return true;
  };
  uint32_t cp = 0, low = 0;
  if (!hex4(pos_ + 1, cp)) fail("'\\u' needs four hex digits", at);
  pos_ += 5;
  if (cp >= 0xD800 && cp <= 0xDBFF && peek() == '\\' && peek(1) == 'u' && hex4(pos_ + 2, low) && low >= 0xDC00 &&
      low <= 0xDFFF) {
    pos_ += 6;
    return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
  }
  if (cp >= 0xD800 && cp <= 0xDFFF) fail("lone surrogate escape", at);
  return cp;
}

CodeRanges Parser::char_class() {
  const size_t at = pos_++;
  const bool negated = peek() == '^';
  if (negated) ++pos_;
  if (peek() == ']') fail("']' first in a character class is ambiguous between dialects (write \\])", pos_);
  CodeRanges set;
  auto item = [&](CodeRanges& out) {
    if (peek() == '\\') {
      out = escape(true);
    } else {
      if (peek() == '[' && (peek(1) == ':' || peek(1) == '=' || peek(1) == '.')) {
        fail("POSIX character class syntax is not supported", pos_);
      }
      const uint32_t cp = code_point();
      out = {{cp, cp}};
    }
  };
  while (true) {
    if (!more()) fail("unterminated character class", at);
    if (peek() == ']') break;
    const size_t item_at = pos_;
    CodeRanges lo;
    item(lo);
    if (peek() == '-' && peek(1) != ']' && pos_ + 1 < re_.size()) {
      ++pos_;
      CodeRanges hi;
      item(hi);
      if (!single(lo) || !single(hi)) fail("a range with a class escape such as \\d as an end", item_at);
      if (hi[0].first < lo[0].first) fail("reversed range in character class", item_at);
      set.emplace_back(lo[0].first, hi[0].first);
    } else {
      set.insert(set.end(), lo.begin(), lo.end());
    }
  }
  ++pos_;  // ']'
  normalize(set);
  if (negated) set = complement(set);
  if (set.empty()) fail("character class matches nothing", at);
  return set;
}

// Decodes one UTF-8 code point at pos_.
uint32_t Parser::code_point() {
  const auto b0 = static_cast<unsigned char>(peek());
  const size_t at = pos_;
  const int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || pos_ + size_t(len) > re_.size()) fail("invalid UTF-8", at);
  uint32_t cp = len == 1 ? b0 : b0 & (0x3F >> len);
  for (int i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(re_[pos_ + size_t(i)]);
    if ((b & 0xC0) != 0x80) fail("invalid UTF-8", at);
    cp = (cp << 6) | (b & 0x3F);
  }
  static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLength[len] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8", at);
  pos_ += size_t(len);
  return cp;
}

}  // namespace

RegexAst parse_regex(std::string_view regex) {
  return Parser(regex).parse();
}

}  // namespace specd::constrain::regex_detail

// GBNF text → Grammar (grammar.hpp). A recursive-descent parser whose only recursion is into
// parentheses, bounded by Grammar::kMaxNesting; repetitions expand into anonymous rules.
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "constrain/grammar.hpp"
#include "constrain/grammar_build.hpp"
#include "specd/error.hpp"

namespace specd::constrain {
namespace {

using Sequence = std::vector<Element>;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view what) : text_(text), what_(what) {}

  std::shared_ptr<const Grammar> parse(std::string_view root) {
    if (text_.size() > Grammar::kMaxTextBytes)
      throw Error(ErrorCode::kInvalidArgument, std::string(what_) + ": the grammar is " + std::to_string(text_.size()) +
                                                   " bytes; at most " + std::to_string(Grammar::kMaxTextBytes));
    for (skip_space(true); pos_ < text_.size(); skip_space(true)) parse_rule();
    for (size_t r = 0; r < g_->rule_alts.size(); ++r) {
      if (!g_->rule_names[r].empty() && !defined_[r])
        fail_at(first_use_[r], "rule '" + g_->rule_names[r] + "' is used but never defined");
    }
    const auto it = names_.find(std::string(root));
    if (it == names_.end() || !defined_[it->second])
      throw Error(ErrorCode::kInvalidArgument,
                  std::string(what_) + ": no rule '" + std::string(root) + "' to start from");
    g_->root = it->second;
    check_left_recursion(*g_, what_);
    return g_;
  }

 private:
  [[noreturn]] void fail_at(size_t at, const std::string& message) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw Error(ErrorCode::kInvalidArgument,
                std::string(what_) + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + message);
  }
  [[noreturn]] void fail(const std::string& message) const { fail_at(pos_, message); }

  // Spaces, tabs and comments; newlines too where `newlines` (inside parentheses, after ::= or |).
  void skip_space(bool newlines) {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  uint32_t rule_index(const std::string& name, size_t at) {
    const auto [it, inserted] = names_.try_emplace(name, static_cast<uint32_t>(g_->rule_alts.size()));
    if (inserted) {
      g_->rule_alts.emplace_back();
      g_->rule_names.push_back(name);
      defined_.push_back(0);
      first_use_.push_back(at);
    }
    return it->second;
  }

  uint32_t new_rule() {
    g_->rule_alts.emplace_back();
    g_->rule_names.emplace_back();
    defined_.push_back(1);
    first_use_.push_back(pos_);
    return static_cast<uint32_t>(g_->rule_alts.size() - 1);
  }

  void add_alternative(uint32_t rule, const Sequence& seq) {
    if (g_->elements.size() + seq.size() + 1 > Grammar::kMaxElements)
      fail("the grammar expands to more than " + std::to_string(Grammar::kMaxElements) + " elements");
    g_->rule_alts[rule].push_back(static_cast<uint32_t>(g_->elements.size()));
    g_->elements.insert(g_->elements.end(), seq.begin(), seq.end());
    g_->elements.push_back({Op::kEnd, 0});
  }

  void parse_rule() {
    const size_t at = pos_;
    const std::string name = parse_name();
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=") fail("expected '::=' after the rule name '" + name + "'");
    pos_ += 3;
    skip_space(true);
    const uint32_t r = rule_index(name, at);
    if (defined_[r]) fail_at(at, "rule '" + name + "' is defined twice");
    defined_[r] = 1;
    for (const Sequence& alt : parse_alternatives(0)) add_alternative(r, alt);
    if (pos_ < text_.size() && text_[pos_] != '\n') fail(std::string("unexpected '") + text_[pos_] + "'");
  }

  std::vector<Sequence> parse_alternatives(int depth) {
    std::vector<Sequence> alts;
    alts.push_back(parse_sequence(depth));
    while (true) {
      // At the top level an alternative may also start a new line with `|`.
      const size_t mark = pos_;
      if (depth == 0) skip_space(true);
      if (pos_ >= text_.size() || text_[pos_] != '|') {
        pos_ = mark;
        break;
      }
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(depth));
    }
    return alts;
  }

  Sequence parse_sequence(int depth) {
    Sequence seq;
    for (skip_space(depth > 0); pos_ < text_.size(); skip_space(depth > 0)) {
      const char c = text_[pos_];
      if (c == '|' || c == ')' || c == '\n') break;
      const size_t mark = seq.size();
      parse_item(seq, depth);
      skip_space(depth > 0);
      parse_postfix(seq, mark);
    }
    return seq;
  }

  void parse_item(Sequence& seq, int depth) {
    const char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      while (true) {
        if (pos_ >= text_.size() || text_[pos_] == '\n') fail("unterminated string literal");
        if (text_[pos_] == '"') break;
        const uint32_t cp = parse_char();
        seq.push_back({Op::kChars, single(cp)});
      }
      ++pos_;
    } else if (c == '[') {
      seq.push_back({Op::kChars, parse_class()});
    } else if (c == '.') {
      ++pos_;
      CharSet any;
      any.negated = true;
      seq.push_back({Op::kChars, intern(std::move(any))});
    } else if (c == '(') {
      if (depth >= Grammar::kMaxNesting) fail("parentheses nested deeper than " + std::to_string(Grammar::kMaxNesting));
      ++pos_;
      skip_space(true);
      std::vector<Sequence> alts = parse_alternatives(depth + 1);
      if (pos_ >= text_.size() || text_[pos_] != ')') fail("expected ')'");
      ++pos_;
      const uint32_t r = new_rule();
      for (const Sequence& alt : alts) add_alternative(r, alt);
      seq.push_back({Op::kRule, r});
    } else if (is_name_char(c)) {
      const size_t at = pos_;
      const std::string name = parse_name();
      seq.push_back({Op::kRule, rule_index(name, at)});
    } else {
      fail(std::string("unexpected '") + c + "'");
    }
  }

  uint32_t parse_count() {
    const size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      v = v * 10 + static_cast<uint64_t>(text_[pos_++] - '0');
      if (v > Grammar::kMaxRepeat) fail_at(start, "a repetition count over " + std::to_string(Grammar::kMaxRepeat));
    }
    if (pos_ == start) fail("expected a number");
    return static_cast<uint32_t>(v);
  }

  // x* as R ::= x R | empty.
  uint32_t star_rule(Element x) {
    const uint32_t r = new_rule();
    add_alternative(r, {x, {Op::kRule, r}});
    add_alternative(r, {});
    return r;
  }

  // Applies a postfix to the last item of seq (at index mark).
  void parse_postfix(Sequence& seq, size_t mark) {
    if (pos_ >= text_.size() || seq.size() == mark) return;
    const char c = text_[pos_];
    if (c != '*' && c != '+' && c != '?' && c != '{') return;
    // A literal of several characters repeats as a whole: make it one rule first.
    if (seq.size() - mark > 1) {
      const uint32_t r = new_rule();
      add_alternative(r, Sequence(seq.begin() + static_cast<std::ptrdiff_t>(mark), seq.end()));
      seq.resize(mark);
      seq.push_back({Op::kRule, r});
    }
    const Element x = seq.back();
    seq.pop_back();
    uint32_t min = 0, max = UINT32_MAX;  // UINT32_MAX: unbounded
    ++pos_;
    if (c == '+') {
      min = 1;
    } else if (c == '?') {
      max = 1;
    } else if (c == '{') {
      skip_space(false);
      min = parse_count();
      skip_space(false);
      max = min;
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        skip_space(false);
        max = pos_ < text_.size() && text_[pos_] == '}' ? UINT32_MAX : parse_count();
        skip_space(false);
      }
      if (pos_ >= text_.size() || text_[pos_] != '}') fail("expected '}'");
      ++pos_;
      if (max < min) fail("a repetition {m,n} with m > n");
    }
    if (static_cast<uint64_t>(min) + g_->elements.size() > Grammar::kMaxElements)
      fail("the grammar expands to more than " + std::to_string(Grammar::kMaxElements) + " elements");
    for (uint32_t i = 0; i < min; ++i) seq.push_back(x);
    if (max == UINT32_MAX) {
      seq.push_back({Op::kRule, star_rule(x)});
    } else if (max > min) {
      // Up to (max - min) more: R1 ::= x | empty, Rj ::= x R(j-1) | empty.
      uint32_t inner = new_rule();
      add_alternative(inner, {x});
      add_alternative(inner, {});
      for (uint32_t j = 1; j < max - min; ++j) {
        const uint32_t r = new_rule();
        add_alternative(r, {x, {Op::kRule, inner}});
        add_alternative(r, {});
        inner = r;
      }
      seq.push_back({Op::kRule, inner});
    }
  }

  uint32_t decode_utf8() {
    const auto b0 = static_cast<unsigned char>(text_[pos_]);
    const int len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + static_cast<size_t>(len) > text_.size()) fail("invalid UTF-8");
    uint32_t cp = len == 1 ? b0 : b0 & (0x7f >> len);
    for (int i = 1; i < len; ++i) {
      const auto b = static_cast<unsigned char>(text_[pos_ + static_cast<size_t>(i)]);
      if ((b & 0xc0) != 0x80) fail("invalid UTF-8");
      cp = (cp << 6) | (b & 0x3f);
    }
    pos_ += static_cast<size_t>(len);
    return cp;
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= text_.size()) fail("a short hexadecimal escape");
      const char h = text_[pos_++];
      const int d = h >= '0' && h <= '9'   ? h - '0'
                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                           : -1;
      if (d < 0) fail("a bad hexadecimal digit");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    if (v > 0x10ffff) fail("a code point over U+10FFFF");
    return v;
  }

  // One character of a literal or class, escapes resolved.
  uint32_t parse_char() {
    if (text_[pos_] != '\\') return decode_utf8();
    if (++pos_ >= text_.size()) fail("a dangling backslash");
    const char e = text_[pos_++];
    switch (e) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '/':
      case '^':
      case '.':
        return static_cast<uint32_t>(e);
      case 'x':
        return parse_hex(2);
      case 'u':
        return parse_hex(4);
      case 'U':
        return parse_hex(8);
      default:
        fail_at(pos_ - 2, std::string("unknown escape '\\") + e + "'");
    }
  }

  uint32_t parse_class() {
    ++pos_;  // [
    CharSet set;
    if (pos_ < text_.size() && text_[pos_] == '^') {
      set.negated = true;
      ++pos_;
    }
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') fail("unterminated character class");
      if (text_[pos_] == ']') break;
      const uint32_t lo = parse_char();
      uint32_t hi = lo;
      if (pos_ + 1 < text_.size() && text_[pos_] == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char();
        if (hi < lo) fail("a character range whose end is below its start");
      }
      set.ranges.push_back({lo, hi});
    }
    ++pos_;
    return intern(std::move(set));
  }

  uint32_t single(uint32_t cp) {
    const auto it = singles_.find(cp);
    if (it != singles_.end()) return it->second;
    CharSet set;
    set.ranges.push_back({cp, cp});
    const uint32_t id = intern(std::move(set));
    singles_.emplace(cp, id);
    return id;
  }

  uint32_t intern(CharSet set) {
    set.finalize();
    std::string key(1, set.negated ? '^' : '+');
    for (const auto& [a, b] : set.ranges) {
      key.append(reinterpret_cast<const char*>(&a), sizeof a);
      key.append(reinterpret_cast<const char*>(&b), sizeof b);
    }
    const auto [it, inserted] = sets_.try_emplace(std::move(key), static_cast<uint32_t>(g_->charsets.size()));
    if (inserted) g_->charsets.push_back(std::move(set));
    return it->second;
  }

  std::string_view text_;
  std::string_view what_;
  size_t pos_ = 0;
  std::shared_ptr<Grammar> g_ = std::make_shared<Grammar>();
  std::unordered_map<std::string, uint32_t> names_;
  std::vector<char> defined_;
  std::vector<size_t> first_use_;
  std::unordered_map<uint32_t, uint32_t> singles_;
  std::map<std::string, uint32_t> sets_;
};

}  // namespace

std::shared_ptr<const Grammar> compile_gbnf(std::string_view text, std::string_view what, std::string_view root) {
  return Parser(text, what).parse(root);
}

}  // namespace specd::constrain

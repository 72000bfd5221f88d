// Regex AST (regex_ast.hpp) → GBNF text. Every alternation and every repeated sequence becomes a
// named helper rule, so the emitted text never nests parentheses more than one level whatever
// the regex's group nesting (compile_gbnf bounds parenthesis nesting too).
#include "constrain/regex_gbnf.hpp"

#include <map>
#include <optional>
#include <set>

#include "constrain/grammar.hpp"
#include "constrain/regex_ast.hpp"
#include "specd/error.hpp"
#include "tokenizer/components.hpp"

namespace specd::constrain {
namespace {

using regex_detail::CodeRanges;
using regex_detail::kMaxCodePoint;
using regex_detail::kUnbounded;
using regex_detail::NodeKind;
using regex_detail::RegexAst;
using regex_detail::RegexNode;

// Longer non-atomic expressions are moved into a rule before being remembered, so that a node
// reused by the nullable rewrite costs one rule reference instead of a copy of its text.
constexpr size_t kInlineLimit = 200;

struct Expr {
  Expr() = default;
  explicit Expr(std::string t, bool is_atom = false) : text(std::move(t)), atom(is_atom) {}

  std::string text;      // a GBNF sequence; "" is the empty string
  bool atom = false;     // `text` takes a postfix operator as a whole
  bool literal = false;  // the language is exactly the string `lit` (output bytes)
  std::string lit;
};

void append_utf8(std::string& out, uint32_t cp) {
  tokenizer::detail::append_utf8(out, cp);
}

Expr literal_expr(std::string lit) {
  size_t code_points = 0;
  for (char c : lit) code_points += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  Expr e(lit.empty() ? std::string() : gbnf_literal(lit), code_points == 1);
  e.literal = true;
  e.lit = std::move(lit);
  return e;
}

void append_class_char(std::string& out, uint32_t cp) {
  static constexpr std::string_view kSpecial = "\\[]-^\"";
  if (cp >= 0x20 && cp < 0x7F && kSpecial.find(char(cp)) == std::string_view::npos) {
    out += char(cp);
    return;
  }
  static constexpr char kHex[] = "0123456789ABCDEF";
  const int digits = cp < 0x80 ? 2 : cp <= 0xFFFF ? 4 : 8;
  out += cp < 0x80 ? "\\x" : cp <= 0xFFFF ? "\\u" : "\\U";
  for (int i = digits - 1; i >= 0; --i) out += kHex[(cp >> (4 * i)) & 0xF];
}

// A GBNF class for `set` (non-empty), negated when that takes fewer ranges.
std::string char_class(const CodeRanges& set) {
  const CodeRanges comp = regex_detail::complement(set);
  if (comp.empty()) return ".";
  const bool negated = comp.size() <= set.size();
  std::string out = negated ? "[^" : "[";
  for (const auto& [lo, hi] : negated ? comp : set) {
    append_class_char(out, lo);
    if (hi == lo) continue;
    if (hi > lo + 1) out += '-';
    append_class_char(out, hi);
  }
  out += ']';
  return out;
}

std::string postfix(uint32_t min, uint32_t max) {
  if (max == kUnbounded) {
    if (min <= 1) return min == 0 ? "*" : "+";
    std::string out = "{";
    out += std::to_string(min);
    out += ",}";
    return out;
  }
  if (min == 0 && max == 1) return "?";
  std::string out = "{";
  out += std::to_string(min);
  if (max != min) {
    out += ',';
    out += std::to_string(max);
  }
  out += '}';
  return out;
}

std::string join(const std::string& a, const std::string& b, std::string_view sep = " ") {
  if (a.empty()) return b;
  if (b.empty()) return a;
  std::string out = a;
  out += sep;
  out += b;
  return out;
}

std::string or_empty(std::string text) {
  return text.empty() ? std::string("\"\"") : std::move(text);
}

class Emitter {
 public:
  Emitter(const RegexAst& ast, std::string_view prefix, std::vector<std::string>& rules, RegexContext context)
      : ast_(ast), prefix_(prefix), rules_(rules), context_(context) {}
  std::string top();

 private:
  Expr emit(uint32_t id);
  std::optional<Expr> nonempty(uint32_t id);
  Expr sequence(const std::vector<uint32_t>& kids);
  std::optional<Expr> nonempty_sequence(const std::vector<uint32_t>& kids);
  Expr repeat(const RegexNode& node);
  Expr chars(const CodeRanges& set);
  Expr json_chars(const CodeRanges& set);
  Expr alternatives(const std::vector<std::string>& alts);
  std::string rule(const std::string& body);
  std::string atom(const Expr& e) { return e.atom ? e.text : rule(e.text); }
  Expr remember(std::optional<Expr>& slot, Expr e);

  const RegexAst& ast_;
  std::string prefix_;
  std::vector<std::string>& rules_;
  RegexContext context_;
  std::vector<bool> nullable_;
  std::vector<std::optional<Expr>> emitted_;
  std::vector<std::optional<Expr>> nonempty_;  // only for nullable nodes; unset = not yet done
  std::vector<bool> nonempty_done_;
  std::map<std::string, std::string> rule_by_body_;  // repeated character alternatives
  size_t rule_count_ = 0;
};

std::string Emitter::top() {
  const size_t n = ast_.nodes.size();
  nullable_.assign(n, false);
  for (size_t id = 0; id < n; ++id) {  // children precede parents (regex_ast.hpp)
    const RegexNode& node = ast_.nodes[id];
    bool all = true, any = false;
    for (uint32_t k : node.kids) {
      all = all && nullable_[k];
      any = any || nullable_[k];
    }
    nullable_[id] = node.kind == NodeKind::kEmpty || (node.kind == NodeKind::kSeq && all) ||
                    (node.kind == NodeKind::kAlt && any) || (node.kind == NodeKind::kRepeat && (node.min == 0 || any));
  }
  emitted_.assign(n, std::nullopt);
  nonempty_.assign(n, std::nullopt);
  nonempty_done_.assign(n, false);

  std::vector<std::string> alts;
  for (const auto& alt : ast_.alternatives) {
    std::string text = emit(alt.node).text;
    if (context_ == RegexContext::kJsonString && !(alt.anchored_start && alt.anchored_end)) {
      // `pattern` is a search: unanchored ends take any characters (including newlines).
      const std::string any = json_chars({{0, kMaxCodePoint}}).text + "*";
      if (text.empty()) {
        text = any;
      } else {
        if (!alt.anchored_start) text = join(any, text);
        if (!alt.anchored_end) text = join(text, any);
      }
    }
    alts.push_back(or_empty(std::move(text)));
  }
  return alternatives(alts).text;
}

Expr Emitter::remember(std::optional<Expr>& slot, Expr e) {
  if (e.text.size() > kInlineLimit && !e.atom) e = Expr(rule(e.text), true);
  slot = e;
  return e;
}

Expr Emitter::emit(uint32_t id) {
  if (emitted_[id]) return *emitted_[id];
  const RegexNode& node = ast_.nodes[id];
  Expr e;
  switch (node.kind) {
    case NodeKind::kEmpty:
      e = literal_expr({});
      break;
    case NodeKind::kChars:
      e = chars(node.chars);
      break;
    case NodeKind::kSeq:
      e = sequence(node.kids);
      break;
    case NodeKind::kRepeat:
      e = repeat(node);
      break;
    case NodeKind::kAlt: {
      std::vector<std::string> alts;
      for (uint32_t k : node.kids) alts.push_back(or_empty(emit(k).text));
      e = alternatives(alts);
      break;
    }
  }
  return remember(emitted_[id], std::move(e));
}

// The node's strings other than the empty one; nullopt when it has no other. A repetition
// body goes through this, so that no rule loops on the empty string.
std::optional<Expr> Emitter::nonempty(uint32_t id) {
  if (!nullable_[id]) return emit(id);
  if (nonempty_done_[id]) return nonempty_[id];
  const RegexNode& node = ast_.nodes[id];
  std::optional<Expr> e;
  if (node.kind == NodeKind::kAlt) {
    std::vector<std::string> alts;
    for (uint32_t k : node.kids) {
      if (auto ke = nonempty(k)) alts.push_back(ke->text);
    }
    if (!alts.empty()) e = alternatives(alts);
  } else if (node.kind == NodeKind::kSeq) {
    e = nonempty_sequence(node.kids);
  } else if (node.kind == NodeKind::kRepeat && node.max > 0) {
    // X{m,n} with X nullable is X'{0,n} (X' = X without ""); without "" it is X'{1,n}.
    if (auto body = nonempty(node.kids[0])) e = node.max == 1 ? *body : Expr{atom(*body) + postfix(1, node.max)};
  }
  nonempty_done_[id] = true;
  if (!e) return std::nullopt;
  return remember(nonempty_[id], std::move(*e));
}

// Every kid is nullable. nonempty(k0 k1 .. kn) = nonempty(k0) k1..kn | nonempty(k1 .. kn),
// built from the end with the suffixes k_i..kn as rules, so the text stays linear.
std::optional<Expr> Emitter::nonempty_sequence(const std::vector<uint32_t>& kids) {
  std::optional<Expr> result;
  std::string suffix;  // GBNF for kids[i+1..]
  for (size_t i = kids.size(); i-- > 0;) {
    if (auto head = nonempty(kids[i])) {
      std::string alt = join(head->text, suffix);
      result = result ? alternatives({alt, result->text}) : Expr{alt};
    }
    if (i > 0) {
      suffix = join(emit(kids[i]).text, suffix);
      if (suffix.find(' ') != std::string::npos) suffix = rule(suffix);
    }
  }
  return result;
}

// Consecutive literals are merged into one GBNF string.
Expr Emitter::sequence(const std::vector<uint32_t>& kids) {
  std::vector<std::string> parts;
  std::string run;
  bool all_literal = true, last_atom = false;
  for (uint32_t k : kids) {
    Expr e = emit(k);
    if (e.literal) {
      run += e.lit;
      continue;
    }
    all_literal = false;
    if (!run.empty()) parts.push_back(gbnf_literal(run));
    run.clear();
    if (!e.text.empty()) parts.push_back(std::move(e.text));
    last_atom = e.atom;
  }
  if (all_literal) return literal_expr(std::move(run));
  if (!run.empty()) parts.push_back(gbnf_literal(run));
  const bool atom = parts.size() == 1 && run.empty() && last_atom;
  std::string text;
  for (const auto& p : parts) text = join(text, p);
  return Expr{std::move(text), atom};
}

Expr Emitter::repeat(const RegexNode& node) {
  const uint32_t kid = node.kids[0];
  uint32_t min = node.min;
  std::optional<Expr> body;
  if (nullable_[kid]) {
    body = nonempty(kid);  // X{m,n} = X'{0,n} when X matches ""
    min = 0;
  } else {
    body = emit(kid);
  }
  if (!body || node.max == 0) return literal_expr({});
  if (min == 1 && node.max == 1) return *body;
  return Expr{atom(*body) + postfix(min, node.max)};
}

Expr Emitter::chars(const CodeRanges& set) {
  if (context_ == RegexContext::kJsonString) return json_chars(set);
  if (set.size() == 1 && set[0].first == set[0].second) {
    std::string lit;
    append_utf8(lit, set[0].first);
    return literal_expr(std::move(lit));
  }
  return Expr{char_class(set), true};
}

// The JSON string-body forms of the characters in `set` (regex_gbnf.hpp, kJsonString).
Expr Emitter::json_chars(const CodeRanges& set) {
  static const CodeRanges kRaw = regex_detail::complement({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
  const CodeRanges raw = regex_detail::intersect(set, kRaw);
  const CodeRanges controls = regex_detail::intersect(set, {{0, 0x1F}});
  std::vector<Expr> parts;
  if (raw.size() == 1 && raw[0].first == raw[0].second) {
    std::string lit;
    append_utf8(lit, raw[0].first);
    parts.push_back(literal_expr(std::move(lit)));
  } else if (!raw.empty()) {
    parts.push_back(Expr{char_class(raw), true});
  }
  if (regex_detail::contains(set, '"')) parts.push_back(literal_expr("\\\""));
  if (regex_detail::contains(set, '\\')) parts.push_back(literal_expr("\\\\"));
  std::string letters;  // short escapes
  for (auto [cp, letter] : {std::pair{'\b', 'b'}, {'\t', 't'}, {'\n', 'n'}, {'\f', 'f'}, {'\r', 'r'}}) {
    if (regex_detail::contains(controls, uint32_t(cp))) letters += letter;
  }
  if (!letters.empty()) parts.push_back(Expr{gbnf_literal("\\") + " [" + letters + "]"});
  for (uint32_t high = 0; high < 2; ++high) {  // \u00XX, hex digits in either case
    std::string nibbles;
    for (uint32_t low = 0; low < 16; ++low) {
      if (!regex_detail::contains(controls, high * 16 + low)) continue;
      nibbles += low < 10 ? char('0' + low) : char('a' + low - 10);
      if (low >= 10) nibbles += char('A' + low - 10);
    }
    std::string prefix = "\\u00";
    prefix += char('0' + high);
    if (!nibbles.empty()) parts.push_back(Expr{gbnf_literal(prefix) + " [" + nibbles + "]"});
  }
  if (parts.size() == 1) return parts[0];
  std::string body;
  for (const auto& p : parts) body = join(body, p.text, " | ");
  auto [it, fresh] = rule_by_body_.try_emplace(body);
  if (fresh) it->second = rule(body);
  return Expr{it->second, true};
}

// One alternative is returned as is; several become a rule (identical ones merged).
Expr Emitter::alternatives(const std::vector<std::string>& alts) {
  std::string body;
  std::set<std::string_view> seen;
  for (const auto& a : alts) {
    if (seen.insert(a).second) body = join(body, a, " | ");
  }
  if (seen.size() == 1) return Expr{alts[0]};
  return Expr{rule(body), true};
}

std::string Emitter::rule(const std::string& body) {
  std::string name = prefix_;
  name += '-';
  name += std::to_string(++rule_count_);
  std::string line = name;
  line += " ::= ";
  line += body;
  rules_.push_back(std::move(line));
  return name;
}

}  // namespace

std::string regex_to_gbnf(std::string_view regex, std::string_view rule_prefix, std::vector<std::string>& rules,
                          RegexContext context) {
  const bool prefix_ok =
      !rule_prefix.empty() &&
      rule_prefix.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") ==
          std::string_view::npos;
  if (!prefix_ok) throw Error(ErrorCode::kInvalidArgument, "regex_to_gbnf: rule prefix must be letters, digits, '-'");
  const RegexAst ast = regex_detail::parse_regex(regex);
  return Emitter(ast, rule_prefix, rules, context).top();
}

std::string regex_to_gbnf_grammar(std::string_view regex, RegexContext context) {
  std::vector<std::string> rules;
  const std::string expr = regex_to_gbnf(regex, "regex", rules, context);
  std::string out = "root ::= ";
  out += expr;
  out += '\n';
  for (const auto& r : rules) {
    out += r;
    out += '\n';
  }
  return out;
}

}  // namespace specd::constrain

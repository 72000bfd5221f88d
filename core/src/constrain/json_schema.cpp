// The JSON Schema walk (json_schema.hpp). Every schema node becomes a GBNF expression; nodes
// with alternatives or structure become named rules (named after their place in the schema,
// e.g. root-address-city), shared value rules are added once, and $ref targets become rules
// visited from a work list, so recursion in the schema is recursion in the grammar. The C++
// recursion follows the schema's nesting only, up to kMaxSchemaDepth.
#include "constrain/json_schema.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "common/untrusted.hpp"
#include "constrain/grammar.hpp"
#include "constrain/json_schema_detail.hpp"
#include "constrain/regex_gbnf.hpp"
#include "specd/error.hpp"

namespace specd::constrain::schema_detail {
namespace {

// The keywords json_schema.hpp supports (besides annotations), space-separated.
constexpr std::string_view kSupported =
    " type properties required additionalProperties enum const items prefixItems minItems maxItems anyOf oneOf"
    " allOf $ref minLength maxLength pattern format minimum maximum exclusiveMinimum exclusiveMaximum uniqueItems ";

bool is_supported(std::string_view k) {
  if (k.empty() || k.find(' ') != std::string_view::npos) return false;
  std::string word = " ";
  word += k;
  word += ' ';
  return kSupported.find(word) != std::string_view::npos;
}

// Whether `s` has a keyword that constrains other than those in `except`.
bool constrains_besides(const Json& s, std::initializer_list<std::string_view> except) {
  for (const auto& [k, v] : s.items()) {
    if (!is_annotation(k) && std::find(except.begin(), except.end(), k) == except.end()) return true;
  }
  return false;
}

bool is_name(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; });
}

// Nesting of a JSON value, measured without recursion and given up past `limit`.
bool deeper_than(const Json& v, int limit) {
  std::vector<std::pair<const Json*, int>> work{{&v, 0}};
  while (!work.empty()) {
    auto [j, d] = work.back();
    work.pop_back();
    if (d > limit) return true;
    if (j->is_structured())
      for (const Json& c : *j) work.push_back({&c, d + 1});
  }
  return false;
}

}  // namespace

std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += ' ';
    out += p;
  }
  return out;
}

// A JSON value written compactly, as a GBNF literal.
std::string json_literal(const Json& v, const std::string& path) {
  if (deeper_than(v, kMaxSchemaDepth)) fail("an enum/const value nests too deeply", path);
  try {
    return gbnf_literal(v.dump());
  } catch (const nlohmann::json::exception&) {
    fail("an enum/const value or property name is not valid UTF-8", path);
  }
}

uint64_t read_count(const Json& s, const char* key, const std::string& path) {
  if (!s.contains(key)) return 0;
  const Json& v = s[key];
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
  if (v.is_number_float() && v.get<double>() >= 0 && v.get<double>() == std::floor(v.get<double>()))
    return v.get<double>() >= 1.8e19 ? kUnbounded : uint64_t(v.get<double>());
  fail(std::string("'") + key + "' must be a non-negative integer", path);
}

std::string Converter::grammar() {
  // nlohmann copies and compares values recursively (allOf merges do both): bound the whole
  // document's nesting first, without recursion. A schema within kMaxSchemaDepth nests far less.
  if (deeper_than(root_, kMaxDocumentDepth)) {
    fail("the schema document nests deeper than " + std::to_string(kMaxDocumentDepth) + " levels", "");
  }
  const std::string root_body = body(root_, "", "root", 0);
  for (size_t i = 0; i < refs_.size(); ++i) {  // grows while visiting
    const auto [target, path, name] = refs_[i];
    define(name, body(*target, path, name, 0));
  }
  for (std::vector<Shared> todo(shared_.begin(), shared_.end()); !todo.empty();) {
    const Shared s = todo.back();
    todo.pop_back();
    for (Shared d : shared_deps(s))
      if (shared_.insert(d).second) todo.push_back(d);
  }
  for (Shared s : shared_) define(shared_name(s), shared_body(s));
  define("root", root_body);
  std::rotate(lines_.rbegin(), lines_.rbegin() + 1, lines_.rend());  // root first, for readers
  std::string out;
  out.reserve(text_bytes_);
  for (const std::string& line : lines_) {
    out += line;
    out += '\n';
  }
  return out;
}

std::string Converter::visit(const Json& s, const std::string& path, const std::string& hint, int depth) {
  std::string b = body(s, path, hint, depth);
  return is_name(b) ? b : add_rule(hint, b);
}

// A rule body (alternatives allowed) for schema `s`.
std::string Converter::body(const Json& s, const std::string& path, const std::string& hint, int depth) {
  if (depth > kMaxSchemaDepth) fail("the schema nests deeper than " + std::to_string(kMaxSchemaDepth), path);
  if (s.is_boolean()) {
    if (!s.get<bool>()) fail("the schema false allows no value", path);
    return shared(Shared::kValue);
  }
  if (!s.is_object()) fail("a schema must be an object or a boolean", path);
  for (const auto& [k, v] : s.items()) {
    const bool unique_items = k == "uniqueItems" && !(v.is_boolean() && !v.get<bool>());
    if (unique_items || (!is_annotation(k) && !is_supported(k))) fail("unsupported keyword '" + clip(k) + "'", path);
  }
  if (s.contains("allOf") || (s.contains("$ref") && constrains_besides(s, {"$ref"}))) {
    return body(merge_schema(root_, s, {}, path), path, hint, depth + 1);
  }
  if (s.contains("$ref")) return ref_rule(s["$ref"], path);
  if (s.contains("anyOf") && s.contains("oneOf")) fail("'anyOf' together with 'oneOf' is not supported", path);
  // oneOf is read as anyOf: generating one branch is what is asked; a grammar cannot exclude
  // the instances that happen to match two branches.
  if (s.contains("anyOf")) return any_of(s, "anyOf", path, hint, depth);
  if (s.contains("oneOf")) return any_of(s, "oneOf", path, hint, depth);
  if (s.contains("enum") || s.contains("const")) return enum_body(s, path);
  return typed_body(s, path, hint, depth);
}

std::string Converter::any_of(const Json& s, const std::string& key, const std::string& path, const std::string& hint,
                              int depth) {
  const Json& branches = s[key];
  if (!branches.is_array() || branches.empty()) fail("'" + key + "' must be a non-empty list of schemas", path);
  // Sibling keywords apply to every branch: {"type": "object", "anyOf": [A, B]} is
  // anyOf [allOf(siblings, A), allOf(siblings, B)].
  Json siblings;
  const bool distribute = constrains_besides(s, {key});
  if (distribute) {
    siblings = s;
    siblings.erase(key);
  }
  std::vector<std::string> alts;
  for (size_t i = 0; i < branches.size(); ++i) {
    const Json& branch = branches[i];
    if (branch.is_boolean() && !branch.get<bool>()) continue;  // allows nothing: not an alternative
    const std::string p = child_path(child_path(path, key), std::to_string(i));
    std::string h = hint;
    h += '-';
    h += std::to_string(i);
    std::string alt = distribute ? visit(merge_schema(root_, siblings, {&branch}, p), p, h, depth + 1)
                                 : visit(branch, p, h, depth + 1);
    if (std::find(alts.begin(), alts.end(), alt) == alts.end()) alts.push_back(std::move(alt));
  }
  if (alts.empty()) fail("no branch of '" + key + "' allows a value", path);
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return out;
}

std::string Converter::enum_body(const Json& s, const std::string& path) {
  if (constrains_besides(s, {"enum", "const", "type"})) {
    for (const auto& [k, v] : s.items()) {
      if (k != "enum" && k != "const" && k != "type" && !is_annotation(k))
        fail("'enum'/'const' together with '" + clip(k) + "' is not supported", path);
    }
  }
  std::vector<const Json*> values;
  if (s.contains("enum")) {
    const Json& e = s["enum"];
    if (!e.is_array()) fail("'enum' must be a list", path);
    if (e.size() > kMaxEnumValues) fail("'enum' has more than " + std::to_string(kMaxEnumValues) + " values", path);
    for (const Json& v : e)
      if (!s.contains("const") || v == s["const"]) values.push_back(&v);
  } else {
    values.push_back(&s["const"]);
  }
  if (s.contains("type")) {  // keep the values of an allowed type
    Json types = s["type"].is_array() ? s["type"] : Json::array({s["type"]});
    auto allowed = [&](const Json& v) {
      for (const Json& t : types) {
        if (!t.is_string()) fail("'type' must be a string or a list of strings", path);
        const std::string& n = t.get_ref<const std::string&>();
        const bool integral =
            v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
        if ((n == "string" && v.is_string()) || (n == "number" && v.is_number()) || (n == "integer" && integral) ||
            (n == "boolean" && v.is_boolean()) || (n == "null" && v.is_null()) || (n == "object" && v.is_object()) ||
            (n == "array" && v.is_array()))
          return true;
      }
      return false;
    };
    std::erase_if(values, [&](const Json* v) { return !allowed(*v); });
  }
  if (values.empty()) fail("no 'enum'/'const' value is allowed", path);
  std::vector<std::string> alts;
  std::set<std::string> seen;
  for (const Json* v : values) {
    std::string lit = json_literal(*v, path);
    if (seen.insert(lit).second) alts.push_back(std::move(lit));
  }
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return out;
}

std::string Converter::typed_body(const Json& s, const std::string& path, const std::string& hint, int depth) {
  std::set<std::string> types;
  if (s.contains("type")) {
    const Json& t = s["type"];
    const Json list = t.is_array() ? t : Json::array({t});
    if (list.empty()) fail("'type' must not be an empty list", path);
    for (const Json& n : list) {
      static const std::set<std::string> kTypes = {"string", "number", "integer", "boolean", "null", "object", "array"};
      if (!n.is_string() || !kTypes.count(n.get<std::string>()))
        fail("'type' must be one or a list of string, number, integer, boolean, null, object, array", path);
      types.insert(n.get<std::string>());
    }
  } else {  // no type: generate the types the keywords describe (other types are valid too)
    for (const char* k : {"properties", "required", "additionalProperties"})
      if (s.contains(k)) types.insert("object");
    for (const char* k : {"items", "prefixItems", "minItems", "maxItems"})
      if (s.contains(k)) types.insert("array");
    for (const char* k : {"minLength", "maxLength", "pattern", "format"})
      if (s.contains(k)) types.insert("string");
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(k)) types.insert("number");
    if (types.empty()) return shared(Shared::kValue);
  }
  std::vector<std::string> alts;
  if (types.count("object")) alts.push_back(object_body(s, path, hint, depth));
  if (types.count("array")) alts.push_back(array_body(s, path, hint, depth));
  if (types.count("string")) alts.push_back(string_body(s, path, hint));
  const bool number = types.count("number") > 0;
  if (number || types.count("integer")) {
    const Bounds b = read_bounds(s, path);
    if (!b.any()) {
      alts.push_back(shared(number ? Shared::kNumber : Shared::kInteger));
    } else {
      alts.push_back(number ? number_range_body(b, path) : integer_range_body(b, path));
    }
  }
  if (types.count("boolean")) alts.push_back(shared(Shared::kBoolean));
  if (types.count("null")) alts.push_back(shared(Shared::kNull));
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return out;
}

std::string Converter::string_body(const Json& s, const std::string& path, const std::string& hint) {
  const bool lengths = s.contains("minLength") || s.contains("maxLength");
  const std::string quote(kQuote);
  if (s.contains("format")) {
    if (!s["format"].is_string()) fail("'format' must be a string", path);
    const std::string& f = s["format"].get_ref<const std::string&>();
    if (s.contains("pattern") || lengths)
      fail("'format' together with 'pattern', 'minLength' or 'maxLength' is not supported", path);
    const auto rule = format_rule(f);
    if (!rule) fail("unsupported format '" + clip(f) + "'", path);
    return cat({quote, shared(*rule), quote});
  }
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) fail("'pattern' must be a string", path);
    if (lengths) fail("'pattern' together with 'minLength' or 'maxLength' is not supported", path);
    // Helper rules are named <name>--re-N: no other rule name holds "--" (unique_name).
    std::vector<std::string> rules;
    std::string expr;
    try {
      expr = regex_to_gbnf(s["pattern"].get_ref<const std::string&>(), unique_name(hint + "-pattern") + "--re", rules,
                           RegexContext::kJsonString);
    } catch (const Error& e) {
      fail(std::string("'pattern': ") + e.what(), path);
    }
    for (const std::string& r : rules) {
      text_bytes_ += r.size() + 1;
      lines_.push_back(r);
    }
    return cat({quote, expr, quote});
  }
  if (!lengths) return shared(Shared::kString);
  const uint64_t lo = read_count(s, "minLength", path);
  const uint64_t hi = s.contains("maxLength") ? read_count(s, "maxLength", path) : kUnbounded;
  if (lo > hi) fail("'minLength' is more than 'maxLength'", path);
  return cat({quote, repeat(shared(Shared::kChar), lo, hi, hint, path), quote});
}

std::string Converter::ref_rule(const Json& ref, const std::string& path) {
  const Json& target = resolve_ref(root_, ref, path);
  const std::string& pointer = ref.get_ref<const std::string&>();
  auto [it, fresh] = ref_names_.try_emplace(pointer);
  if (fresh) {
    it->second = unique_name(pointer.size() == 1 ? "ref-root" : "ref-" + pointer.substr(1));
    refs_.emplace_back(&target, pointer.substr(1), it->second);
  }
  return it->second;
}

// `atom` lo..hi times (hi may be kUnbounded). Counts above Grammar::kMaxRepeat are built as
// repetitions of a block of kMaxRepeat, so no count written exceeds it.
std::string Converter::repeat(const std::string& atom, uint64_t lo, uint64_t hi, const std::string& hint,
                              const std::string& path) {
  if (lo > kMaxCount) fail("a minimum count over " + std::to_string(kMaxCount) + " is not supported", path);
  if (hi != kUnbounded && hi > kMaxCount) hi = kUnbounded;  // more than any generation can reach
  // compile_gbnf expands a count into that many elements or rules at each place it is written,
  // so a large one is written once, as a rule that every equal repetition shares.
  constexpr uint64_t kInlineCount = 16;
  if (lo <= kInlineCount && (hi == kUnbounded || hi <= kInlineCount)) return repeat_text(atom, lo, hi, hint);
  auto [it, fresh] = repeats_.try_emplace(std::make_tuple(atom, lo, hi));
  if (fresh) it->second = add_rule(hint + "-repeat", repeat_text(atom, lo, hi, hint));
  return it->second;
}

std::string Converter::repeat_text(const std::string& atom, uint64_t lo, uint64_t hi, const std::string& hint) {
  const uint64_t k = Grammar::kMaxRepeat;
  auto count = [&](const std::string& a, uint64_t m, uint64_t n) -> std::string {
    if (n == 0) return {};
    if (m == 1 && n == 1) return a;
    if (m == 0 && n == 1) return a + "?";
    std::string out = a + "{" + std::to_string(m);
    if (n != m) out += "," + (n == kUnbounded ? std::string() : std::to_string(n));
    return out + "}";
  };
  std::string block;  // atom{k}, when a count exceeds k
  if (lo > k || (hi != kUnbounded && hi - lo > k)) block = add_rule(hint + "-block", count(atom, k, k));
  std::string out = lo > k ? cat({count(block, lo / k, lo / k), count(atom, lo % k, lo % k)}) : count(atom, lo, lo);
  if (hi == kUnbounded) return cat({out, atom + "*"});
  const uint64_t rest = hi - lo;
  if (rest <= k) return cat({out, count(atom, 0, rest)});
  // Up to `rest` more: (block{0,q-1} atom{0,k}) covers 0..q*k, (block{q} atom{0,r}) the remainder.
  const uint64_t q = rest / k, r = rest % k;
  std::string more = cat({count(block, 0, q - 1), count(atom, 0, k)});
  more += " | ";
  more += cat({count(block, q, q), count(atom, 0, r)});
  return cat({out, add_rule(hint + "-more", more)});
}

std::string Converter::shared(Shared s) {
  shared_.insert(s);
  return shared_name(s);
}

// A fresh rule name from `hint`: letters, digits and single '-' (never "--"), at most ~48
// characters, numbered when taken.
std::string Converter::unique_name(std::string_view hint) {
  std::string base;
  for (char c : hint) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) != 0;
    if (ok) {
      base += c;
    } else if (!base.empty() && base.back() != '-') {
      base += '-';
    }
    if (base.size() >= 48) break;
  }
  while (!base.empty() && base.back() == '-') base.pop_back();
  if (base.empty()) base = "s";
  std::string name = base;
  for (size_t& n = next_suffix_[base]; names_.count(name);) {
    name = base + "-" + std::to_string(++n + 1);
  }
  names_.insert(name);
  return name;
}

std::string Converter::add_rule(std::string_view hint, const std::string& body) {
  std::string name = unique_name(hint);
  define(name, body);
  return name;
}

void Converter::define(const std::string& name, const std::string& body) {
  text_bytes_ += name.size() + body.size() + 6;
  if (text_bytes_ > Grammar::kMaxTextBytes) {
    throw Error(ErrorCode::kInvalidArgument, "json_schema: the grammar for this schema would exceed " +
                                                 std::to_string(Grammar::kMaxTextBytes) + " bytes");
  }
  std::string line = name;
  line += " ::= ";
  line += body;
  lines_.push_back(std::move(line));
}

}  // namespace specd::constrain::schema_detail

namespace specd::constrain {

using schema_detail::Shared;

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
  return schema_detail::Converter(schema).grammar();
}

std::string json_object_gbnf() {
  std::string out = "root ::= object\n";
  for (Shared s : {Shared::kObject, Shared::kValue, Shared::kArray, Shared::kString, Shared::kChar, Shared::kNumber,
                   Shared::kBoolean, Shared::kNull, Shared::kWs}) {
    out += schema_detail::shared_name(s);
    out += " ::= ";
    out += schema_detail::shared_body(s);
    out += '\n';
  }
  return out;
}

std::string choice_to_gbnf(const std::vector<std::string>& choices) {
  if (choices.empty()) throw Error(ErrorCode::kInvalidArgument, "choice: the list of choices is empty");
  if (choices.size() > kMaxEnumValues) {
    throw Error(ErrorCode::kInvalidArgument, "choice: more than " + std::to_string(kMaxEnumValues) + " choices (" +
                                                 std::to_string(choices.size()) + ")");
  }
  std::string out = "root ::= ";
  std::set<std::string_view> seen;
  for (const std::string& c : choices) {
    if (!seen.insert(c).second) continue;
    if (seen.size() > 1) out += " | ";
    out += gbnf_literal(c);
  }
  out += '\n';
  return out;
}

}  // namespace specd::constrain

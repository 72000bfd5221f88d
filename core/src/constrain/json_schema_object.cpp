// Objects and arrays for the JSON Schema walk (json_schema_detail.hpp).
//
// Separators: every gap between tokens holds exactly one `ws` (bounded whitespace), so
// "{" ws members ws "}" and "[" ws items ws "]", never two `ws` in a row.
#include <algorithm>
#include <string>

#include "common/untrusted.hpp"
#include "constrain/grammar.hpp"
#include "constrain/json_schema.hpp"
#include "constrain/json_schema_detail.hpp"
#include "tokenizer/components.hpp"

namespace specd::constrain::schema_detail {
namespace {

// Longer member/item tails move into a rule, which keeps every rule body short.
constexpr size_t kInlineTail = 160;

std::string numbered(const std::string& hint, uint64_t i) {
  std::string out = hint;
  out += '-';
  out += std::to_string(i);
  return out;
}

std::string joined(const std::string& a, std::string_view sep, const std::string& b) {
  std::string out = a;
  out += sep;
  out += b;
  return out;
}

// Code points of valid UTF-8 (property names already passed json_literal's check).
std::vector<uint32_t> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    uint32_t cp = len == 1 ? b : b & (0x7F >> len);
    for (size_t j = 1; j < len && i + j < s.size(); ++j) cp = (cp << 6) | (static_cast<unsigned char>(s[i + j]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string utf8(uint32_t cp) {
  std::string out;
  tokenizer::detail::append_utf8(out, cp);
  return out;
}

bool raw_in_json(uint32_t cp) {
  return cp >= 0x20 && cp != '"' && cp != '\\';
}

void append_class_escape(std::string& out, uint32_t cp) {
  if (cp < 0x80 && std::isalnum(static_cast<int>(cp))) {
    out += char(cp);
    return;
  }
  static constexpr char kHex[] = "0123456789ABCDEF";
  const int digits = cp <= 0xFFFF ? 4 : 8;
  out += digits == 4 ? "\\u" : "\\U";
  for (int i = digits - 1; i >= 0; --i) out += kHex[(cp >> (4 * i)) & 0xF];
}

}  // namespace

std::string Converter::object_body(const Json& s, const std::string& path, const std::string& hint, int depth) {
  static const Json kNone = Json::object();
  const Json& props = s.contains("properties") ? s["properties"] : kNone;
  if (!props.is_object()) fail("'properties' must be an object", path);
  std::vector<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) fail("'required' must be a list of strings", path);
    for (const Json& k : s["required"]) {
      if (!k.is_string()) fail("'required' must be a list of strings", path);
      if (std::find(required.begin(), required.end(), k.get<std::string>()) == required.end())
        required.push_back(k.get<std::string>());
    }
  }
  const Json* additional = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
  if (additional && !additional->is_boolean() && !additional->is_object())
    fail("'additionalProperties' must be a schema", path);
  // Absent additionalProperties allows other keys, but generating none is still valid.
  const bool extras = additional && !(additional->is_boolean() && !additional->get<bool>());
  const std::string ws = shared(Shared::kWs);
  auto kv = [&](const std::string& key, const std::string& value) {
    return cat({json_literal(Json(key), path), ws, R"(":")", ws, value});
  };

  std::vector<std::pair<std::string, bool>> kvs;  // "key": value, required
  std::vector<std::string> listed;
  const std::string props_path = child_path(path, "properties");
  for (const auto& [key, ps] : props.items()) {
    const bool req = std::find(required.begin(), required.end(), key) != required.end();
    listed.push_back(key);
    if (ps.is_boolean() && !ps.get<bool>()) {
      if (req) fail("required property '" + clip(key) + "' has the schema false", path);
      continue;  // may not appear: never generated
    }
    kvs.emplace_back(kv(key, visit(ps, child_path(props_path, key), joined(hint, "-", key), depth + 1)), req);
  }
  std::string extra_value;
  if (extras) extra_value = visit(*additional, child_path(path, "additionalProperties"), hint + "-extra", depth + 1);
  for (const std::string& key : required) {  // required keys that `properties` does not list
    if (props.contains(key)) continue;
    if (additional && !extras) fail("required property '" + clip(key) + "' is forbidden by additionalProperties", path);
    listed.push_back(key);
    kvs.emplace_back(kv(key, extras ? extra_value : shared(Shared::kValue)), true);
  }
  std::string extra;
  if (extras) extra = add_rule(hint + "-extra-pair", cat({extra_key(listed, hint), ws, R"(":")", ws, extra_value}));
  return members(kvs, extra, hint);
}

// "{" ws members ws "}" where required members always appear, optional ones may, in order,
// then `extra` pairs (if any). Built from the end: `tail` is what may follow once some member
// has been written (each piece starting with a comma); `first` is the non-empty member lists
// from here on, starting with no comma; `nullable` says whether none at all is allowed.
std::string Converter::members(const std::vector<std::pair<std::string, bool>>& kvs, const std::string& extra,
                               const std::string& hint) {
  const std::string ws = shared(Shared::kWs);
  const std::string comma = cat({ws, R"(",")", ws});
  std::string tail = extra.empty() ? std::string() : "( " + cat({comma, extra}) + " )*";
  std::string first = extra.empty() ? std::string() : cat({extra, tail});
  bool nullable = true;
  // `first` is needed from the first required member back to the start only.
  const auto first_required = std::find_if(kvs.begin(), kvs.end(), [](const auto& m) { return m.second; });
  const size_t need_first = size_t(first_required - kvs.begin());
  for (size_t i = kvs.size(); i-- > 0;) {
    const auto& [kv, req] = kvs[i];
    const std::string with = cat({kv, tail});
    if (req) {
      first = with;
      nullable = false;
      tail = cat({comma, kv, tail});
    } else {
      if (i <= need_first) first = first.empty() ? with : add_rule(hint + "-from", joined(with, " | ", first));
      tail = cat({"( " + cat({comma, kv}) + " )?", tail});
    }
    if (tail.size() > kInlineTail) tail = add_rule(hint + "-rest", tail);
  }
  if (first.empty()) return cat({R"("{")", ws, R"("}")"});
  if (nullable) return cat({R"("{")", ws, "(", first, ws, ")?", R"("}")"});
  return cat({R"("{")", ws, first, ws, R"("}")"});
}

// A JSON string key (quotes included) that is none of `listed`, so extra pairs never repeat
// or shadow a listed property. A trie of the listed keys: while the key being written follows
// it, only raw characters are allowed (an escape could spell a listed key); one step off the
// trie, or a close quote where no listed key ends, and any string may follow.
std::string Converter::extra_key(const std::vector<std::string>& listed, const std::string& hint) {
  if (listed.empty()) return shared(Shared::kString);
  struct Node {
    std::map<uint32_t, size_t> next;
    bool terminal = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& key : listed) {
    size_t n = 0;
    for (uint32_t cp : code_points(key)) {
      const auto it = trie[n].next.find(cp);
      if (it != trie[n].next.end()) {
        n = it->second;
        continue;
      }
      const size_t child = trie.size();
      trie[n].next.emplace(cp, child);
      trie.emplace_back();
      n = child;
    }
    trie[n].terminal = true;
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < trie.size(); ++i) names.push_back(unique_name(hint + "-key"));
  const std::string off_trie = cat({shared(Shared::kChar) + "*", kQuote});
  for (size_t i = 0; i < trie.size(); ++i) {
    std::vector<std::string> alts;
    if (!trie[i].terminal) alts.emplace_back(kQuote);
    std::string other = R"([^"\\\x00-\x1F)";
    for (const auto& [cp, child] : trie[i].next) {
      if (!raw_in_json(cp)) continue;
      alts.push_back(cat({gbnf_literal(utf8(cp)), names[child]}));
      append_class_escape(other, cp);
    }
    other += ']';
    alts.push_back(cat({other, off_trie}));
    std::string body;
    for (const std::string& a : alts) body = body.empty() ? a : joined(body, " | ", a);
    define(names[i], body);
  }
  return cat({kQuote, names[0]});
}

std::string Converter::array_body(const Json& s, const std::string& path, const std::string& hint, int depth) {
  const Json* prefix = s.contains("prefixItems") ? &s["prefixItems"] : nullptr;
  const Json* items = s.contains("items") ? &s["items"] : nullptr;
  std::string prefix_key = "prefixItems";
  if (prefix && !prefix->is_array()) fail("'prefixItems' must be a list of schemas", path);
  if (items && items->is_array()) {  // the tuple form of drafts 4-7
    if (prefix) fail("'items' as a list together with 'prefixItems' is not supported", path);
    prefix = items;
    items = nullptr;
    prefix_key = "items";
  }
  if (items && !items->is_boolean() && !items->is_object()) fail("'items' must be a schema", path);
  const uint64_t lo = read_count(s, "minItems", path);
  uint64_t hi = s.contains("maxItems") ? read_count(s, "maxItems", path) : kUnbounded;
  const uint64_t p = prefix ? prefix->size() : 0;
  if (items && items->is_boolean() && !items->get<bool>()) {
    hi = std::min(hi, p);
  } else if (!items && prefix) {
    hi = std::min(hi, std::max(p, lo));  // json_schema.hpp: no items past prefixItems unless minItems asks
  }
  std::vector<std::string> atoms;  // the prefix items that may appear
  for (uint64_t i = 0; i < p && i < hi; ++i) {
    const Json& ps = (*prefix)[i];
    if (ps.is_boolean() && !ps.get<bool>()) {
      hi = i;  // item i may not exist
      break;
    }
    atoms.push_back(
        visit(ps, child_path(child_path(path, prefix_key), std::to_string(i)), numbered(hint, i), depth + 1));
  }
  if (lo > hi) fail("'minItems' asks for more items than the schema allows", path);
  const uint64_t n = atoms.size();
  std::string item;  // the schema of items past the prefix
  if (hi > n)
    item = items ? visit(*items, child_path(path, "items"), hint + "-item", depth + 1) : shared(Shared::kValue);

  const std::string ws = shared(Shared::kWs);
  const std::string comma = cat({ws, R"(",")", ws});
  std::string next;                                      // comma, item
  auto more_items = [&](uint64_t done) -> std::string {  // items after `done` written ones
    if (hi <= done) return {};
    if (next.empty()) next = add_rule(hint + "-next", cat({comma, item}));
    return repeat(next, lo > done ? lo - done : 0, hi == kUnbounded ? kUnbounded : hi - done, hint, path);
  };
  std::string first;
  if (n > 0) {
    std::string tail = more_items(n);
    for (uint64_t k = n - 1; k >= 1; --k) {  // prefix item k, after k items
      const std::string e = cat({comma, atoms[k], tail});
      tail = k >= lo ? add_rule(numbered(hint, k) + "-on", "( " + e + " )?") : e;
      if (tail.size() > kInlineTail) tail = add_rule(hint + "-rest", tail);
    }
    first = cat({atoms[0], tail});
  } else if (hi > 0) {
    first = cat({item, more_items(1)});
  }
  if (first.empty()) return cat({R"("[")", ws, R"("]")"});
  if (lo == 0) return cat({R"("[")", ws, "(", first, ws, ")?", R"("]")"});
  return cat({R"("[")", ws, first, ws, R"("]")"});
}

}  // namespace specd::constrain::schema_detail

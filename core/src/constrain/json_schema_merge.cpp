// allOf as one schema (json_schema_detail.hpp): the parts' keywords are combined where the
// combination is itself a keyword (types intersect, required lists unite, bounds tighten,
// enums intersect, property schemas both parts give become {"allOf": [a, b]}), and refused,
// naming the keyword, where it is not (two different patterns, formats, anyOfs, ...).
//
// Parts are gathered iteratively (allOf inside allOf, $ref to $ref) and counted, so a $ref
// cycle or a diamond of references fails after kMaxMergeParts parts instead of looping.
#include <algorithm>
#include <set>
#include <string>

#include "common/untrusted.hpp"
#include "constrain/json_schema.hpp"
#include "constrain/json_schema_detail.hpp"

namespace specd::constrain::schema_detail {

const Json& resolve_ref(const Json& root, const Json& ref, const std::string& path) {
  if (!ref.is_string()) fail("'$ref' must be a string", path);
  const std::string& r = ref.get_ref<const std::string&>();
  if (r.empty() || r[0] != '#')
    fail("'$ref' \"" + clip(r) + "\" is not local (only \"#...\" refs are supported)", path);
  if (r.size() == 1) return root;
  if (r[1] != '/') fail("'$ref' \"" + clip(r) + "\": anchors are not supported (use a JSON pointer)", path);
  try {
    return root.at(Json::json_pointer(r.substr(1)));
  } catch (const nlohmann::json::exception&) {
    fail("'$ref' \"" + clip(r) + "\" points to nothing", path);
  }
}

namespace {

constexpr size_t kMaxMergeParts = 1000;

bool is_true_schema(const Json& s) {
  return (s.is_boolean() && s.get<bool>()) || (s.is_object() && s.empty());
}

std::set<std::string> type_set(const Json& t, const std::string& path) {
  std::set<std::string> out;
  if (t.is_string()) {
    out.insert(t.get<std::string>());
  } else if (t.is_array()) {
    for (const Json& v : t) {
      if (!v.is_string()) fail("'type' must be a string or a list of strings", path);
      out.insert(v.get<std::string>());
    }
  } else {
    fail("'type' must be a string or a list of strings", path);
  }
  if (out.count("number")) out.insert("integer");  // integer instances are numbers
  return out;
}

class Merger {
 public:
  Merger(const Json& root, std::string path) : root_(root), path_(std::move(path)) {}

  void add(const std::vector<const Json*>& parts);
  Json take();

 private:
  void keyword(const std::string& k, const Json& v);
  void both(const std::string& k, Json& cur, const Json& v);

  const Json& root_;
  std::string path_;
  Json out_ = Json::object();
  // Parts whose additionalProperties forbids or constrains keys they do not list.
  std::vector<const Json*> closed_;
};

void Merger::add(const std::vector<const Json*>& parts) {
  std::vector<const Json*> work(parts.rbegin(), parts.rend());  // a stack, first part on top
  size_t count = 0;
  while (!work.empty()) {
    const Json& s = *work.back();
    work.pop_back();
    if (++count > kMaxMergeParts) {
      fail("allOf/$ref: more than " + std::to_string(kMaxMergeParts) + " schemas to merge (a $ref cycle?)", path_);
    }
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail("allOf includes the schema false, which allows no value", path_);
      continue;
    }
    if (!s.is_object()) fail("a schema must be an object or a boolean", path_);
    if (s.contains("additionalProperties") && !is_true_schema(s["additionalProperties"])) closed_.push_back(&s);
    std::vector<const Json*> nested;
    for (const auto& [k, v] : s.items()) {
      if (k == "allOf") {
        if (!v.is_array() || v.empty()) fail("'allOf' must be a non-empty list of schemas", path_);
        for (const Json& p : v) nested.push_back(&p);
      } else if (k == "$ref") {
        nested.push_back(&resolve_ref(root_, v, path_));
      } else {
        keyword(k, v);
      }
    }
    work.insert(work.end(), nested.rbegin(), nested.rend());
  }
}

void Merger::keyword(const std::string& k, const Json& v) {
  if (is_annotation(k)) return;
  auto it = out_.find(k);
  if (it == out_.end()) {
    out_[k] = v;
  } else if (*it != v) {
    both(k, *it, v);
  }
}

// Two parts give different values for keyword k: their conjunction, or a refusal.
void Merger::both(const std::string& k, Json& cur, const Json& v) {
  static const std::set<std::string> kLower = {"minimum", "exclusiveMinimum", "minLength", "minItems"};
  static const std::set<std::string> kUpper = {"maximum", "exclusiveMaximum", "maxLength", "maxItems"};
  if ((kLower.count(k) || kUpper.count(k)) && cur.is_number() && v.is_number()) {
    const bool take_v = kLower.count(k) ? v.get<double>() > cur.get<double>() : v.get<double>() < cur.get<double>();
    if (take_v) cur = v;
  } else if (k == "type") {
    std::set<std::string> a = type_set(cur, path_), b = type_set(v, path_);
    Json types = Json::array();
    for (const std::string& t : a)
      if (b.count(t) && !(t == "integer" && a.count("number") && b.count("number"))) types.push_back(t);
    if (types.empty()) fail("allOf: the parts allow no common type", path_);
    cur = types.size() == 1 ? types[0] : types;
  } else if (k == "required" && cur.is_array() && v.is_array()) {
    for (const Json& r : v)
      if (std::find(cur.begin(), cur.end(), r) == cur.end()) cur.push_back(r);
  } else if (k == "properties" && cur.is_object() && v.is_object()) {
    for (const auto& [name, ps] : v.items()) {
      auto it = cur.find(name);
      if (it == cur.end()) {
        cur[name] = ps;
      } else if (*it != ps) {
        *it = Json{{"allOf", Json::array({*it, ps})}};
      }
    }
  } else if ((k == "items" && !cur.is_array() && !v.is_array()) || k == "additionalProperties") {
    if (is_true_schema(cur) || (v.is_boolean() && !v.get<bool>())) {
      cur = v;
    } else if (!is_true_schema(v) && !(cur.is_boolean() && !cur.get<bool>())) {
      cur = Json{{"allOf", Json::array({cur, v})}};
    }
  } else if (k == "enum" && cur.is_array() && v.is_array()) {
    if (cur.size() * v.size() > kMaxEnumValues * 100) fail("allOf: enums too large to intersect", path_);
    Json common = Json::array();
    for (const Json& e : cur)
      if (std::find(v.begin(), v.end(), e) != v.end()) common.push_back(e);
    if (common.empty()) fail("allOf: the enums have no value in common", path_);
    cur = std::move(common);
  } else {
    fail("allOf: cannot merge two different '" + clip(k) + "'", path_);
  }
}

Json Merger::take() {
  // additionalProperties of a part applies to keys that part does not list, whichever part
  // lists them: refuse rather than guess when the merged object lists such a key.
  for (const Json* part : closed_) {
    const Json* own = part->contains("properties") ? &(*part)["properties"] : nullptr;
    auto listed = [&](const std::string& key) { return own && own->is_object() && own->contains(key); };
    if (out_.contains("properties") && out_["properties"].is_object()) {
      for (const auto& [key, unused] : out_["properties"].items()) {
        if (!listed(key)) fail("allOf: cannot merge 'additionalProperties' with another part's properties", path_);
      }
    }
    if (out_.contains("required") && out_["required"].is_array()) {
      for (const Json& key : out_["required"]) {
        if (key.is_string() && !listed(key.get<std::string>()))
          fail("allOf: cannot merge 'additionalProperties' with another part's required keys", path_);
      }
    }
  }
  return std::move(out_);
}

}  // namespace

Json merge_schema(const Json& root, const Json& schema, const std::vector<const Json*>& extra_parts,
                  const std::string& path) {
  Merger m(root, path);
  std::vector<const Json*> parts{&schema};
  parts.insert(parts.end(), extra_parts.begin(), extra_parts.end());
  m.add(parts);
  return m.take();
}

}  // namespace specd::constrain::schema_detail

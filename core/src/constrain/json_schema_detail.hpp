// Internals of the JSON Schema translator (json_schema.hpp), split by concern:
//   json_schema.cpp         the walk over the schema: keywords, types, strings, enums, refs
//   json_schema_object.cpp  objects (member order, optional members, extra keys) and arrays
//   json_schema_values.cpp  shared rules (value, string, number, formats) and numeric ranges
//   json_schema_merge.cpp   allOf (and $ref or anyOf with sibling keywords) as one schema
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace specd::constrain::schema_detail {

using Json = nlohmann::ordered_json;

// Throws kInvalidArgument "json_schema: <message> at <path>" (path a JSON pointer, "" = root).
[[noreturn]] void fail(std::string_view message, std::string_view path);
// `parent` + "/" + `token` with ~ and / escaped as JSON pointers do (token clipped if long).
std::string child_path(std::string_view parent, std::string_view token);

bool is_annotation(std::string_view keyword);  // title, description, ...: ignored

// Rules every grammar may share, defined once on first use. Bodies may use other shared rules
// (shared_deps lists them).
enum class Shared : uint8_t {
  kWs,
  kValue,
  kObject,
  kArray,
  kString,
  kChar,
  kNumber,
  kInteger,
  kBoolean,
  kNull,
  kDate,
  kTime,
  kDateTime,
  kEmail,
  kUuid,
  kUri,
  kIpv4,
  kHostname,
  kLabel,
  kCount,
};
const char* shared_name(Shared s);
std::string shared_body(Shared s);
std::vector<Shared> shared_deps(Shared s);
// The shared rule for a `format` value, or nullopt for a format not supported.
std::optional<Shared> format_rule(std::string_view format);

// minimum/maximum/exclusiveMinimum/exclusiveMaximum of one schema (draft-4 boolean exclusives
// included), the tighter bound kept where both forms are given.
struct Bounds {
  std::optional<double> lo, hi;
  bool lo_exclusive = false, hi_exclusive = false;
  bool any() const { return lo || hi; }
};
Bounds read_bounds(const Json& schema, const std::string& path);
// GBNF alternatives (a rule body) for the integers, or the numbers, within `b` (b.any()).
std::string integer_range_body(const Bounds& b, const std::string& path);
std::string number_range_body(const Bounds& b, const std::string& path);

// The schema a local "$ref" points to ("#", "#/$defs/x", any "#/json/pointer").
const Json& resolve_ref(const Json& root, const Json& ref, const std::string& path);

// One schema equivalent to `schema` whose allOf parts and $ref (followed, with its siblings)
// are merged in; fails naming the keyword where two parts cannot be merged. `extra_parts` are
// merged in too (anyOf siblings distributed over a branch). The result holds no allOf and no
// top-level $ref; nested schemas that both parts constrain become {"allOf": [a, b]} and are
// merged when the walk reaches them.
Json merge_schema(const Json& root, const Json& schema, const std::vector<const Json*>& extra_parts,
                  const std::string& path);

inline constexpr uint64_t kUnbounded = UINT64_MAX;     // a count without upper bound
inline constexpr std::string_view kQuote = R"("\"")";  // GBNF for the JSON string delimiter

// GBNF sequence of the non-empty parts, space-separated.
std::string cat(std::initializer_list<std::string_view> parts);
// A JSON value written compactly (dump()), as a GBNF literal; fails for invalid UTF-8.
std::string json_literal(const Json& v, const std::string& path);
// A non-negative integer keyword (minItems, ...), 0 when absent.
uint64_t read_count(const Json& s, const char* key, const std::string& path);

// The walk over one schema document (json_schema.cpp, json_schema_object.cpp). Single use.
//
// Conventions: `path` is the JSON pointer of the schema being read (for messages); `hint` names
// the rules made for it (unique_name makes it unique); `depth` counts the nesting walked so far
// and is refused past kMaxSchemaDepth. A "body" may hold alternatives (a rule's right side); an
// "atom" is a rule name or a single item, usable anywhere in a sequence.
class Converter {
 public:
  explicit Converter(const Json& root) : root_(root) {
    for (size_t s = 0; s < size_t(Shared::kCount); ++s) names_.insert(shared_name(Shared(s)));
    names_.insert("root");
  }
  // The whole grammar, `root` first. Throws specd::Error (kInvalidArgument).
  std::string grammar();

 private:
  std::string visit(const Json& s, const std::string& path, const std::string& hint, int depth);  // an atom
  std::string body(const Json& s, const std::string& path, const std::string& hint, int depth);
  std::string any_of(const Json& s, const std::string& key, const std::string& path, const std::string& hint,
                     int depth);
  std::string enum_body(const Json& s, const std::string& path);
  std::string typed_body(const Json& s, const std::string& path, const std::string& hint, int depth);
  std::string string_body(const Json& s, const std::string& path, const std::string& hint);
  std::string object_body(const Json& s, const std::string& path, const std::string& hint, int depth);
  std::string array_body(const Json& s, const std::string& path, const std::string& hint, int depth);
  // kvs: the GBNF of each `"key": value` pair and whether it is required; extra: an atom for
  // one additional pair ("" = none allowed).
  std::string members(const std::vector<std::pair<std::string, bool>>& kvs, const std::string& extra,
                      const std::string& hint);
  std::string extra_key(const std::vector<std::string>& listed, const std::string& hint);
  std::string ref_rule(const Json& ref, const std::string& path);  // the rule of a $ref target
  // `atom` lo..hi times (hi may be kUnbounded; above kMaxCount it is read as kUnbounded).
  std::string repeat(const std::string& atom, uint64_t lo, uint64_t hi, const std::string& hint,
                     const std::string& path);
  std::string repeat_text(const std::string& atom, uint64_t lo, uint64_t hi, const std::string& hint);
  std::string shared(Shared s);  // the shared rule's name; defines it in the grammar
  std::string unique_name(std::string_view hint);
  std::string add_rule(std::string_view hint, const std::string& body);  // a new rule's name
  void define(const std::string& name, const std::string& body);         // counts kMaxTextBytes

  const Json& root_;
  std::vector<std::string> lines_;
  std::set<std::string> names_;
  std::map<std::string, size_t> next_suffix_;
  std::set<Shared> shared_;
  std::map<std::tuple<std::string, uint64_t, uint64_t>, std::string> repeats_;  // (atom, lo, hi) → rule
  std::map<std::string, std::string> ref_names_;                                // "$ref" → rule
  std::vector<std::tuple<const Json*, std::string, std::string>> refs_;         // target, path, rule
  size_t text_bytes_ = 0;
};

}  // namespace specd::constrain::schema_detail

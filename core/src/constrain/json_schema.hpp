// JSON Schema, response_format json_object and choice lists → GBNF (grammar.hpp).
//
// The grammar of a schema matches JSON texts that validate against it; it need not match every
// valid text: it is what a model may generate. Where the schema leaves freedom that generation
// does not need, the grammar takes the narrower road, and every instance it allows is still
// valid:
//   - no whitespace before or after the value, at most kMaxWhitespace whitespace characters
//     between tokens, integers of at most 18 digits, fractions of at most 16 digits,
//     exponents of at most 3, no exponent at all where a number has bounds;
//   - properties in the schema's `properties` order (then required keys listed only in
//     `required`); no other keys unless additionalProperties is true or a schema, in which case
//     extra pairs may follow, with keys other than the listed ones; optional properties may
//     each be present or absent;
//   - with prefixItems, no items beyond them unless `items` is a schema (or minItems asks);
//   - `format` values in one common spelling (e.g. date-time with 'T', 2-digit day 01..31);
//   - enum/const values in compact form (nlohmann's dump()), each string written one way;
//   - without `type`, the types the keywords describe ({"properties": ...} makes objects);
//   - maxItems/maxLength above kMaxCount read as no maximum (no generation gets that long).
// Keywords of a type the schema does not allow (minimum on a string) constrain nothing, as in
// JSON Schema. Refused combinations (they would need an intersection of languages): format with
// pattern/minLength/maxLength, pattern with minLength/maxLength, enum/const with other
// constraining keywords than type, anyOf with oneOf.
//
// Supported keywords: type (a name or a list; "null" for nullable), properties, required,
// additionalProperties, enum, const, items (a schema, or a list as prefixItems), prefixItems,
// minItems, maxItems, anyOf, oneOf (as anyOf: generating any branch is what is asked; the
// grammar cannot exclude instances matching two branches), allOf (merged into one schema where
// the parts merge: see json_schema_merge.cpp), $ref to local JSON pointers ("#", "#/$defs/x",
// "#/definitions/x", ...), minLength, maxLength, pattern (regex_gbnf.hpp, as a search), format
// (date-time, date, time, email, uuid, uri, ipv4, hostname), minimum, maximum, exclusiveMinimum,
// exclusiveMaximum (bounds of a non-integer `number` must be integers), uniqueItems: false.
// Annotations (title, description, $schema, $id, $comment, examples, default, deprecated,
// readOnly, writeOnly, contentEncoding, contentMediaType) and $defs/definitions are ignored.
// Every other keyword is refused, naming it and its JSON pointer:
//   "json_schema: unsupported keyword 'not' at /properties/a".
//
// The schema is untrusted (a request body). Bounds: nesting deeper than kMaxSchemaDepth (or a
// document deeper than kMaxDocumentDepth), more
// than kMaxEnumValues enum values, minItems/minLength over kMaxCount, and grammars over
// Grammar::kMaxTextBytes are refused. The walk recurses only to the depth bound;
// $ref targets become named rules, so recursive schemas recurse through the grammar.
// Every refusal is specd::Error (kInvalidArgument) whose message starts "json_schema: ".
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace specd::constrain {

inline constexpr int kMaxSchemaDepth = 64;                     // schemas within schemas
inline constexpr int kMaxDocumentDepth = 4 * kMaxSchemaDepth;  // JSON nesting of the whole document
inline constexpr size_t kMaxEnumValues = 10000;
inline constexpr uint32_t kMaxWhitespace = 20;
// Largest minItems/maxItems/minLength/maxLength honoured (a larger minimum is refused, a
// larger maximum is none); counts above Grammar::kMaxRepeat are built as repetitions of blocks.
inline constexpr uint64_t kMaxCount = uint64_t{1} << 20;

// A grammar whose `root` matches instances of `schema` (an object or a boolean).
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);

// A grammar whose `root` matches any JSON object (response_format {"type": "json_object"}).
std::string json_object_gbnf();

// A grammar whose `root` matches exactly one of `choices` (literally). At most kMaxEnumValues.
std::string choice_to_gbnf(const std::vector<std::string>& choices);

}  // namespace specd::constrain

// Shared JSON value rules, `format` grammars and numeric ranges for the JSON Schema translator
// (json_schema_detail.hpp).
#include <algorithm>
#include <cmath>
#include <string>

#include "common/untrusted.hpp"
#include "constrain/grammar.hpp"
#include "constrain/json_schema.hpp"
#include "constrain/json_schema_detail.hpp"
#include "specd/error.hpp"

namespace specd::constrain::schema_detail {

void fail(std::string_view message, std::string_view path) {
  std::string msg = "json_schema: ";
  msg += message;
  msg += " at ";
  msg += path.empty() ? std::string_view("the root") : path;
  throw Error(ErrorCode::kInvalidArgument, msg);
}

std::string child_path(std::string_view parent, std::string_view token) {
  std::string out(parent);
  out += '/';
  for (char c : clip(token, 64)) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

bool is_annotation(std::string_view k) {
  static constexpr std::string_view kAnnotations[] = {"title",    "description", "$schema",         "$id",
                                                      "$comment", "examples",    "default",         "deprecated",
                                                      "readOnly", "writeOnly",   "contentEncoding", "contentMediaType",
                                                      "$defs",    "definitions"};
  return std::find(std::begin(kAnnotations), std::end(kAnnotations), k) != std::end(kAnnotations);
}

const char* shared_name(Shared s) {
  static constexpr const char* kNames[] = {
      "ws",          "value",       "object",           "array",        "string",
      "char",        "number",      "integer",          "boolean",      "null",
      "format-date", "format-time", "format-date-time", "format-email", "format-uuid",
      "format-uri",  "format-ipv4", "format-hostname",  "format-label"};
  static_assert(std::size(kNames) == size_t(Shared::kCount));
  return kNames[size_t(s)];
}

std::string shared_body(Shared s) {
  switch (s) {
    case Shared::kWs: {
      std::string ws = "[ \\t\\n\\r]{0,";
      ws += std::to_string(kMaxWhitespace);
      ws += '}';
      return ws;
    }
    case Shared::kValue:
      return "object | array | string | number | boolean | null";
    case Shared::kObject:
      return R"("{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* ws )? "}")";
    case Shared::kArray:
      return R"("[" ws ( value ( ws "," ws value )* ws )? "]")";
    case Shared::kString:
      return R"("\"" char* "\"")";
    case Shared::kChar:
      return R"([^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ))";
    case Shared::kNumber:
      return R"("-"? ( "0" | [1-9] [0-9]{0,17} ) ( "." [0-9]{1,16} )? ( [eE] [+\-]? [0-9]{1,3} )?)";
    case Shared::kInteger:
      return R"("-"? ( "0" | [1-9] [0-9]{0,17} ))";
    case Shared::kBoolean:
      return R"("true" | "false")";
    case Shared::kNull:
      return R"("null")";
    case Shared::kDate:
      return R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))";
    case Shared::kTime:
      return R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? )"
             R"(( "Z" | [+\-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))";
    case Shared::kDateTime:
      return R"(format-date "T" format-time)";
    case Shared::kEmail:
      return R"([A-Za-z0-9!#$%&'*+/=?\^_`{|}~\-]{1,64} ( "." [A-Za-z0-9!#$%&'*+/=?\^_`{|}~\-]{1,64} ){0,7} )"
             R"("@" format-label ( "." format-label ){1,7})";
    case Shared::kUuid:
      return R"([0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12})";
    case Shared::kUri:
      return R"([A-Za-z] [A-Za-z0-9+.\-]{0,31} ":" ( [A-Za-z0-9\-._~:/?@!$&'()*+,;=] | "%" [0-9A-Fa-f]{2} )+)";
    case Shared::kIpv4: {
      const std::string octet = R"(( "25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9] ))";
      std::string out = octet;
      for (int i = 0; i < 3; ++i) {
        out += R"( "." )";
        out += octet;
      }
      return out;
    }
    case Shared::kHostname:
      return R"(format-label ( "." format-label ){0,7})";
    case Shared::kLabel:
      return R"([A-Za-z0-9] ( [A-Za-z0-9\-]{0,61} [A-Za-z0-9] )?)";
    case Shared::kCount:
      break;
  }
  return {};
}

std::vector<Shared> shared_deps(Shared s) {
  switch (s) {
    case Shared::kValue:
      return {Shared::kObject, Shared::kArray, Shared::kString, Shared::kNumber, Shared::kBoolean, Shared::kNull};
    case Shared::kObject:
      return {Shared::kWs, Shared::kString, Shared::kValue};
    case Shared::kArray:
      return {Shared::kWs, Shared::kValue};
    case Shared::kString:
      return {Shared::kChar};
    case Shared::kDateTime:
      return {Shared::kDate, Shared::kTime};
    case Shared::kEmail:
    case Shared::kHostname:
      return {Shared::kLabel};
    default:
      return {};
  }
}

std::optional<Shared> format_rule(std::string_view format) {
  if (format == "date") return Shared::kDate;
  if (format == "time") return Shared::kTime;
  if (format == "date-time") return Shared::kDateTime;
  if (format == "email") return Shared::kEmail;
  if (format == "uuid") return Shared::kUuid;
  if (format == "uri") return Shared::kUri;
  if (format == "ipv4") return Shared::kIpv4;
  if (format == "hostname") return Shared::kHostname;
  return std::nullopt;
}

Bounds read_bounds(const Json& s, const std::string& path) {
  Bounds b;
  auto number = [&](const char* key) -> std::optional<double> {
    if (!s.contains(key)) return std::nullopt;
    const Json& v = s[key];
    if (v.is_boolean()) return std::nullopt;  // draft-4 exclusives, read below
    if (!v.is_number()) fail(std::string("'") + key + "' must be a number", path);
    return v.get<double>();
  };
  auto draft4 = [&](const char* key) { return s.contains(key) && s[key].is_boolean() && s[key].get<bool>(); };
  b.lo = number("minimum");
  b.lo_exclusive = b.lo && draft4("exclusiveMinimum");
  if (auto ex = number("exclusiveMinimum"); ex && (!b.lo || *ex >= *b.lo)) {
    b.lo = ex;
    b.lo_exclusive = true;
  }
  b.hi = number("maximum");
  b.hi_exclusive = b.hi && draft4("exclusiveMaximum");
  if (auto ex = number("exclusiveMaximum"); ex && (!b.hi || *ex <= *b.hi)) {
    b.hi = ex;
    b.hi_exclusive = true;
  }
  return b;
}

namespace {

// Integer parts have at most 18 digits (json_schema.hpp), so every magnitude fits in int64.
constexpr int64_t kMaxMagnitude = 999'999'999'999'999'999;
constexpr double kMaxMagnitudeD = 1e18;

std::string lit(std::string_view digits) {
  return gbnf_literal(digits);
}

std::string digit_range(char lo, char hi) {
  if (lo == hi) return lit(std::string(1, lo));
  std::string out = "[";
  out += lo;
  out += '-';
  out += hi;
  out += ']';
  return out;
}

std::string any_digits(size_t n) {
  if (n == 0) return {};
  if (n == 1) return "[0-9]";
  std::string out = "[0-9]{";
  out += std::to_string(n);
  out += '}';
  return out;
}

std::string seq(const std::string& a, const std::string& b) {
  return b.empty() ? a : a.empty() ? b : a + " " + b;
}

std::string group(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) {
    out += i == 0 ? " " : " | ";
    out += alts[i];
  }
  out += " )";
  return out;
}

bool all_of(std::string_view s, char c) {
  return s.find_first_not_of(c) == std::string_view::npos;
}

// Digit strings of s.size() digits with value >= s (at_least) or <= s (at_most). The
// recursion is over at most 18 digits.
std::string at_least(std::string_view s) {
  if (all_of(s, '0')) return any_digits(s.size());
  if (s.size() == 1) return digit_range(s[0], '9');
  std::vector<std::string> alts{seq(lit(s.substr(0, 1)), at_least(s.substr(1)))};
  if (s[0] < '9') alts.push_back(seq(digit_range(char(s[0] + 1), '9'), any_digits(s.size() - 1)));
  return group(alts);
}

std::string at_most(std::string_view s) {
  if (all_of(s, '9')) return any_digits(s.size());
  if (s.size() == 1) return digit_range('0', s[0]);
  std::vector<std::string> alts{seq(lit(s.substr(0, 1)), at_most(s.substr(1)))};
  if (s[0] > '0') alts.push_back(seq(digit_range('0', char(s[0] - 1)), any_digits(s.size() - 1)));
  return group(alts);
}

// Digit strings of x.size() digits from x to y (same length, x <= y).
std::string between(std::string_view x, std::string_view y) {
  size_t i = 0;
  while (i < x.size() && x[i] == y[i]) ++i;
  if (i == x.size()) return lit(x);
  const std::string prefix = i > 0 ? lit(x.substr(0, i)) : std::string();
  const std::string_view xs = x.substr(i + 1), ys = y.substr(i + 1);
  if (all_of(xs, '0') && all_of(ys, '9')) return seq(prefix, seq(digit_range(x[i], y[i]), any_digits(xs.size())));
  std::vector<std::string> alts{seq(lit(x.substr(i, 1)), at_least(xs))};
  if (y[i] - x[i] >= 2) alts.push_back(seq(digit_range(char(x[i] + 1), char(y[i] - 1)), any_digits(xs.size())));
  alts.push_back(seq(lit(y.substr(i, 1)), at_most(ys)));
  return seq(prefix, group(alts));
}

// Decimal integers from a to b (0 <= a <= b <= kMaxMagnitude) without leading zeros.
std::string nat_range(int64_t a, int64_t b) {
  const std::string as = std::to_string(a), bs = std::to_string(b);
  std::vector<std::string> alts;
  if (as.size() == bs.size()) return between(as, bs);
  alts.push_back(between(as, std::string(as.size(), '9')));
  const size_t full_lo = as.size() + 1, full_hi = bs.size() - 1;  // lengths taken whole
  if (full_lo <= full_hi) {
    std::string whole = "[1-9] [0-9]";
    if (full_hi > full_lo || full_lo > 2) {
      whole += '{';
      whole += std::to_string(full_lo - 1);
      if (full_hi > full_lo) {
        whole += ',';
        whole += std::to_string(full_hi - 1);
      }
      whole += '}';
    }
    alts.push_back(std::move(whole));
  }
  std::string power = "1";  // the smallest number with as many digits as b
  power.append(bs.size() - 1, '0');
  alts.push_back(between(power, bs));
  return group(alts);
}

const char* const kAnyFraction = R"(( "." [0-9]{1,16} )?)";
const char* const kZeroFraction = R"(( "." "0"{1,16} )?)";
const char* const kNonzeroFraction = R"("." [0-9]{0,15} [1-9])";

// Non-negative decimals I(.F)? with value in [lo, hi] (ends exclusive as flagged; no hi =
// unbounded); lo and hi are integers.
void magnitudes(int64_t lo, bool lo_ex, std::optional<int64_t> hi, bool hi_ex, bool integral,
                std::vector<std::string>& alts, const std::string& sign) {
  auto add = [&](const std::string& text) { alts.push_back(seq(sign, text)); };
  if (hi && *hi < lo) return;
  if (integral) {
    const int64_t a = lo + (lo_ex ? 1 : 0), b = hi ? *hi - (hi_ex ? 1 : 0) : kMaxMagnitude;
    if (a <= b) add(nat_range(a, b));
    return;
  }
  if (hi && *hi == lo) {
    if (!lo_ex && !hi_ex) add(seq(lit(std::to_string(lo)), kZeroFraction));
    return;
  }
  add(seq(lit(std::to_string(lo)), lo_ex ? kNonzeroFraction : kAnyFraction));
  const int64_t mid_lo = lo + 1, mid_hi = hi ? *hi - 1 : kMaxMagnitude;
  if (mid_lo <= mid_hi) add(seq(nat_range(mid_lo, mid_hi), kAnyFraction));
  if (hi && !hi_ex) add(seq(lit(std::to_string(*hi)), kZeroFraction));
}

// Both sides of zero for integer-valued bounds (within +-kMaxMagnitude, or absent).
std::string signed_range(std::optional<int64_t> lo, bool lo_ex, std::optional<int64_t> hi, bool hi_ex, bool integral,
                         const std::string& path) {
  std::vector<std::string> alts;
  if (!hi || *hi > 0 || (*hi == 0 && !hi_ex)) {  // values >= 0, written without '-'
    const bool lo_positive = lo && *lo >= 0;
    magnitudes(lo_positive ? *lo : 0, lo_positive && lo_ex, hi, hi_ex, integral, alts, "");
  }
  if (!lo || *lo < 0) {  // values < 0: '-' and a magnitude m > 0 with -m within the bounds
    const bool hi_negative = hi && *hi < 0;
    std::optional<int64_t> top;
    if (lo) top = -*lo;
    magnitudes(hi_negative ? -*hi : 0, hi_negative ? hi_ex : true, top, lo_ex, integral, alts, R"("-")");
  }
  if (alts.empty()) fail(integral ? "no integer satisfies the bounds" : "no number satisfies the bounds", path);
  std::string body;
  for (const auto& a : alts) {
    if (!body.empty()) body += " | ";
    body += a;
  }
  return body;
}

}  // namespace

std::string integer_range_body(const Bounds& b, const std::string& path) {
  // Bounds beyond the 18-digit integers the grammar writes are clamped to them.
  std::optional<int64_t> lo, hi;
  if (b.lo) {
    const double v = b.lo_exclusive ? std::floor(*b.lo) + 1 : std::ceil(*b.lo);
    if (v >= kMaxMagnitudeD) fail("a minimum of 10^18 or more is not supported", path);
    lo = v <= -kMaxMagnitudeD ? -kMaxMagnitude : int64_t(v);
  }
  if (b.hi) {
    const double v = b.hi_exclusive ? std::ceil(*b.hi) - 1 : std::floor(*b.hi);
    if (v <= -kMaxMagnitudeD) fail("a maximum of -10^18 or less is not supported", path);
    hi = v >= kMaxMagnitudeD ? kMaxMagnitude : int64_t(v);
  }
  return signed_range(lo, false, hi, false, true, path);
}

std::string number_range_body(const Bounds& b, const std::string& path) {
  auto integral = [&](double v, const char* which) {
    if (v != std::floor(v)) {
      fail(std::string("a non-integer ") + which + " of a number is not supported (integer bounds are)", path);
    }
  };
  std::optional<int64_t> lo, hi;
  if (b.lo && *b.lo > -kMaxMagnitudeD) {
    integral(*b.lo, "minimum");
    if (*b.lo >= kMaxMagnitudeD) fail("a minimum of 10^18 or more is not supported", path);
    lo = int64_t(*b.lo);
  }
  if (b.hi && *b.hi < kMaxMagnitudeD) {
    integral(*b.hi, "maximum");
    if (*b.hi <= -kMaxMagnitudeD) fail("a maximum of -10^18 or less is not supported", path);
    hi = int64_t(*b.hi);
  }
  return signed_range(lo, b.lo_exclusive, hi, b.hi_exclusive, false, path);
}

}  // namespace specd::constrain::schema_detail

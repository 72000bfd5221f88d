#include "template/value.hpp"

#include <nlohmann/json.hpp>
#include <unicode/uchar.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "template/pystr.hpp"

namespace specd::jinja {

Value::Value(List l) : v_((charge_work(l.size() * kListElementUnits), std::make_shared<List>(std::move(l)))) {}

double Value::as_double() const {
  if (is_int()) return static_cast<double>(as_int());
  if (is_bool()) return as_bool() ? 1.0 : 0.0;
  return std::get<double>(v_);
}

std::string Value::type_name() const {
  if (is_undefined()) return "Undefined";
  if (is_none()) return "NoneType object";
  if (is_bool()) return "bool object";
  if (is_int()) return "int object";
  if (is_float()) return "float object";
  if (is_string()) return "str object";
  if (is_list()) return tuple_ ? "tuple object" : "list object";
  if (is_dict()) return as_dict().is_namespace ? "Namespace object" : "dict object";
  return "function object";
}

const Value* Dict::find(std::string_view key) const {
  if (auto it = string_index_.find(std::string(key)); it != string_index_.end()) return &items[it->second].second;
  return nullptr;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : items)
    if (!k.is_string() && equals(k, key)) return &v;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  if (key.is_string()) {
    auto [it, inserted] = string_index_.emplace(key.as_string(), items.size());
    if (!inserted) {
      items[it->second].second = std::move(value);
      return;
    }
    items.emplace_back(std::move(key), std::move(value));
    return;
  }
  for (auto& [k, v] : items) {
    if (!k.is_string() && equals(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

std::shared_ptr<Dict> make_dict() {
  return std::make_shared<Dict>();
}

Value make_function(std::string name, std::function<Value(Interpreter&, CallArgs&)> call) {
  return Value(std::make_shared<Function>(Function{std::move(name), std::move(call)}));
}

void throw_undefined(const Value& v) {
  throw TemplateError(v.is_undefined() && !v.undefined_hint().empty() ? v.undefined_hint()
                                                                      : std::string("value is undefined"));
}

namespace {

void check_depth(int depth) {
  if (depth > kMaxDataDepth)
    throw TemplateError("data nested deeper than " + std::to_string(kMaxDataDepth) + " levels");
}

bool printable(char32_t c) {
  const int8_t t = u_charType(static_cast<UChar32>(c));
  if (c == ' ') return true;
  return t != U_CONTROL_CHAR && t != U_FORMAT_CHAR && t != U_SURROGATE && t != U_PRIVATE_USE_CHAR &&
         t != U_UNASSIGNED && t != U_LINE_SEPARATOR && t != U_PARAGRAPH_SEPARATOR && t != U_SPACE_SEPARATOR;
}

std::string string_repr(const std::string& s) {
  const char quote = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : pystr::decode(s)) {
    char buf[16];
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && !printable(c))) {
      const char* fmt = c <= 0xFF ? "\\x%02x" : c <= 0xFFFF ? "\\u%04x" : "\\U%08x";
      std::snprintf(buf, sizeof buf, fmt, static_cast<unsigned>(c));
      out += buf;
    } else {
      pystr::append_utf8(out, c);
    }
  }
  out += quote;
  return out;
}

std::string str_impl(const Value& v, bool quoted, int depth) {
  check_depth(depth);
  if (v.is_undefined()) return quoted ? "Undefined" : "";
  if (v.is_none()) return "None";
  if (v.is_bool()) return v.as_bool() ? "True" : "False";
  if (v.is_int()) return std::to_string(v.as_int());
  if (v.is_float()) return float_repr(v.as_double());
  if (v.is_string()) return quoted ? string_repr(v.as_string()) : v.as_string();
  if (v.is_list()) {
    const List& l = v.as_list();
    std::string out = v.is_tuple() ? "(" : "[";
    for (size_t i = 0; i < l.size(); ++i) out += (i ? ", " : "") + str_impl(l[i], true, depth + 1);
    if (v.is_tuple()) return out + (l.size() == 1 ? ",)" : ")");
    return out + "]";
  }
  if (v.is_dict()) {
    std::string out = v.as_dict().is_namespace ? "<Namespace {" : "{";
    bool first = true;
    for (const auto& [k, x] : v.as_dict().items) {
      out += (first ? "" : ", ") + str_impl(k, true, depth + 1) + ": " + str_impl(x, true, depth + 1);
      first = false;
    }
    return out + (v.as_dict().is_namespace ? "}>" : "}");
  }
  return "<function " + v.as_function().name + ">";
}

bool equals_impl(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_undefined() || b.is_undefined()) return a.is_undefined() && b.is_undefined();
  if (a.is_none() || b.is_none()) return a.is_none() && b.is_none();
  const bool an = a.is_number() || a.is_bool(), bn = b.is_number() || b.is_bool();
  if (an || bn) {
    if (!(an && bn)) return false;
    if (!a.is_float() && !b.is_float()) {
      const int64_t x = a.is_bool() ? a.as_bool() : a.as_int(), y = b.is_bool() ? b.as_bool() : b.as_int();
      return x == y;
    }
    return a.as_double() == b.as_double();
  }
  if (a.is_string() || b.is_string()) return a.is_string() && b.is_string() && a.as_string() == b.as_string();
  if (a.is_list() || b.is_list()) {
    if (!(a.is_list() && b.is_list()) || a.is_tuple() != b.is_tuple() || a.as_list().size() != b.as_list().size())
      return false;
    for (size_t i = 0; i < a.as_list().size(); ++i)
      if (!equals_impl(a.as_list()[i], b.as_list()[i], depth + 1)) return false;
    return true;
  }
  if (a.is_dict() || b.is_dict()) {
    if (!(a.is_dict() && b.is_dict())) return false;
    if (a.dict_ptr() == b.dict_ptr()) return true;
    if (a.as_dict().is_namespace || b.as_dict().is_namespace) return false;  // compared by identity
    if (a.as_dict().size() != b.as_dict().size()) return false;
    for (const auto& [k, x] : a.as_dict().items) {
      const Value* y = b.as_dict().find(k);
      if (y == nullptr || !equals_impl(x, *y, depth + 1)) return false;
    }
    return true;
  }
  return &a.as_function() == &b.as_function();
}

[[noreturn]] void unorderable(const Value& a, const Value& b) {
  auto short_name = [](const Value& v) {
    std::string n = v.type_name();
    return n.substr(0, n.find(' '));
  };
  throw TemplateError("'<' not supported between instances of '" + short_name(a) + "' and '" + short_name(b) + "'");
}

bool less_impl(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_undefined()) throw_undefined(a);
  if (b.is_undefined()) throw_undefined(b);
  const bool an = a.is_number() || a.is_bool(), bn = b.is_number() || b.is_bool();
  if (an && bn) {
    if (!a.is_float() && !b.is_float()) {
      const int64_t x = a.is_bool() ? a.as_bool() : a.as_int(), y = b.is_bool() ? b.as_bool() : b.as_int();
      return x < y;
    }
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 order = code point order
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals_impl(x[i], y[i], depth + 1)) continue;
      return less_impl(x[i], y[i], depth + 1);
    }
    return x.size() < y.size();
  }
  unorderable(a, b);
}

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

std::string json_key(const Value& k) {
  if (k.is_string()) return k.as_string();
  if (k.is_bool()) return k.as_bool() ? "true" : "false";
  if (k.is_none()) return "null";
  if (k.is_int()) return std::to_string(k.as_int());
  if (k.is_float()) return float_repr(k.as_double());
  throw TemplateError("keys must be str, int, float, bool or None, not " + k.type_name());
}

void json_impl(std::string& out, const Value& v, const JsonStyle& st, int depth) {
  check_depth(depth);
  if (v.is_none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    const double d = v.as_double();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
  } else if (v.is_string()) {
    json_string(out, v.as_string());
  } else if (v.is_list() || (v.is_dict() && !v.as_dict().is_namespace)) {
    const bool list = v.is_list();
    const size_t n = list ? v.as_list().size() : v.as_dict().size();
    out += list ? '[' : '{';
    if (n == 0) {
      out += list ? ']' : '}';
      return;
    }
    std::string newline;
    if (st.indent) {
      charge_work(static_cast<uint64_t>(depth + 1) * st.indent->size());
      newline = "\n";
      for (int i = 0; i <= depth; ++i) newline += *st.indent;
    }
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::vector<std::string> keys;
    if (!list) {
      for (const auto& kv : v.as_dict().items) keys.push_back(json_key(kv.first));
      if (st.sort_keys)
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return keys[a] < keys[b]; });
    }
    for (size_t i = 0; i < n; ++i) {
      charge_work(newline.size() + st.item_separator.size() + st.key_separator.size());
      out += i == 0 ? newline : st.item_separator + newline;
      if (list) {
        json_impl(out, v.as_list()[order[i]], st, depth + 1);
      } else {
        json_string(out, keys[order[i]]);
        out += st.key_separator;
        json_impl(out, v.as_dict().items[order[i]].second, st, depth + 1);
      }
    }
    if (st.indent) out += newline.substr(0, newline.size() - st.indent->size());
    out += list ? ']' : '}';
  } else {
    const std::string t = v.type_name();
    throw TemplateError("Object of type " + t.substr(0, t.find(' ')) + " is not JSON serializable");
  }
}

template <class J>
Value from_json_impl(const J& j, int depth) {
  check_depth(depth);
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      return u <= static_cast<uint64_t>(INT64_MAX) ? Value(static_cast<int64_t>(u)) : Value(static_cast<double>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List l;
      l.reserve(j.size());
      for (const auto& x : j) l.push_back(from_json_impl(x, depth + 1));
      return Value(std::move(l));
    }
    case nlohmann::json::value_t::object: {
      auto d = make_dict();
      for (auto it = j.begin(); it != j.end(); ++it) d->set(Value(it.key()), from_json_impl(it.value(), depth + 1));
      return Value(std::move(d));
    }
    default:
      throw TemplateError("unsupported JSON value");
  }
}

}  // namespace

bool truthy(const Value& v) {
  if (v.is_undefined() || v.is_none()) return false;
  if (v.is_bool()) return v.as_bool();
  if (v.is_int()) return v.as_int() != 0;
  if (v.is_float()) return v.as_double() != 0.0;
  if (v.is_string()) return !v.as_string().empty();
  if (v.is_list()) return !v.as_list().empty();
  if (v.is_dict()) return v.as_dict().is_namespace || v.as_dict().size() > 0;
  return true;
}

std::string to_str(const Value& v) {
  return str_impl(v, false, 0);
}
std::string repr(const Value& v) {
  return str_impl(v, true, 0);
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);  // [-]d[.ddd]e[+-]XX
  const size_t e = sci.find('e');
  const int exp = std::stoi(sci.substr(e + 1));
  std::string mant = sci.substr(0, e);
  const bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits = mant.substr(0, 1) + (mant.size() > 2 ? mant.substr(2) : "");
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
  return out + ebuf;
}

bool equals(const Value& a, const Value& b) {
  return equals_impl(a, b, 0);
}
bool less(const Value& a, const Value& b) {
  return less_impl(a, b, 0);
}

int64_t length(const Value& v) {
  if (v.is_undefined()) return 0;
  if (v.is_string()) {
    const std::string& s = v.as_string();
    return pystr::is_ascii(s) ? static_cast<int64_t>(s.size()) : static_cast<int64_t>(pystr::decode(s).size());
  }
  if (v.is_list()) return static_cast<int64_t>(v.as_list().size());
  if (v.is_dict()) return static_cast<int64_t>(v.as_dict().size());
  const std::string t = v.type_name();
  throw TemplateError("object of type '" + t.substr(0, t.find(' ')) + "' has no len()");
}

List iterate(const Value& v) {
  if (v.is_undefined()) return {};
  if (v.is_list()) return v.as_list();
  if (v.is_dict()) {
    List keys;
    keys.reserve(v.as_dict().size());
    for (const auto& kv : v.as_dict().items) keys.push_back(kv.first);
    return keys;
  }
  if (v.is_string()) {
    charge_work(v.as_string().size() * kListElementUnits);  // before the list of characters is built
    List chars;
    for (char32_t c : pystr::decode(v.as_string())) {
      std::string one;
      pystr::append_utf8(one, c);
      chars.emplace_back(std::move(one));
    }
    return chars;
  }
  const std::string t = v.type_name();
  throw TemplateError("'" + t.substr(0, t.find(' ')) + "' object is not iterable");
}

Value from_json(const nlohmann::ordered_json& j, int depth) {
  return from_json_impl(j, depth);
}
Value from_json(const nlohmann::json& j, int depth) {
  return from_json_impl(j, depth);
}

std::string to_json(const Value& v, const JsonStyle& style) {
  std::string out;
  json_impl(out, v, style, 0);
  return out;
}

}  // namespace specd::jinja

// The filters of Jinja (jinja2/filters.py); its tests and the globals of Jinja and transformers
// are in tests_and_globals.cpp, the methods of str, dict and list in methods.cpp.
#include "template/builtins.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "template/interpreter.hpp"
#include "template/pystr.hpp"

namespace specd::jinja {

Value arg(const CallArgs& a, size_t pos, const char* name, Value def) {
  if (pos < a.args.size()) return a.args[pos];
  for (const auto& [k, v] : a.kwargs)
    if (k == name) return v;
  return def;
}

std::string str_arg(const CallArgs& a, size_t pos, const char* name, const std::string& def) {
  const Value v = arg(a, pos, name);
  return v.is_undefined() || v.is_none() ? def : to_str(v);
}

int64_t int_arg(const CallArgs& a, size_t pos, const char* name, int64_t def) {
  const Value v = arg(a, pos, name);
  if (v.is_undefined() || v.is_none()) return def;
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  if (v.is_float()) return static_cast<int64_t>(v.as_double());
  throw TemplateError(std::string("argument '") + name + "' must be an integer");
}

std::optional<std::string> opt_str(const CallArgs& a, size_t pos, const char* name) {
  const Value v = arg(a, pos, name);
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  return to_str(v);
}

Value list_of_strings(const std::vector<std::string>& parts) {
  List out;
  out.reserve(parts.size());
  for (const std::string& p : parts) out.emplace_back(p);
  return Value(std::move(out));
}

namespace {

// ---- attribute paths and sort keys -----------------------------------------------------------

// "a.b.0" as Jinja's make_attrgetter reads it.
Value attr_path(const Value& v, const std::string& path) {
  Value cur = v;
  for (const std::string& part : pystr::split(path, std::string("."), -1)) {
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = digits ? get_item(cur, Value(static_cast<int64_t>(std::stoll(part)))) : get_item(cur, Value(part));
  }
  return cur;
}

Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value(pystr::lower(v.as_string())) : v;
}

// ---- filters ---------------------------------------------------------------------------------

// A sort of n items: about n log2 n comparisons, charged before it runs.
void charge_comparisons(size_t n) {
  uint64_t log2 = 1;
  while ((uint64_t{1} << log2) < n) ++log2;
  charge_work(static_cast<uint64_t>(n) * log2);
}

Value f_tojson(Interpreter&, const Value& v, CallArgs& a) {
  JsonStyle st;
  const Value indent = arg(a, 1, "indent");
  if (indent.is_int()) {
    charge_work(static_cast<uint64_t>(std::max<int64_t>(0, indent.as_int())));
    st.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.as_int())), ' ');
  }
  if (indent.is_string()) st.indent = indent.as_string();
  if (st.indent) st.item_separator = ",";
  const Value seps = arg(a, 2, "separators");
  if (seps.is_list() && seps.as_list().size() == 2) {
    st.item_separator = to_str(seps.as_list()[0]);
    st.key_separator = to_str(seps.as_list()[1]);
  }
  st.sort_keys = truthy(arg(a, 3, "sort_keys"));
  std::string out = to_json(v, st);
  if (truthy(arg(a, 0, "ensure_ascii"))) {
    std::string ascii;
    for (char32_t c : pystr::decode(out)) {
      if (c < 0x80) {
        ascii += static_cast<char>(c);
        continue;
      }
      auto unit = [&](unsigned u) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "\\u%04x", u);
        ascii += buf;
      };
      if (c >= 0x10000) {
        unit(0xD800 + ((c - 0x10000) >> 10));
        unit(0xDC00 + ((c - 0x10000) & 0x3FF));
      } else {
        unit(c);
      }
    }
    out = std::move(ascii);
  }
  return Value(std::move(out));
}

Value f_length(Interpreter&, const Value& v, CallArgs&) {
  return Value(length(v));
}
Value f_string(Interpreter&, const Value& v, CallArgs&) {
  return Value(to_str(v));
}
Value f_safe(Interpreter&, const Value& v, CallArgs&) {
  return v;
}
Value f_list(Interpreter&, const Value& v, CallArgs&) {
  return Value(iterate(v));
}
Value f_upper(Interpreter&, const Value& v, CallArgs&) {
  return Value(pystr::upper(to_str(v)));
}
Value f_lower(Interpreter&, const Value& v, CallArgs&) {
  return Value(pystr::lower(to_str(v)));
}
Value f_title(Interpreter&, const Value& v, CallArgs&) {
  return Value(pystr::title(to_str(v)));
}
Value f_capitalize(Interpreter&, const Value& v, CallArgs&) {
  return Value(pystr::capitalize(to_str(v)));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& a) {
  return Value(pystr::strip(to_str(v), opt_str(a, 0, "chars"), true, true));
}

Value f_default(Interpreter&, const Value& v, CallArgs& a) {
  const bool boolean = truthy(arg(a, 1, "boolean"));
  if (v.is_undefined() || (boolean && !truthy(v))) return arg(a, 0, "default_value", Value(""));
  return v;
}

Value f_join(Interpreter&, const Value& v, CallArgs& a) {
  const std::string sep = str_arg(a, 0, "d", "");
  const Value attribute = arg(a, 1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& x : iterate(v)) {
    const std::string piece = to_str(attribute.is_undefined() ? x : attr_path(x, to_str(attribute)));
    charge_work(sep.size() + piece.size());
    if (!first) out += sep;
    first = false;
    out += piece;
  }
  return Value(std::move(out));
}

Value f_first(Interpreter&, const Value& v, CallArgs&) {
  List items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs&) {
  List items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_reverse(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::u32string cs = pystr::decode(v.as_string());
    std::reverse(cs.begin(), cs.end());
    return Value(pystr::encode(cs));
  }
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

Value f_items(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value(List{});
  if (!v.is_dict()) throw TemplateError("Can only get item pairs from a mapping.");
  List out;
  for (const auto& [k, x] : v.as_dict().items) out.push_back(Value::tuple(List{k, x}));
  return Value(std::move(out));
}

Value f_replace(Interpreter&, const Value& v, CallArgs& a) {
  return Value(
      pystr::replace(to_str(v), str_arg(a, 0, "old", ""), str_arg(a, 1, "new", ""), int_arg(a, 2, "count", -1)));
}

Value f_int(Interpreter&, const Value& v, CallArgs& a) {
  Value def = arg(a, 0, "default", Value(int64_t{0}));
  if (v.is_int()) return v;
  if (v.is_bool()) return Value(static_cast<int64_t>(v.as_bool()));
  if (v.is_float()) return std::isfinite(v.as_double()) ? Value(static_cast<int64_t>(v.as_double())) : def;
  if (v.is_string()) {
    const std::string s = pystr::strip(v.as_string(), std::nullopt, true, true);
    try {
      size_t used = 0;
      const long long x = std::stoll(s, &used, static_cast<int>(int_arg(a, 1, "base", 10)));
      if (used == s.size()) return Value(static_cast<int64_t>(x));
      const double d = std::stod(s, &used);
      if (used == s.size() && std::isfinite(d)) return Value(static_cast<int64_t>(d));
    } catch (const std::exception&) {
    }
  }
  return def;
}

Value f_float(Interpreter&, const Value& v, CallArgs& a) {
  Value def = arg(a, 0, "default", Value(0.0));
  if (v.is_number() || v.is_bool()) return Value(v.as_double());
  if (v.is_string()) {
    try {
      size_t used = 0;
      const std::string s = pystr::strip(v.as_string(), std::nullopt, true, true);
      const double d = std::stod(s, &used);
      if (used == s.size()) return Value(d);
    } catch (const std::exception&) {
    }
  }
  return def;
}

Value f_abs(Interpreter&, const Value& v, CallArgs&) {
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_int()) return Value(v.as_int() < 0 ? binary_op("-", Value(int64_t{0}), v) : v);
  throw TemplateError("bad operand type for abs(): '" + v.type_name() + "'");
}

// Jinja's round: "common" is Python's round(value, precision): ints stay ints, floats are
// rounded correctly from their exact binary value, ties to even (printf's %.*f does the same);
// ceil and floor scale by 10**precision.
Value f_round(Interpreter&, const Value& v, CallArgs& a) {
  const int64_t precision = int_arg(a, 0, "precision", 0);
  const std::string method = str_arg(a, 1, "method", "common");
  if (method != "common" && method != "ceil" && method != "floor")
    throw TemplateError("method must be common, ceil or floor");
  const double scale = std::pow(10.0, static_cast<double>(precision));
  if (method != "common") {
    const double x = v.as_double() * scale;
    return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
  }
  if (v.is_int() && precision >= 0) return v;
  if (std::fabs(v.as_double()) >= 1e17) return Value(v.as_double());  // already integral
  if (precision < 0 || precision > 300 || !std::isfinite(v.as_double()))
    return Value(std::nearbyint(v.as_double() * scale) / scale);
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), v.as_double());
  return Value(std::strtod(buf, nullptr));
}

Value f_indent(Interpreter&, const Value& v, CallArgs& a) {
  const Value width = arg(a, 0, "width", Value(int64_t{4}));
  const int64_t spaces = width.is_string() ? 0 : std::max<int64_t>(0, width.is_int() ? width.as_int() : 4);
  charge_work(static_cast<uint64_t>(spaces));
  const std::string ind = width.is_string() ? width.as_string() : std::string(static_cast<size_t>(spaces), ' ');
  const bool first = truthy(arg(a, 1, "first")), blank = truthy(arg(a, 2, "blank"));
  const std::vector<std::string> lines = pystr::splitlines(to_str(v) + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    charge_work(ind.size() + lines[i].size() + 1);
    if ((i > 0 || first) && (blank || !lines[i].empty())) out += ind;
    out += lines[i];
  }
  return Value(std::move(out));
}

Value f_center(Interpreter&, const Value& v, CallArgs& a) {
  const std::string s = to_str(v);
  const int64_t width = int_arg(a, 0, "width", 80), n = length(Value(s));
  if (width <= n) return Value(s);
  charge_work(static_cast<uint64_t>(width));
  const int64_t total = width - n, left = total / 2 + (total & width & 1);
  return Value(std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(total - left), ' '));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs&) {
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : pystr::decode(to_str(v))) {
    const bool w = c == '_' || (c < 0x80 ? std::isalnum(static_cast<int>(c)) != 0 : !pystr::is_space(c));
    n += w && !in_word;
    in_word = w;
  }
  return Value(n);
}

Value f_escape(Interpreter&, const Value& v, CallArgs&) {
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value(std::move(out));
}

Value f_attr(Interpreter&, const Value& v, CallArgs& a) {
  return get_attr(v, str_arg(a, 0, "name", ""));
}

// map / select / reject / selectattr / rejectattr.
Value f_map(Interpreter& in, const Value& v, CallArgs& a) {
  List out;
  const Value attribute = arg(a, 99, "attribute");
  if (!attribute.is_undefined()) {
    const Value def = arg(a, 99, "default");
    for (const Value& x : iterate(v)) {
      Value r = attr_path(x, to_str(attribute));
      out.push_back(r.is_undefined() && !def.is_undefined() ? def : r);
    }
    return Value(std::move(out));
  }
  if (a.args.empty()) throw TemplateError("map requires a filter argument");
  const std::string name = to_str(a.args[0]);
  const FilterFn f = find_filter(name);
  if (f == nullptr) throw TemplateError("no filter named '" + name + "'");
  CallArgs rest;
  rest.args.assign(a.args.begin() + 1, a.args.end());
  rest.kwargs = a.kwargs;
  for (const Value& x : iterate(v)) out.push_back(f(in, x, rest));
  return Value(std::move(out));
}

List select_impl(Interpreter& in, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  size_t next = 0;
  std::string attribute;
  if (by_attr) {
    if (a.args.empty()) throw TemplateError("missing parameter for attribute name");
    attribute = to_str(a.args[next++]);
  }
  TestFn t = nullptr;
  if (next < a.args.size()) {
    const std::string name = to_str(a.args[next++]);
    t = find_test(name);
    if (t == nullptr) throw TemplateError("no test named '" + name + "'");
  }
  CallArgs rest;
  rest.args.assign(a.args.begin() + static_cast<std::ptrdiff_t>(std::min(next, a.args.size())), a.args.end());
  List out;
  for (const Value& x : iterate(v)) {
    const Value probe = by_attr ? attr_path(x, attribute) : x;
    const bool ok = t ? t(in, probe, rest) : truthy(probe);
    if (ok == keep) out.push_back(x);
  }
  return out;
}

Value f_select(Interpreter& in, const Value& v, CallArgs& a) {
  return Value(select_impl(in, v, a, false, true));
}
Value f_reject(Interpreter& in, const Value& v, CallArgs& a) {
  return Value(select_impl(in, v, a, false, false));
}
Value f_selectattr(Interpreter& in, const Value& v, CallArgs& a) {
  return Value(select_impl(in, v, a, true, true));
}
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs& a) {
  return Value(select_impl(in, v, a, true, false));
}

Value f_sort(Interpreter&, const Value& v, CallArgs& a) {
  const bool reverse = truthy(arg(a, 0, "reverse")), cs = truthy(arg(a, 1, "case_sensitive"));
  const Value attribute = arg(a, 2, "attribute");
  List items = iterate(v);
  charge_comparisons(items.size());
  auto key = [&](const Value& x) {
    return sort_key(attribute.is_undefined() ? x : attr_path(x, to_str(attribute)), cs);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return reverse ? less(key(y), key(x)) : less(key(x), key(y));
  });
  return Value(std::move(items));
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& a) {
  if (!v.is_dict()) throw TemplateError("You can only sort by either \"key\" or \"value\"");
  const bool cs = truthy(arg(a, 0, "case_sensitive"));
  const std::string by = str_arg(a, 1, "by", "key");
  const bool reverse = truthy(arg(a, 2, "reverse"));
  List items;
  for (const auto& [k, x] : v.as_dict().items) items.push_back(Value::tuple(List{k, x}));
  const size_t idx = by == "value" ? 1 : 0;
  charge_comparisons(items.size());
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    const Value kx = sort_key(x.as_list()[idx], cs), ky = sort_key(y.as_list()[idx], cs);
    return reverse ? less(ky, kx) : less(kx, ky);
  });
  return Value(std::move(items));
}

Value f_unique(Interpreter&, const Value& v, CallArgs& a) {
  const bool cs = truthy(arg(a, 0, "case_sensitive"));
  const Value attribute = arg(a, 1, "attribute");
  List out, seen;
  for (const Value& x : iterate(v)) {
    const Value k = sort_key(attribute.is_undefined() ? x : attr_path(x, to_str(attribute)), cs);
    charge_work(seen.size() + 1);  // comparisons with every distinct item so far
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) {
      seen.push_back(k);
      out.push_back(x);
    }
  }
  return Value(std::move(out));
}

Value extreme(const Value& v, CallArgs& a, bool want_max) {
  const bool cs = truthy(arg(a, 0, "case_sensitive"));
  const Value attribute = arg(a, 1, "attribute");
  List items = iterate(v);
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  size_t best = 0;
  auto key = [&](const Value& x) {
    return sort_key(attribute.is_undefined() ? x : attr_path(x, to_str(attribute)), cs);
  };
  for (size_t i = 1; i < items.size(); ++i) {
    const bool better = want_max ? less(key(items[best]), key(items[i])) : less(key(items[i]), key(items[best]));
    if (better) best = i;
  }
  return items[best];
}

Value f_max(Interpreter&, const Value& v, CallArgs& a) {
  return extreme(v, a, true);
}
Value f_min(Interpreter&, const Value& v, CallArgs& a) {
  return extreme(v, a, false);
}

Value f_sum(Interpreter&, const Value& v, CallArgs& a) {
  const Value attribute = arg(a, 0, "attribute");
  Value total = arg(a, 1, "start", Value(int64_t{0}));
  for (const Value& x : iterate(v))
    total = binary_op("+", total, attribute.is_undefined() ? x : attr_path(x, to_str(attribute)));
  return total;
}

Value f_batch(Interpreter&, const Value& v, CallArgs& a) {
  const int64_t n = int_arg(a, 0, "linecount", 1);
  if (n <= 0) throw TemplateError("batch size must be positive");
  const Value fill = arg(a, 1, "fill_with");
  List out, cur;
  for (const Value& x : iterate(v)) {
    cur.push_back(x);
    if (static_cast<int64_t>(cur.size()) == n) out.emplace_back(std::exchange(cur, {}));
  }
  if (!cur.empty()) {
    while (!fill.is_undefined() && static_cast<int64_t>(cur.size()) < n) cur.push_back(fill);
    out.emplace_back(std::move(cur));
  }
  return Value(std::move(out));
}

// "%s and %d" % args, as the `format` filter applies it.
Value f_format(Interpreter&, const Value& v, CallArgs& a) {
  const std::string fmt = to_str(v);
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%' || i + 1 == fmt.size()) {
      out += fmt[i];
      continue;
    }
    const char c = fmt[++i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (next >= a.args.size()) throw TemplateError("not enough arguments for format string");
    const Value& x = a.args[next++];
    if (c == 's')
      out += to_str(x);
    else if (c == 'r')
      out += repr(x);
    else if (c == 'd' || c == 'i')
      out += std::to_string(static_cast<int64_t>(x.as_double()));
    else
      throw TemplateError(std::string("unsupported format character '") + c + "'");
  }
  return Value(std::move(out));
}

}  // namespace

FilterFn find_filter(const std::string& name) {
  static const std::unordered_map<std::string, FilterFn> kFilters = {
      {"tojson", f_tojson},
      {"length", f_length},
      {"count", f_length},
      {"string", f_string},
      {"safe", f_safe},
      {"list", f_list},
      {"upper", f_upper},
      {"lower", f_lower},
      {"title", f_title},
      {"capitalize", f_capitalize},
      {"trim", f_trim},
      {"default", f_default},
      {"d", f_default},
      {"join", f_join},
      {"first", f_first},
      {"last", f_last},
      {"reverse", f_reverse},
      {"items", f_items},
      {"replace", f_replace},
      {"int", f_int},
      {"float", f_float},
      {"abs", f_abs},
      {"round", f_round},
      {"indent", f_indent},
      {"center", f_center},
      {"wordcount", f_wordcount},
      {"escape", f_escape},
      {"e", f_escape},
      {"forceescape", f_escape},
      {"attr", f_attr},
      {"map", f_map},
      {"select", f_select},
      {"reject", f_reject},
      {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr},
      {"sort", f_sort},
      {"dictsort", f_dictsort},
      {"unique", f_unique},
      {"max", f_max},
      {"min", f_min},
      {"sum", f_sum},
      {"batch", f_batch},
      {"format", f_format},
  };
  auto it = kFilters.find(name);
  return it == kFilters.end() ? nullptr : it->second;
}

}  // namespace specd::jinja

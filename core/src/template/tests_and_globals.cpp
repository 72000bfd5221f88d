// The tests of Jinja (jinja2/tests.py: `x is defined`, ...) and the globals of Jinja and
// transformers (range, dict, namespace, raise_exception, strftime_now); the filters are in
// builtins.cpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "template/builtins.hpp"
#include "template/interpreter.hpp"
#include "template/pystr.hpp"

namespace specd::jinja {

namespace {

// ---- tests -------------------------------------------------------------------------------------

bool t_defined(Interpreter&, const Value& v, CallArgs&) {
  return !v.is_undefined();
}
bool t_undefined(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined();
}
bool t_none(Interpreter&, const Value& v, CallArgs&) {
  return v.is_none();
}
bool t_boolean(Interpreter&, const Value& v, CallArgs&) {
  return v.is_bool();
}
bool t_true(Interpreter&, const Value& v, CallArgs&) {
  return v.is_bool() && v.as_bool();
}
bool t_false(Interpreter&, const Value& v, CallArgs&) {
  return v.is_bool() && !v.as_bool();
}
bool t_string(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string();
}
bool t_number(Interpreter&, const Value& v, CallArgs&) {
  return v.is_number() || v.is_bool();
}
bool t_integer(Interpreter&, const Value& v, CallArgs&) {
  return v.is_int();
}
bool t_float(Interpreter&, const Value& v, CallArgs&) {
  return v.is_float();
}
bool t_mapping(Interpreter&, const Value& v, CallArgs&) {
  return v.is_dict() && !v.as_dict().is_namespace;
}
bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.as_dict().is_namespace);
}
bool t_sequence(Interpreter&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.as_dict().is_namespace);
}
bool t_callable(Interpreter&, const Value& v, CallArgs&) {
  return v.is_function();
}
bool t_odd(Interpreter&, const Value& v, CallArgs&) {
  return v.is_int() && v.as_int() % 2 != 0;
}
bool t_even(Interpreter&, const Value& v, CallArgs&) {
  return v.is_int() && v.as_int() % 2 == 0;
}
bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  const int64_t n = int_arg(a, 0, "num", 1);
  if (n == 0) throw TemplateError("integer division or modulo by zero");
  return v.is_int() && v.as_int() % n == 0;
}
bool t_eq(Interpreter&, const Value& v, CallArgs& a) {
  return equals(v, arg(a, 0, "other"));
}
bool t_ne(Interpreter&, const Value& v, CallArgs& a) {
  return !equals(v, arg(a, 0, "other"));
}
bool t_lt(Interpreter&, const Value& v, CallArgs& a) {
  return less(v, arg(a, 0, "other"));
}
bool t_gt(Interpreter&, const Value& v, CallArgs& a) {
  return less(arg(a, 0, "other"), v);
}
bool t_le(Interpreter&, const Value& v, CallArgs& a) {
  return !less(arg(a, 0, "other"), v);
}
bool t_ge(Interpreter&, const Value& v, CallArgs& a) {
  return !less(v, arg(a, 0, "other"));
}
bool t_in(Interpreter&, const Value& v, CallArgs& a) {
  return contains(arg(a, 0, "seq"), v);
}
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value o = arg(a, 0, "other");
  if (v.is_dict() && o.is_dict()) return v.dict_ptr() == o.dict_ptr();
  if ((v.is_none() && o.is_none()) || (v.is_bool() && o.is_bool())) return equals(v, o);
  return false;
}
bool t_lower(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && pystr::all_of(v.as_string(), "lower");
}
bool t_upper(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && pystr::all_of(v.as_string(), "upper");
}
bool t_filter(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && find_filter(v.as_string());
}
bool t_test(Interpreter&, const Value& v, CallArgs&) {
  return v.is_string() && find_test(v.as_string());
}
bool t_escaped(Interpreter&, const Value&, CallArgs&) {
  return false;
}

// ---- globals --------------------------------------------------------------------------------------

Value g_range(Interpreter& in, CallArgs& a) {
  if (a.args.empty() || a.args.size() > 3) throw TemplateError("range expected 1 to 3 arguments");
  for (const Value& x : a.args)
    if (!x.is_int() && !x.is_bool()) throw TemplateError("range() arguments must be integers");
  // Exact integers (no trip through double: 2**63-1 became 2**63, and its conversion back was
  // undefined behaviour); the length and the elements in unsigned 64-bit arithmetic, where the
  // distance between any two int64 values fits and wrapping is defined.
  auto arg = [&](size_t i) { return a.args[i].is_int() ? a.args[i].as_int() : (a.args[i].as_bool() ? 1 : 0); };
  int64_t start = 0, stop = 0, step = 1;
  if (a.args.size() == 1) {
    stop = arg(0);
  } else {
    start = arg(0);
    stop = arg(1);
    if (a.args.size() == 3) step = arg(2);
  }
  if (step == 0) throw TemplateError("range() arg 3 must not be zero");
  const auto ustart = static_cast<uint64_t>(start), ustop = static_cast<uint64_t>(stop);
  const auto ustep = static_cast<uint64_t>(step);
  uint64_t n = 0;
  if (step > 0 && stop > start) {
    const uint64_t span = ustop - ustart;
    n = span / ustep + (span % ustep != 0 ? 1 : 0);
  } else if (step < 0 && stop < start) {
    const uint64_t span = ustart - ustop, mag = 0 - ustep;
    n = span / mag + (span % mag != 0 ? 1 : 0);
  }
  if (n > static_cast<uint64_t>(in.limits().max_range))
    throw TemplateError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
                        std::to_string(in.limits().max_range) + ").");
  List out;
  out.reserve(static_cast<size_t>(n));
  for (uint64_t i = 0; i < n; ++i) out.emplace_back(static_cast<int64_t>(ustart + i * ustep));
  return Value(std::move(out));
}

Value g_dict(Interpreter&, CallArgs& a, bool ns) {
  auto d = make_dict();
  d->is_namespace = ns;
  for (const Value& x : a.args) {
    if (!x.is_dict()) throw TemplateError(ns ? "namespace() takes a mapping" : "dict() takes a mapping");
    for (const auto& [k, v] : x.as_dict().items) d->set(k, v);
  }
  for (const auto& [k, v] : a.kwargs) d->set(Value(k), v);
  return Value(std::move(d));
}

Value g_strftime_now(Interpreter& in, CallArgs& a) {
  const std::string fmt = str_arg(a, 0, "format", "");
  const std::time_t t = std::chrono::system_clock::to_time_t(in.now());
  std::tm tm{};
  localtime_r(&t, &tm);
  charge_work(256 + fmt.size() * 8);  // the buffer below, before it is allocated
  std::string buf(256 + fmt.size() * 8, '\0');
  const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
  if (n == 0 && !fmt.empty()) throw TemplateError("strftime_now: the formatted date is too long");
  buf.resize(n);
  return Value(std::move(buf));
}

}  // namespace

TestFn find_test(const std::string& name) {
  static const std::unordered_map<std::string, TestFn> kTests = {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"string", t_string},
      {"number", t_number},
      {"integer", t_integer},
      {"float", t_float},
      {"mapping", t_mapping},
      {"iterable", t_iterable},
      {"sequence", t_sequence},
      {"callable", t_callable},
      {"odd", t_odd},
      {"even", t_even},
      {"divisibleby", t_divisibleby},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<", t_lt},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">", t_gt},
      {"le", t_le},
      {"<=", t_le},
      {"ge", t_ge},
      {">=", t_ge},
      {"in", t_in},
      {"sameas", t_sameas},
      {"lower", t_lower},
      {"upper", t_upper},
      {"filter", t_filter},
      {"test", t_test},
      {"escaped", t_escaped},
  };
  auto it = kTests.find(name);
  return it == kTests.end() ? nullptr : it->second;
}

std::unordered_map<std::string, Value> make_globals() {
  std::unordered_map<std::string, Value> g;
  g["range"] = make_function("range", g_range);
  g["dict"] = make_function("dict", [](Interpreter& in, CallArgs& a) { return g_dict(in, a, false); });
  g["namespace"] = make_function("namespace", [](Interpreter& in, CallArgs& a) { return g_dict(in, a, true); });
  g["raise_exception"] = make_function(
      "raise_exception", [](Interpreter&, CallArgs& a) -> Value { throw TemplateError(str_arg(a, 0, "message", "")); });
  g["strftime_now"] = make_function("strftime_now", g_strftime_now);
  return g;
}

}  // namespace specd::jinja

// The sandbox's safe methods of str, dict and list (jinja2/sandbox.py: methods that would modify
// a list or dict raise SecurityError when called), and str.format.
#include <algorithm>
#include <functional>
#include <optional>
#include <string>

#include "template/builtins.hpp"
#include "template/interpreter.hpp"
#include "template/pystr.hpp"

namespace specd::jinja {
namespace {

Value method(const std::string& name, std::function<Value(CallArgs&)> fn) {
  return make_function(name, [fn = std::move(fn)](Interpreter& in, CallArgs& a) {
    in.step();
    return fn(a);
  });
}

Value unsafe(const Value& obj, const std::string& name) {
  const std::string t = obj.type_name();
  const std::string msg = "access to attribute '" + name + "' of '" + t.substr(0, t.find(' ')) + "' object is unsafe.";
  return make_function(name, [msg](Interpreter&, CallArgs&) -> Value { throw TemplateError(msg); });
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& x) {
    if (!x.is_string()) throw TemplateError("startswith/endswith arguments must be str or a tuple of str");
    const std::string& p = x.as_string();
    return p.size() <= s.size() &&
           (prefix ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0);
  };
  if (affix.is_list()) return std::any_of(affix.as_list().begin(), affix.as_list().end(), one);
  return one(affix);
}

// str.format with {} / {0} / {name} fields (no format specs).
std::string str_format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (fmt[i] == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (fmt[i] == '{') {
      const size_t close = fmt.find('}', i);
      if (close == std::string::npos) throw TemplateError("Single '{' encountered in format string");
      const std::string field = fmt.substr(i + 1, close - i - 1);
      Value v;
      if (field.empty()) {
        v = arg(a, auto_index++, "");
      } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
        v = arg(a, static_cast<size_t>(std::stoul(field)), "");
      } else {
        v = arg(a, SIZE_MAX, field.c_str());
      }
      if (v.is_undefined()) throw TemplateError("format field '" + field + "' has no argument");
      out += to_str(v);
      i = close;
    } else {
      out += fmt[i];
    }
  }
  return out;
}

std::optional<Value> string_method(const std::string& s, const std::string& name) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip", r = name != "lstrip";
    return method(name, [s, l, r](CallArgs& a) { return Value(pystr::strip(s, opt_str(a, 0, "chars"), l, r)); });
  }
  if (name == "split" || name == "rsplit") {
    const bool right = name == "rsplit";
    return method(name, [s, right](CallArgs& a) {
      const auto sep = opt_str(a, 0, "sep");
      if (sep && sep->empty()) throw TemplateError("empty separator");
      const int64_t max = int_arg(a, 1, "maxsplit", -1);
      return list_of_strings(right ? pystr::rsplit(s, sep, max) : pystr::split(s, sep, max));
    });
  }
  if (name == "splitlines")
    return method(name,
                  [s](CallArgs& a) { return list_of_strings(pystr::splitlines(s, truthy(arg(a, 0, "keepends")))); });
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return method(name, [s, prefix](CallArgs& a) { return Value(affix_match(s, arg(a, 0, "prefix"), prefix)); });
  }
  if (name == "upper") return method(name, [s](CallArgs&) { return Value(pystr::upper(s)); });
  if (name == "lower") return method(name, [s](CallArgs&) { return Value(pystr::lower(s)); });
  if (name == "title") return method(name, [s](CallArgs&) { return Value(pystr::title(s)); });
  if (name == "capitalize") return method(name, [s](CallArgs&) { return Value(pystr::capitalize(s)); });
  if (name == "replace")
    return method(name, [s](CallArgs& a) {
      return Value(pystr::replace(s, str_arg(a, 0, "old", ""), str_arg(a, 1, "new", ""), int_arg(a, 2, "count", -1)));
    });
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const bool last = name[0] == 'r', raise = name.find("index") != std::string::npos;
    return method(name, [s, last, raise](CallArgs& a) {
      const int64_t at = pystr::find(s, str_arg(a, 0, "sub", ""), last);
      if (at < 0 && raise) throw TemplateError("substring not found");
      return Value(at);
    });
  }
  if (name == "count") return method(name, [s](CallArgs& a) { return Value(pystr::count(s, str_arg(a, 0, "x", ""))); });
  if (name == "join")
    return method(name, [s](CallArgs& a) {
      std::string out;
      bool first = true;
      for (const Value& x : iterate(arg(a, 0, "iterable"))) {
        if (!x.is_string()) throw TemplateError("sequence item: expected str instance, " + x.type_name() + " found");
        charge_work(s.size() + x.as_string().size());
        out += (first ? "" : s) + x.as_string();
        first = false;
      }
      return Value(std::move(out));
    });
  if (name == "removeprefix" || name == "removesuffix") {
    const bool prefix = name == "removeprefix";
    return method(name, [s, prefix](CallArgs& a) {
      const std::string p = str_arg(a, 0, "x", "");
      if (!affix_match(s, Value(p), prefix) || p.empty()) return Value(s);
      return Value(prefix ? s.substr(p.size()) : s.substr(0, s.size() - p.size()));
    });
  }
  if (name == "format") return method(name, [s](CallArgs& a) { return Value(str_format(s, a)); });
  for (const char* cls : {"digit", "alpha", "alnum", "space", "lower", "upper"}) {
    if (name == std::string("is") + cls)
      return method(name, [s, cls](CallArgs&) { return Value(pystr::all_of(s, cls)); });
  }
  return std::nullopt;
}

std::optional<Value> dict_method(const Value& obj, const std::string& name) {
  if (name == "get")
    return method(name, [obj](CallArgs& a) {
      const Value* v = obj.as_dict().find(arg(a, 0, "key"));
      return v ? *v : arg(a, 1, "default", Value::none());
    });
  if (name == "items")
    return method(name, [obj](CallArgs&) {
      List out;
      for (const auto& [k, x] : obj.as_dict().items) out.push_back(Value::tuple(List{k, x}));
      return Value(std::move(out));
    });
  if (name == "keys") return method(name, [obj](CallArgs&) { return Value(iterate(obj)); });
  if (name == "values")
    return method(name, [obj](CallArgs&) {
      List out;
      for (const auto& kv : obj.as_dict().items) out.push_back(kv.second);
      return Value(std::move(out));
    });
  if (name == "copy")
    return method(name, [obj](CallArgs&) {
      auto d = make_dict();
      for (const auto& [k, x] : obj.as_dict().items) d->set(k, x);
      return Value(std::move(d));
    });
  for (const char* m : {"pop", "popitem", "setdefault", "update", "clear", "fromkeys"})
    if (name == m) return unsafe(obj, name);
  return std::nullopt;
}

std::optional<Value> list_method(const Value& obj, const std::string& name) {
  if (name == "index")
    return method(name, [obj](CallArgs& a) {
      const Value x = arg(a, 0, "x");
      for (size_t i = 0; i < obj.as_list().size(); ++i)
        if (equals(obj.as_list()[i], x)) return Value(static_cast<int64_t>(i));
      throw TemplateError(repr(x) + " is not in list");
    });
  if (name == "count")
    return method(name, [obj](CallArgs& a) {
      const Value x = arg(a, 0, "x");
      return Value(static_cast<int64_t>(
          std::count_if(obj.as_list().begin(), obj.as_list().end(), [&](const Value& y) { return equals(y, x); })));
    });
  if (name == "copy") return method(name, [obj](CallArgs&) { return Value(obj.as_list()); });
  for (const char* m : {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"})
    if (name == m) return unsafe(obj, name);
  return std::nullopt;
}

}  // namespace

std::optional<Value> find_method(const Value& obj, const std::string& name) {
  if (obj.is_string()) return string_method(obj.as_string(), name);
  if (obj.is_dict() && !obj.as_dict().is_namespace) return dict_method(obj, name);
  if (obj.is_list()) return list_method(obj, name);
  return std::nullopt;
}

}  // namespace specd::jinja

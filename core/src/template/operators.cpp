// Operations on template values (interpreter.hpp, "operations on values"): attribute and item
// access, `in`, the binary and unary operators and slicing, with Python's semantics and checked
// 64-bit integer arithmetic. Shared by the interpreter and the builtins.
#include <cmath>
#include <limits>

#include "template/builtins.hpp"
#include "template/interpreter.hpp"
#include "template/pystr.hpp"

namespace specd::jinja {

std::string short_type_name(const Value& v) {
  const std::string t = v.type_name();
  return t.substr(0, t.find(' '));
}

namespace {

[[noreturn]] void unsupported_operands(const std::string& op, const Value& a, const Value& b) {
  throw TemplateError("unsupported operand type(s) for " + op + ": '" + short_type_name(a) + "' and '" +
                      short_type_name(b) + "'");
}

bool int_like(const Value& v) {
  return v.is_int() || v.is_bool();
}
int64_t as_i(const Value& v) {
  return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int();
}

int64_t checked(bool overflow, int64_t v) {
  if (overflow) throw TemplateError("integer overflow (templates compute with 64-bit integers)");
  return v;
}

// a op b with overflow checked (op: __builtin_{add,sub,mul}_overflow). The result is read only
// after the builtin ran: function arguments have no evaluation order.
template <typename Op>
int64_t checked_op(Op op, int64_t a, int64_t b) {
  int64_t r = 0;
  const bool overflow = op(a, b, &r);
  return checked(overflow, r);
}

Value repeat(const Value& seq, int64_t n) {
  n = std::max<int64_t>(n, 0);
  const int64_t unit = seq.is_string() ? static_cast<int64_t>(seq.as_string().size())
                                       : static_cast<int64_t>(seq.as_list().size() * kListElementUnits);
  if (unit > 0 && n > (int64_t{64} << 20) / unit) throw TemplateError("sequence repetition is too large");
  charge_work(static_cast<uint64_t>(unit) * static_cast<uint64_t>(n));
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.as_string();
    return Value(std::move(out));
  }
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value(std::move(out));
}

// Python slice indices for a sequence of length n.
void slice_indices(int64_t n, const Value& start, const Value& stop, const Value& step, int64_t& b, int64_t& e,
                   int64_t& s) {
  auto as_index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!int_like(v)) throw TemplateError(std::string("slice ") + what + " must be an integer or None");
    return as_i(v);
  };
  s = as_index(step, "step").value_or(1);
  if (s == 0) throw TemplateError("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> x, int64_t def) {
    if (!x) return def;
    int64_t v = *x < 0 ? *x + n : *x;
    if (s > 0) return std::clamp<int64_t>(v, 0, n);
    return std::clamp<int64_t>(v, -1, n - 1);
  };
  b = clamp(as_index(start, "start"), s > 0 ? 0 : n - 1);
  e = clamp(as_index(stop, "stop"), s > 0 ? n : -1);
}

}  // namespace

Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) throw_undefined(obj);
  if (!obj.is_list() && !obj.is_string())
    throw TemplateError("'" + short_type_name(obj) + "' object is not subscriptable");
  std::u32string chars;
  const bool str = obj.is_string();
  if (str) chars = pystr::decode(obj.as_string());
  const int64_t n = str ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(obj.as_list().size());
  int64_t b = 0, e = 0, s = 1;
  slice_indices(n, start, stop, step, b, e, s);
  std::u32string out_chars;
  List out;
  for (int64_t i = b; s > 0 ? i < e : i > e; i += s) {
    if (str) {
      out_chars.push_back(chars[static_cast<size_t>(i)]);
    } else {
      out.push_back(obj.as_list()[static_cast<size_t>(i)]);
    }
  }
  return str ? Value(pystr::encode(out_chars)) : Value(std::move(out));
}

// ---- attribute and item access -----------------------------------------------------------------

namespace {

// Undefined with Jinja's message "'<type>' has no <what>".
Value missing(const Value& obj, const std::string& what) {
  std::string message = "'";
  message += obj.type_name();
  message += "' has no ";
  message += what;
  return Value::undefined(std::move(message));
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) throw_undefined(obj);
  if (obj.is_dict() && obj.as_dict().is_namespace) {
    if (const Value* v = obj.as_dict().find(std::string_view(name))) return *v;
  } else {
    if (std::optional<Value> m = find_method(obj, name)) return *m;
    if (obj.is_dict()) {
      if (const Value* v = obj.as_dict().find(std::string_view(name))) return *v;
    }
  }
  return missing(obj, "attribute '" + name + "'");
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) throw_undefined(obj);
  if (obj.is_dict() && !obj.as_dict().is_namespace) {
    if (const Value* v = obj.as_dict().find(key)) return *v;
  } else if ((obj.is_list() || obj.is_string()) && int_like(key)) {
    const bool str = obj.is_string();
    std::u32string chars;
    if (str) chars = pystr::decode(obj.as_string());
    const int64_t n = str ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(obj.as_list().size());
    int64_t i = as_i(key);
    if (i < 0) i += n;
    if (i >= 0 && i < n) {
      if (!str) return obj.as_list()[static_cast<size_t>(i)];
      std::string one;
      pystr::append_utf8(one, chars[static_cast<size_t>(i)]);
      return Value(std::move(one));
    }
    return missing(obj, "element " + std::to_string(as_i(key)));
  }
  if (key.is_string()) {
    if (std::optional<Value> m = find_method(obj, key.as_string())) return *m;
    return missing(obj, "attribute '" + key.as_string() + "'");
  }
  return missing(obj, "element " + repr(key));
}

bool contains(const Value& container, const Value& item) {
  if (container.is_undefined()) return false;
  if (container.is_string()) {
    if (!item.is_string())
      throw TemplateError("'in <string>' requires string as left operand, not " + short_type_name(item));
    return pystr::search(container.as_string(), item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) return container.as_dict().find(item) != nullptr;
  if (container.is_list()) {
    for (const Value& x : container.as_list())
      if (equals(x, item)) return true;
    return false;
  }
  throw TemplateError("argument of type '" + short_type_name(container) + "' is not iterable");
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(to_str(a) + to_str(b));
  if (a.is_undefined()) throw_undefined(a);
  if (b.is_undefined()) throw_undefined(b);
  const bool nums = (a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool());
  const bool ints = int_like(a) && int_like(b);
  if (op == "+") {
    if (ints)
      return Value(checked_op([](int64_t x, int64_t y, int64_t* r) { return __builtin_add_overflow(x, y, r); }, as_i(a),
                              as_i(b)));
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return a.is_tuple() ? Value::tuple(std::move(out)) : Value(std::move(out));
    }
  } else if (op == "-") {
    if (ints)
      return Value(checked_op([](int64_t x, int64_t y, int64_t* r) { return __builtin_sub_overflow(x, y, r); }, as_i(a),
                              as_i(b)));
    if (nums) return Value(a.as_double() - b.as_double());
  } else if (op == "*") {
    if (ints)
      return Value(checked_op([](int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); }, as_i(a),
                              as_i(b)));
    if (nums) return Value(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_list()) && int_like(b)) return repeat(a, as_i(b));
    if ((b.is_string() || b.is_list()) && int_like(a)) return repeat(b, as_i(a));
  } else if (op == "/") {
    if (nums) {
      if (b.as_double() == 0.0) throw TemplateError("division by zero");
      return Value(a.as_double() / b.as_double());
    }
  } else if (op == "//" || op == "%") {
    if (nums) {
      if (b.as_double() == 0.0)
        throw TemplateError(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
      if (ints) {
        const int64_t x = as_i(a), y = as_i(b);
        if (x == std::numeric_limits<int64_t>::min() && y == -1) checked(true, 0);
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return Value(op == "//" ? q : m);
      }
      const double x = a.as_double(), y = b.as_double();
      const double q = std::floor(x / y);
      return op == "//" ? Value(q) : Value(x - q * y);
    }
  } else if (op == "**") {
    if (ints && as_i(b) >= 0) {
      int64_t acc = 1;
      for (int64_t i = 0; i < as_i(b); ++i) {
        acc =
            checked_op([](int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); }, acc, as_i(a));
        if (acc == 0 || acc == 1) break;
      }
      return Value(acc);
    }
    if (nums) return Value(std::pow(a.as_double(), b.as_double()));
  }
  unsupported_operands(op, a, b);
}

Value unary_op(const std::string& op, const Value& v) {
  if (op == "not") return Value(!truthy(v));
  if (v.is_undefined()) throw_undefined(v);
  if (op == "+" && (v.is_number() || v.is_bool())) return v.is_float() ? v : Value(as_i(v));
  if (v.is_float()) return Value(-v.as_double());
  if (int_like(v)) return Value(-checked(as_i(v) == std::numeric_limits<int64_t>::min(), as_i(v)));
  throw TemplateError("bad operand type for unary " + op + ": '" + short_type_name(v) + "'");
}

}  // namespace specd::jinja

// Values of the Jinja interpreter, with Python's semantics where templates can see them: a
// value is undefined, none, a bool, an int (64-bit; overflow is an error, not a big int), a
// float, a UTF-8 string, a list, an ordered dict (also used for `namespace()` objects) or a
// function. Lists and dicts are shared by reference, as in Python; the sandbox never mutates a
// list or dict a template did not create as a namespace.
//
// Every operation that walks nested values (printing, tojson, equality, ordering) is bounded by
// kMaxDataDepth and throws TemplateError past it, so data from a request (or a namespace that
// holds itself) can never recurse without limit.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "template/budget.hpp"

namespace specd::jinja {

// How deep values may nest (lists in dicts in lists ...), for data read from JSON and for every
// operation that walks a value.
inline constexpr int kMaxDataDepth = 64;

// A template failed to compile or render; what() is the message the user sees (for
// raise_exception: the template's own message).
class TemplateError : public std::runtime_error {
 public:
  explicit TemplateError(const std::string& message) : std::runtime_error(message) {}
};

class Value;
struct Dict;
struct Function;
class Interpreter;
using List = std::vector<Value>;

// Arguments of a call: positional, then keyword (in call order).
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

struct Undefined {
  std::string hint;  // the UndefinedError message when the value is used
};
struct None {};

class Value {
 public:
  Value() = default;  // undefined
  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  static Value none() { return Value(None{}); }
  // A tuple: a list that prints as (a, b) and never equals a list, as in Python.
  static Value tuple(List l) {
    Value v(std::move(l));
    v.tuple_ = true;
    return v;
  }
  Value(bool b) : v_(b) {}                       // NOLINT(google-explicit-constructor)
  Value(int64_t i) : v_(i) {}                    // NOLINT
  Value(int i) : v_(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double d) : v_(d) {}                     // NOLINT
  // Strings and lists count against the running render's work budget (budget.hpp) when they are
  // made or copied (lists are shared: copying one copies a pointer).
  Value(std::string s) : v_((charge_work(s.size()), std::move(s))) {}         // NOLINT
  Value(std::string_view s) : v_((charge_work(s.size()), std::string(s))) {}  // NOLINT
  Value(const char* s) : Value(std::string_view(s)) {}                        // NOLINT
  Value(const Value& o) : v_(charged(o)), tuple_(o.tuple_) {}
  Value(Value&&) noexcept = default;
  Value& operator=(const Value& o) {
    if (this != &o) {
      v_ = charged(o);
      tuple_ = o.tuple_;
    }
    return *this;
  }
  Value& operator=(Value&&) noexcept = default;
  ~Value() = default;
  Value(List l);                                            // NOLINT
  Value(std::shared_ptr<Dict> d) : v_(std::move(d)) {}      // NOLINT
  Value(std::shared_ptr<Function> f) : v_(std::move(f)) {}  // NOLINT

  bool is_undefined() const { return std::holds_alternative<Undefined>(v_); }
  bool is_none() const { return std::holds_alternative<None>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_float() const { return std::holds_alternative<double>(v_); }
  bool is_number() const { return is_int() || is_float(); }  // bools are not numbers here
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<List>>(v_); }  // lists and tuples
  bool is_tuple() const { return tuple_; }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict>>(v_); }
  bool is_function() const { return std::holds_alternative<std::shared_ptr<Function>>(v_); }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_double() const;  // int or float (bools count as 0/1)
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const List& as_list() const { return *std::get<std::shared_ptr<List>>(v_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  Dict& mutable_dict() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  const std::shared_ptr<Dict>& dict_ptr() const { return std::get<std::shared_ptr<Dict>>(v_); }
  const Function& as_function() const { return *std::get<std::shared_ptr<Function>>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }

  // Python's type name as Jinja prints it in messages ("dict object", "str object", ...).
  std::string type_name() const;

 private:
  using Storage = std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<List>,
                               std::shared_ptr<Dict>, std::shared_ptr<Function>>;
  explicit Value(Undefined u) : v_(std::move(u)) {}
  explicit Value(None n) : v_(n) {}
  // o's storage, after charging the bytes of a string it holds (copying it copies them).
  static const Storage& charged(const Value& o) {
    if (const auto* s = std::get_if<std::string>(&o.v_)) charge_work(s->size());
    return o.v_;
  }
  Storage v_;
  bool tuple_ = false;
};

// An insertion-ordered dict. String keys are indexed; other keys are found by equality.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  bool is_namespace = false;  // namespace(): attributes may be assigned ({% set ns.x = ... %})

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
  size_t size() const { return items.size(); }

 private:
  std::unordered_map<std::string, size_t> string_index_;
};

// A callable: a global (range, namespace, raise_exception, ...), a bound method or a macro.
struct Function {
  std::string name;
  std::function<Value(Interpreter&, CallArgs&)> call;
};

std::shared_ptr<Dict> make_dict();
Value make_function(std::string name, std::function<Value(Interpreter&, CallArgs&)> call);

// [UndefinedError] messages: every use of an undefined value but printing, testing, iterating
// and len throws this.
[[noreturn]] void throw_undefined(const Value& v);

// ---- Python semantics ------------------------------------------------------------------------

bool truthy(const Value& v);
// str(v): how {{ v }} prints (undefined prints nothing).
std::string to_str(const Value& v);
// repr(v): strings quoted as Python quotes them (inside printed lists and dicts).
std::string repr(const Value& v);
// Python's repr of a float: the shortest text that reads back the same double.
std::string float_repr(double d);
// ==, as Python compares (1 == 1.0, deep for lists and dicts).
bool equals(const Value& a, const Value& b);
// a < b for numbers, strings (code point order) and lists; anything else throws.
bool less(const Value& a, const Value& b);
// len(v) in code points for strings; throws for values without a length.
int64_t length(const Value& v);
// for x in v: list items, dict keys, string characters; undefined is empty.
List iterate(const Value& v);

// JSON → Value (objects keep their key order); throws past kMaxDataDepth.
Value from_json(const nlohmann::ordered_json& j, int depth = 0);
Value from_json(const nlohmann::json& j, int depth = 0);
// Value → JSON text as Python's json.dumps(ensure_ascii=False, indent, separators, sort_keys).
struct JsonStyle {
  std::optional<std::string> indent;  // nullopt: one line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonStyle& style);

}  // namespace specd::jinja

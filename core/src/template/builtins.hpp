// Jinja's built-in filters, tests and globals and transformers' additions (tojson with
// ensure_ascii=False, raise_exception, strftime_now) in builtins.cpp; the sandbox's safe methods
// of str/dict/list in methods.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "template/value.hpp"

namespace specd::jinja {

class Interpreter;

using FilterFn = Value (*)(Interpreter&, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter&, const Value& input, CallArgs& args);

// Null when there is no filter / test of that name.
FilterFn find_filter(const std::string& name);
TestFn find_test(const std::string& name);
std::unordered_map<std::string, Value> make_globals();

// The bound method obj.name (str, dict and list methods), nullopt when the type has no such
// method. Methods that would modify a list or dict raise SecurityError when called.
std::optional<Value> find_method(const Value& obj, const std::string& name);

// Reads argument `pos` (positional) or `name` (keyword) of a builtin call, else `def`.
Value arg(const CallArgs& a, size_t pos, const char* name, Value def = Value());
// The same as a string / an integer (def when absent or none; TemplateError for a non-number),
// and as an optional string.
std::string str_arg(const CallArgs& a, size_t pos, const char* name, const std::string& def);
int64_t int_arg(const CallArgs& a, size_t pos, const char* name, int64_t def);
std::optional<std::string> opt_str(const CallArgs& a, size_t pos, const char* name);
// A Jinja list of the strings.
Value list_of_strings(const std::vector<std::string>& parts);

}  // namespace specd::jinja

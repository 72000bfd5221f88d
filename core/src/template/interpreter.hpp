// Runs a compiled template (ast.hpp) in Jinja's ImmutableSandboxedEnvironment semantics: names
// resolve through loop and macro scopes to the render variables and the globals; lists and
// dicts cannot be modified (calling append/update/pop... is a SecurityError); attributes that
// are not data or safe methods read as undefined.
//
// Resource limits (each a TemplateError, never a crash): output size, loop iterations plus
// macro calls, runtime nesting (expression evaluation, statements and macro calls together),
// range() length, and the data depth of values (value.hpp).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "template/ast.hpp"
#include "template/value.hpp"

namespace specd::jinja {

struct RenderLimits {
  size_t max_output_bytes = size_t{16} << 20;
  int64_t max_steps = 2'000'000;  // loop iterations + macro calls
  int max_runtime_depth = 400;    // nested evaluations, statements and calls
  int64_t max_range = 100'000;    // the sandbox's MAX_RANGE
  // Bytes and elements built, comparisons made (budget.hpp): bounds the render's work and, as
  // every value is counted when made or copied, its memory.
  uint64_t max_work = uint64_t{64} << 20;
  std::chrono::milliseconds timeout{0};       // wall clock for the whole render; 0 = none
  const std::atomic<bool>* cancel = nullptr;  // set to true: the render stops (TemplateError)
};

class Interpreter {
 public:
  // vars: the render variables (messages, tools, ...); now: what strftime_now formats.
  Interpreter(const RenderLimits& limits, std::chrono::system_clock::time_point now);

  std::string render(const Program& program, const std::unordered_map<std::string, Value>& vars);

  // Used by builtins.
  Value call(const Value& fn, CallArgs& args);
  const RenderLimits& limits() const { return limits_; }
  std::chrono::system_clock::time_point now() const { return now_; }
  void step();  // counts one loop iteration or call against max_steps

 private:
  struct Frame {
    Frame* parent = nullptr;
    std::unordered_map<std::string, Value> vars;
    const Value* find(const std::string& name) const;
  };
  enum class Flow { kNormal, kBreak, kContinue };
  struct DepthGuard {
    explicit DepthGuard(Interpreter& in);
    ~DepthGuard() { --in_.depth_; }
    Interpreter& in_;
  };

  Flow render_body(const Body& body, Frame& frame, std::string& out);
  Flow render_node(const Node& n, Frame& frame, std::string& out);
  Flow render_for(const Node& n, Frame& frame, std::string& out);
  void render_set(const Node& n, Frame& frame);
  Value make_macro(const Node& n, Frame* caller_body_frame);
  Value call_macro(const Node& n, CallArgs& args, const Value& caller);
  Value apply_filter(const Expr& e, Value input, Frame& frame);

  Value eval(const Expr& e, Frame& frame);
  Value eval_binary(const Expr& e, Frame& frame);
  Value eval_compare(const Expr& e, Frame& frame);
  Value eval_call(const Expr& e, Frame& frame);
  void eval_args(const Expr& e, size_t first, Frame& frame, CallArgs& out);
  Value lookup(const std::string& name, Frame& frame) const;
  void append(std::string& out, const std::string& text);

  RenderLimits limits_;
  std::chrono::system_clock::time_point now_;
  std::unordered_map<std::string, Value> globals_;
  Frame* root_ = nullptr;
  int depth_ = 0;
  int64_t steps_ = 0;
};

// ---- operations on values, shared with the builtins (operators.cpp) ---------------------------

// obj.name as Jinja's sandbox reads it (safe methods of str/dict/list are bound functions).
Value get_attr(const Value& obj, const std::string& name);
// obj[key] (key may be a string, which also finds methods, as Jinja does).
Value get_item(const Value& obj, const Value& key);
Value binary_op(const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
// `not x`, `+x`, `-x`.
Value unary_op(const std::string& op, const Value& v);
// obj[start:stop:step] of a string or list (Python's slice semantics).
Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Python's type name alone ("str", "dict"), for messages.
std::string short_type_name(const Value& v);

}  // namespace specd::jinja

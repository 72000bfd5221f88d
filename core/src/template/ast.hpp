// The syntax tree of a compiled template (parser.cpp builds it, interpreter.cpp runs it).
// Nesting is bounded by the parser (kMaxNesting), so walking a tree recurses a bounded depth.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.hpp"

namespace specd::jinja {

// Expressions and statements nested deeper than this are a syntax error.
inline constexpr int kMaxNesting = 64;

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // value
    kName,      // name
    kList,      // args
    kTuple,     // args (a tuple is a list to templates)
    kDict,      // args: key, value, key, value, ...
    kAttr,      // args[0].name
    kItem,      // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]] (null parts absent)
    kCall,      // args[0](args[1..], kwargs)
    kFilter,    // name applied to args[0], with args[1..], kwargs
    kTest,      // args[0] is name(args[1..], kwargs)
    kUnary,     // name in {"-", "+", "not"} applied to args[0]
    kBinary,    // args[0] name args[1]: + - * / // % ** ~ and or
    kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ... (== != < <= > >= in notin)
    kCondExpr,  // args[1] if args[0] else args[2] (args[2] may be null: undefined)
  };
  Kind kind;
  int line = 0;
  std::string name;
  Value value;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches: (cond, body)...; else_body
    kFor,          // targets in expr [if filter]: body [else else_body]
    kSet,          // targets (or attr target) = expr
    kSetBlock,     // {% set name %}body{% endset %} (optionally filtered)
    kMacro,        // name(params = defaults): body
    kCallBlock,    // {% call macro(args) %}body{% endcall %}: body is `caller()`
    kFilterBlock,  // {% filter f %}body{% endfilter %}
    kWith,         // {% with a = x %}body{% endwith %}
    kScope,        // body rendered as is ({% generation %} of transformers' AssistantTracker)
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;                      // output / for iterable / set value / call expression
  ExprPtr filter;                    // for ... if filter; set-block/filter-block filter (a kFilter over null)
  std::vector<std::string> targets;  // for / set names; kSet with attr: {namespace name, attribute}
  bool attr_target = false;          // {% set ns.attr = ... %}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if / elif
  Body body;
  Body else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro params (default may be null); with assignments
};

struct Program {
  Body body;
};

// Compiles template source with transformers' settings (trim_blocks, lstrip_blocks, loop
// controls, the {% generation %} tag). Throws TemplateError "line N: ..." on a syntax error.
std::shared_ptr<const Program> parse(std::string_view source);

}  // namespace specd::jinja

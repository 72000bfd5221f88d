// The parser of Jinja's grammar (jinja2/parser.py) over the lexer's tokens: statements in
// parser.cpp, expressions in parser_expr.cpp. Recursion follows the nesting of the source and is
// cut at kMaxNesting with a syntax error. Internal to core/src/template (the entry point is parse(),
// ast.hpp).
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "template/ast.hpp"
#include "template/lexer.hpp"

namespace specd::jinja::detail {

using T = Token::Type;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  std::shared_ptr<const Program> run() {
    auto prog = std::make_shared<Program>();
    std::string end = parse_body(prog->body, {});
    if (!end.empty()) fail("unexpected '" + end + "'");
    return prog;
  }

 private:
  // ---- token helpers --------------------------------------------------------------------------
  const Token& cur() const { return toks_[pos_]; }
  const Token& next() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  bool is_op(const char* op) const { return cur().type == T::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == T::kName && cur().text == n; }
  [[noreturn]] void fail(const std::string& message) const {
    throw TemplateError("line " + std::to_string(cur().line) + ": " + message);
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "'" + got());
    next();
  }
  std::string expect_name() {
    if (cur().type != T::kName) fail("expected a name" + got());
    return next().text;
  }
  void expect_block_end() {
    if (cur().type != T::kBlockEnd) fail("expected the end of the statement block" + got());
    next();
  }
  std::string got() const {
    switch (cur().type) {
      case T::kEof:
        return ", got the end of the template";
      case T::kBlockEnd:
        return ", got '%}'";
      case T::kVarEnd:
        return ", got '}}'";
      case T::kName:
      case T::kOp:
        return ", got '" + cur().text + "'";
      default:
        return "";
    }
  }

  struct Depth {
    explicit Depth(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting)
        p_.fail("the template nests deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    ~Depth() { --p_.depth_; }
    Parser& p_;
  };

  ExprPtr make(Expr::Kind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = cur().line;
    return e;
  }

  // ---- statements -----------------------------------------------------------------------------

  // Parses nodes until a block tag whose keyword is in `ends` (returned, the tag's keyword
  // consumed but not its arguments) or the end of the template ("").
  std::string parse_body(Body& body, const std::set<std::string>& ends);
  NodePtr node(Node::Kind k);
  NodePtr parse_statement();
  NodePtr parse_if();
  void parse_targets(std::vector<std::string>& targets);
  NodePtr parse_for();
  NodePtr parse_set();
  void parse_params(Node& n);
  NodePtr parse_macro();
  NodePtr parse_call_block();
  NodePtr parse_filter_block();
  NodePtr parse_with();

  // ---- expressions ----------------------------------------------------------------------------

  // A tuple when commas separate expressions ("a, b"), else the one expression.
  ExprPtr parse_tuple(bool with_condexpr = true);
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr obj);
  void parse_call_args(Expr& e);
  ExprPtr parse_call(ExprPtr callee);
  std::string dotted_name();
  // `| f(args) | g` applied to `e` (null: the body of a filter block or set block).
  ExprPtr parse_filter_chain(ExprPtr e, bool first_pipe = true);
  ExprPtr parse_filter_expr(ExprPtr e);
  ExprPtr parse_test(ExprPtr e);

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace specd::jinja::detail

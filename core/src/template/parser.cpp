// Jinja's statements (jinja2/parser.py: blocks, if, for, set, macro, call, filter, with) and the
// entry point parse(); expressions are in parser_expr.cpp.
#include "template/parser.hpp"

namespace specd::jinja {
namespace detail {

std::string Parser::parse_body(Body& body, const std::set<std::string>& ends) {
  Depth d(*this);
  for (;;) {
    const Token& t = cur();
    if (t.type == T::kEof) {
      if (!ends.empty()) fail("unexpected end of template; expected '" + *ends.begin() + "'");
      return "";
    }
    if (t.type == T::kData) {
      auto n = std::make_unique<Node>();
      n->kind = Node::Kind::kText;
      n->line = t.line;
      n->text = t.text;
      body.push_back(std::move(n));
      next();
    } else if (t.type == T::kVarBegin) {
      next();
      auto n = std::make_unique<Node>();
      n->kind = Node::Kind::kOutput;
      n->line = t.line;
      n->expr = parse_tuple();
      if (cur().type != T::kVarEnd) fail("expected '}}'" + got());
      next();
      body.push_back(std::move(n));
    } else if (t.type == T::kBlockBegin) {
      next();
      if (cur().type != T::kName) fail("expected a statement name" + got());
      std::string kw = cur().text;
      if (ends.count(kw)) {
        next();
        return kw;
      }
      body.push_back(parse_statement());
    } else {
      fail("unexpected token");
    }
  }
}

NodePtr Parser::node(Node::Kind k) {
  auto n = std::make_unique<Node>();
  n->kind = k;
  n->line = cur().line;
  return n;
}

NodePtr Parser::parse_statement() {
  Depth d(*this);
  const std::string kw = next().text;
  if (kw == "if") return parse_if();
  if (kw == "for") return parse_for();
  if (kw == "set") return parse_set();
  if (kw == "macro") return parse_macro();
  if (kw == "call") return parse_call_block();
  if (kw == "filter") return parse_filter_block();
  if (kw == "with") return parse_with();
  if (kw == "generation") {
    auto n = node(Node::Kind::kScope);
    expect_block_end();
    parse_body(n->body, {"endgeneration"});
    expect_block_end();
    return n;
  }
  if (kw == "break" || kw == "continue") {
    if (loop_depth_ == 0) fail("'" + kw + "' outside of a for loop");
    auto n = node(kw == "break" ? Node::Kind::kBreak : Node::Kind::kContinue);
    expect_block_end();
    return n;
  }
  if (kw == "include" || kw == "import" || kw == "from" || kw == "extends" || kw == "block")
    fail("'" + kw + "' is not available: chat templates render without a template loader");
  fail("unknown statement '" + kw + "'");
}

NodePtr Parser::parse_if() {
  auto n = node(Node::Kind::kIf);
  for (;;) {
    ExprPtr cond = parse_tuple(/*with_condexpr=*/false);
    expect_block_end();
    Body body;
    const std::string end = parse_body(body, {"elif", "else", "endif"});
    n->branches.emplace_back(std::move(cond), std::move(body));
    if (end == "elif") continue;
    if (end == "else") {
      expect_block_end();
      parse_body(n->else_body, {"endif"});
    }
    expect_block_end();
    return n;
  }
}

void Parser::parse_targets(std::vector<std::string>& targets) {
  const bool paren = is_op("(");
  if (paren) next();
  targets.push_back(expect_name());
  while (is_op(",")) {
    next();
    if (cur().type != T::kName) break;
    targets.push_back(expect_name());
  }
  if (paren) expect_op(")");
}

NodePtr Parser::parse_for() {
  auto n = node(Node::Kind::kFor);
  parse_targets(n->targets);
  if (!is_name("in")) fail("expected 'in'" + got());
  next();
  n->expr = parse_tuple(/*with_condexpr=*/false);
  if (is_name("if")) {
    next();
    n->filter = parse_expression();
  }
  if (is_name("recursive")) fail("recursive loops are not supported");
  expect_block_end();
  ++loop_depth_;
  const std::string end = parse_body(n->body, {"endfor", "else"});
  --loop_depth_;
  if (end == "else") {
    expect_block_end();
    parse_body(n->else_body, {"endfor"});
  }
  expect_block_end();
  return n;
}

NodePtr Parser::parse_set() {
  auto n = node(Node::Kind::kSet);
  const std::string first = expect_name();
  if (is_op(".")) {
    next();
    n->attr_target = true;
    n->targets = {first, expect_name()};
  } else {
    n->targets.push_back(first);
    while (is_op(",")) {
      next();
      n->targets.push_back(expect_name());
    }
  }
  if (is_op("=")) {
    next();
    n->expr = parse_tuple();
    expect_block_end();
    return n;
  }
  if (n->attr_target || n->targets.size() != 1) fail("expected '='" + got());
  n->kind = Node::Kind::kSetBlock;
  if (is_op("|")) n->filter = parse_filter_chain(nullptr);
  expect_block_end();
  parse_body(n->body, {"endset"});
  expect_block_end();
  return n;
}

void Parser::parse_params(Node& n) {
  expect_op("(");
  while (!is_op(")")) {
    if (!n.params.empty()) expect_op(",");
    if (is_op(")")) break;
    std::string name = expect_name();
    ExprPtr def;
    if (is_op("=")) {
      next();
      def = parse_expression();
    }
    n.params.emplace_back(std::move(name), std::move(def));
  }
  next();
}

NodePtr Parser::parse_macro() {
  auto n = node(Node::Kind::kMacro);
  n->targets.push_back(expect_name());
  parse_params(*n);
  expect_block_end();
  const int saved = loop_depth_;
  loop_depth_ = 0;
  parse_body(n->body, {"endmacro"});
  loop_depth_ = saved;
  if (cur().type == T::kName) next();  // {% endmacro name %}
  expect_block_end();
  return n;
}

NodePtr Parser::parse_call_block() {
  auto n = node(Node::Kind::kCallBlock);
  if (is_op("(")) parse_params(*n);
  n->expr = parse_expression();
  if (n->expr->kind != Expr::Kind::kCall) fail("expected a call");
  expect_block_end();
  parse_body(n->body, {"endcall"});
  expect_block_end();
  return n;
}

NodePtr Parser::parse_filter_block() {
  auto n = node(Node::Kind::kFilterBlock);
  n->filter = parse_filter_chain(nullptr, /*first_pipe=*/false);
  expect_block_end();
  parse_body(n->body, {"endfilter"});
  expect_block_end();
  return n;
}

NodePtr Parser::parse_with() {
  auto n = node(Node::Kind::kWith);
  while (cur().type != T::kBlockEnd) {
    if (!n->params.empty()) expect_op(",");
    std::string name = expect_name();
    expect_op("=");
    n->params.emplace_back(std::move(name), parse_expression());
  }
  expect_block_end();
  parse_body(n->body, {"endwith"});
  expect_block_end();
  return n;
}

}  // namespace detail

std::shared_ptr<const Program> parse(std::string_view source) {
  return detail::Parser(tokenize(source)).run();
}

}  // namespace specd::jinja

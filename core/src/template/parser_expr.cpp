// Jinja's expressions (jinja2/parser.py: conditional, or/and/not, comparisons, arithmetic,
// primaries, subscripts, calls, filters and tests).
#include "template/parser.hpp"

namespace specd::jinja::detail {

ExprPtr Parser::parse_tuple(bool with_condexpr) {
  Depth d(*this);
  auto parse_one = [&] { return parse_expression(with_condexpr); };
  ExprPtr first = parse_one();
  if (!is_op(",")) return first;
  auto t = make(Expr::Kind::kTuple);
  t->args.push_back(std::move(first));
  while (is_op(",")) {
    next();
    if (cur().type == T::kVarEnd || cur().type == T::kBlockEnd || is_op(")") || is_name("in")) break;
    t->args.push_back(parse_one());
  }
  return t;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  Depth d(*this);
  ExprPtr e = parse_or();
  if (!with_condexpr) return e;
  while (is_name("if")) {
    next();
    auto c = make(Expr::Kind::kCondExpr);
    c->args.push_back(parse_or());
    c->args.push_back(std::move(e));
    if (is_name("else")) {
      next();
      c->args.push_back(parse_expression());
    } else {
      c->args.push_back(nullptr);
    }
    e = std::move(c);
  }
  return e;
}

ExprPtr Parser::binary(const std::string& op, ExprPtr a, ExprPtr b) {
  auto e = make(Expr::Kind::kBinary);
  e->name = op;
  e->args.push_back(std::move(a));
  e->args.push_back(std::move(b));
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr e = parse_and();
  while (is_name("or")) {
    next();
    e = binary("or", std::move(e), parse_and());
  }
  return e;
}

ExprPtr Parser::parse_and() {
  ExprPtr e = parse_not();
  while (is_name("and")) {
    next();
    e = binary("and", std::move(e), parse_not());
  }
  return e;
}

ExprPtr Parser::parse_not() {
  Depth d(*this);
  if (is_name("not")) {
    auto e = make(Expr::Kind::kUnary);
    next();
    e->name = "not";
    e->args.push_back(parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  for (;;) {
    std::string op;
    if (cur().type == T::kOp && (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
                                 cur().text == ">" || cur().text == ">=")) {
      op = next().text;
    } else if (is_name("in")) {
      next();
      op = "in";
    } else if (is_name("not") && pos_ + 1 < toks_.size() && toks_[pos_ + 1].type == T::kName &&
               toks_[pos_ + 1].text == "in") {
      next();
      next();
      op = "notin";
    } else {
      break;
    }
    if (!cmp) {
      cmp = make(Expr::Kind::kCompare);
      cmp->args.push_back(std::move(first));
    }
    cmp->ops.push_back(op);
    cmp->args.push_back(parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

ExprPtr Parser::parse_math1() {
  ExprPtr e = parse_concat();
  while (is_op("+") || is_op("-")) {
    const std::string op = next().text;
    e = binary(op, std::move(e), parse_concat());
  }
  return e;
}

ExprPtr Parser::parse_concat() {
  ExprPtr e = parse_math2();
  while (is_op("~")) {
    next();
    e = binary("~", std::move(e), parse_math2());
  }
  return e;
}

ExprPtr Parser::parse_math2() {
  ExprPtr e = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const std::string op = next().text;
    e = binary(op, std::move(e), parse_pow());
  }
  return e;
}

ExprPtr Parser::parse_pow() {
  ExprPtr e = parse_unary(true);
  while (is_op("**")) {
    next();
    e = binary("**", std::move(e), parse_unary(true));
  }
  return e;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  Depth d(*this);
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    e = make(Expr::Kind::kUnary);
    e->name = next().text;
    e->args.push_back(parse_unary(false));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::parse_primary() {
  Depth d(*this);
  const Token& t = cur();
  auto lit = [&](Value v) {
    auto e = make(Expr::Kind::kLiteral);
    e->value = std::move(v);
    return e;
  };
  if (t.type == T::kName) {
    const std::string& n = t.text;
    if (n == "true" || n == "True") return next(), lit(Value(true));
    if (n == "false" || n == "False") return next(), lit(Value(false));
    if (n == "none" || n == "None") return next(), lit(Value::none());
    auto e = make(Expr::Kind::kName);
    e->name = next().text;
    return e;
  }
  if (t.type == T::kString) {
    std::string s = next().text;
    while (cur().type == T::kString) s += next().text;  // adjacent literals concatenate
    return lit(Value(std::move(s)));
  }
  if (t.type == T::kInt) return lit(Value(next().int_value));
  if (t.type == T::kFloat) return lit(Value(next().float_value));
  if (is_op("(")) {
    next();
    if (is_op(")")) {
      next();
      return make(Expr::Kind::kTuple);
    }
    ExprPtr e = parse_tuple();
    expect_op(")");
    return e;
  }
  if (is_op("[")) {
    auto e = make(Expr::Kind::kList);
    next();
    while (!is_op("]")) {
      if (!e->args.empty()) expect_op(",");
      if (is_op("]")) break;
      e->args.push_back(parse_expression());
    }
    next();
    return e;
  }
  if (is_op("{")) {
    auto e = make(Expr::Kind::kDict);
    next();
    while (!is_op("}")) {
      if (!e->args.empty()) expect_op(",");
      if (is_op("}")) break;
      e->args.push_back(parse_expression());
      expect_op(":");
      e->args.push_back(parse_expression());
    }
    next();
    return e;
  }
  fail("unexpected token" + got());
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  for (;;) {
    if (is_op(".")) {
      next();
      auto a = make(Expr::Kind::kAttr);
      if (cur().type == T::kInt) {  // foo.0 reads item 0
        a->kind = Expr::Kind::kItem;
        auto idx = make(Expr::Kind::kLiteral);
        idx->value = Value(next().int_value);
        a->args.push_back(std::move(e));
        a->args.push_back(std::move(idx));
      } else {
        a->name = expect_name();
        a->args.push_back(std::move(e));
      }
      e = std::move(a);
    } else if (is_op("[")) {
      e = parse_subscript(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr obj) {
  Depth d(*this);
  next();  // [
  ExprPtr parts[3];
  bool slice = false;
  int part = 0;
  while (!is_op("]")) {
    if (is_op(":")) {
      next();
      slice = true;
      if (++part > 2) fail("invalid slice");
      continue;
    }
    if (parts[part]) fail("expected ']'" + got());
    parts[part] = parse_expression();
  }
  next();
  auto e = make(slice ? Expr::Kind::kSlice : Expr::Kind::kItem);
  e->args.push_back(std::move(obj));
  if (!slice && !parts[0]) fail("expected a subscript");
  e->args.push_back(std::move(parts[0]));
  if (slice) {
    e->args.push_back(std::move(parts[1]));
    e->args.push_back(std::move(parts[2]));
  }
  return e;
}

void Parser::parse_call_args(Expr& e) {
  Depth d(*this);
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) expect_op(",");
    first = false;
    if (is_op(")")) break;
    if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
    if (cur().type == T::kName && pos_ + 1 < toks_.size() && toks_[pos_ + 1].type == T::kOp &&
        toks_[pos_ + 1].text == "=") {
      std::string key = next().text;
      next();
      e.kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      if (!e.kwargs.empty()) fail("positional argument after a keyword argument");
      e.args.push_back(parse_expression());
    }
  }
  next();
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto e = make(Expr::Kind::kCall);
  e->args.push_back(std::move(callee));
  parse_call_args(*e);
  return e;
}

std::string Parser::dotted_name() {
  std::string name = expect_name();
  while (is_op(".")) {
    next();
    name += '.';
    name += expect_name();
  }
  return name;
}

ExprPtr Parser::parse_filter_chain(ExprPtr e, bool first_pipe) {
  bool first = true;
  while (is_op("|") || (first && !first_pipe)) {
    if (is_op("|")) next();
    first = false;
    auto f = make(Expr::Kind::kFilter);
    f->name = dotted_name();
    f->args.push_back(std::move(e));
    if (is_op("(")) parse_call_args(*f);
    e = std::move(f);
  }
  return e;
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  for (;;) {
    if (is_op("|")) {
      e = parse_filter_chain(std::move(e));
    } else if (is_name("is")) {
      e = parse_test(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_test(ExprPtr e) {
  next();  // is
  bool negated = false;
  if (is_name("not")) {
    next();
    negated = true;
  }
  auto t = make(Expr::Kind::kTest);
  t->name = dotted_name();
  t->args.push_back(std::move(e));
  if (is_op("(")) {
    parse_call_args(*t);
  } else if ((cur().type == T::kName || cur().type == T::kString || cur().type == T::kInt || cur().type == T::kFloat ||
              is_op("(") || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail("you cannot chain multiple tests with is");
    t->args.push_back(parse_postfix(parse_primary()));
  }
  if (!negated) return t;
  auto n = make(Expr::Kind::kUnary);
  n->name = "not";
  n->args.push_back(std::move(t));
  return n;
}

}  // namespace specd::jinja::detail

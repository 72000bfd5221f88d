// Jinja's grammar (jinja2/parser.py) over the lexer's tokens. Recursion follows the nesting of
// the source and is cut at kMaxNesting with a syntax error.
#include <set>

#include "template/ast.hpp"
#include "template/lexer.hpp"

namespace specd::jinja {
namespace {

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
      case T::kEof: return ", got the end of the template";
      case T::kBlockEnd: return ", got '%}'";
      case T::kVarEnd: return ", got '}}'";
      case T::kName: case T::kOp: return ", got '" + cur().text + "'";
      default: return "";
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
  std::string parse_body(Body& body, const std::set<std::string>& ends) {
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
        const std::string kw = cur().text;
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

  NodePtr node(Node::Kind k) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->line = cur().line;
    return n;
  }

  NodePtr parse_statement() {
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

  NodePtr parse_if() {
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

  void parse_targets(std::vector<std::string>& targets) {
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

  NodePtr parse_for() {
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

  NodePtr parse_set() {
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

  void parse_params(Node& n) {
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

  NodePtr parse_macro() {
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

  NodePtr parse_call_block() {
    auto n = node(Node::Kind::kCallBlock);
    if (is_op("(")) parse_params(*n);
    n->expr = parse_expression();
    if (n->expr->kind != Expr::Kind::kCall) fail("expected a call");
    expect_block_end();
    parse_body(n->body, {"endcall"});
    expect_block_end();
    return n;
  }

  NodePtr parse_filter_block() {
    auto n = node(Node::Kind::kFilterBlock);
    n->filter = parse_filter_chain(nullptr, /*first_pipe=*/false);
    expect_block_end();
    parse_body(n->body, {"endfilter"});
    expect_block_end();
    return n;
  }

  NodePtr parse_with() {
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

  // ---- expressions ----------------------------------------------------------------------------

  // A tuple when commas separate expressions ("a, b"), else the one expression.
  ExprPtr parse_tuple(bool with_condexpr = true) {
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

  ExprPtr parse_expression(bool with_condexpr = true) {
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

  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = make(Expr::Kind::kBinary);
    e->name = op;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      next();
      e = binary("or", std::move(e), parse_and());
    }
    return e;
  }

  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      next();
      e = binary("and", std::move(e), parse_not());
    }
    return e;
  }

  ExprPtr parse_not() {
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

  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    for (;;) {
      std::string op;
      if (cur().type == T::kOp &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" || cur().text == ">" ||
           cur().text == ">=")) {
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

  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = next().text;
      e = binary(op, std::move(e), parse_concat());
    }
    return e;
  }

  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      next();
      e = binary("~", std::move(e), parse_math2());
    }
    return e;
  }

  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = next().text;
      e = binary(op, std::move(e), parse_pow());
    }
    return e;
  }

  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      next();
      e = binary("**", std::move(e), parse_unary(true));
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
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

  ExprPtr parse_primary() {
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

  ExprPtr parse_postfix(ExprPtr e) {
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

  ExprPtr parse_subscript(ExprPtr obj) {
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

  void parse_call_args(Expr& e) {
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

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make(Expr::Kind::kCall);
    e->args.push_back(std::move(callee));
    parse_call_args(*e);
    return e;
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (is_op(".")) {
      next();
      name += "." + expect_name();
    }
    return name;
  }

  // `| f(args) | g` applied to `e` (null: the body of a filter block or set block).
  ExprPtr parse_filter_chain(ExprPtr e, bool first_pipe = true) {
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

  ExprPtr parse_filter_expr(ExprPtr e) {
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

  ExprPtr parse_test(ExprPtr e) {
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
    } else if ((cur().type == T::kName || cur().type == T::kString || cur().type == T::kInt ||
                cur().type == T::kFloat || is_op("(") || is_op("[") || is_op("{")) &&
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

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

std::shared_ptr<const Program> parse(std::string_view source) { return Parser(tokenize(source)).run(); }

}  // namespace specd::jinja

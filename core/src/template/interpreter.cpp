#include "template/interpreter.hpp"

#include "template/builtins.hpp"

namespace specd::jinja {

// ---- interpreter -------------------------------------------------------------------------------

Interpreter::DepthGuard::DepthGuard(Interpreter& in) : in_(in) {
  if (++in_.depth_ > in_.limits_.max_runtime_depth) {
    --in_.depth_;
    throw TemplateError("the template recursed deeper than " + std::to_string(in_.limits_.max_runtime_depth) +
                        " levels");
  }
}

const Value* Interpreter::Frame::find(const std::string& name) const {
  for (const Frame* f = this; f != nullptr; f = f->parent) {
    if (auto it = f->vars.find(name); it != f->vars.end()) return &it->second;
  }
  return nullptr;
}

Interpreter::Interpreter(const RenderLimits& limits, std::chrono::system_clock::time_point now)
    : limits_(limits), now_(now), globals_(make_globals()) {}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps)
    throw TemplateError("the template ran more than " + std::to_string(limits_.max_steps) +
                        " loop iterations and calls");
  if ((steps_ & 63) == 0) check_render_deadline();
}

void Interpreter::append(std::string& out, const std::string& text) {
  if (out.size() + text.size() > limits_.max_output_bytes)
    throw TemplateError("the rendered template is larger than " + std::to_string(limits_.max_output_bytes >> 20) +
                        " MiB");
  out += text;
}

std::string Interpreter::render(const Program& program, const std::unordered_map<std::string, Value>& vars) {
  const BudgetScope budget(limits_);
  Frame root;
  root.vars = vars;
  root_ = &root;
  std::string out;
  render_body(program.body, root, out);
  root_ = nullptr;
  return out;
}

Value Interpreter::lookup(const std::string& name, Frame& frame) const {
  if (const Value* v = frame.find(name)) return *v;
  if (auto it = globals_.find(name); it != globals_.end()) return it->second;
  return Value::undefined("'" + name + "' is undefined");
}

Interpreter::Flow Interpreter::render_body(const Body& body, Frame& frame, std::string& out) {
  for (const NodePtr& n : body) {
    const Flow f = render_node(*n, frame, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::render_node(const Node& n, Frame& frame, std::string& out) {
  DepthGuard guard(*this);
  switch (n.kind) {
    case Node::Kind::kText:
      append(out, n.text);
      return Flow::kNormal;
    case Node::Kind::kOutput:
      append(out, to_str(eval(*n.expr, frame)));
      return Flow::kNormal;
    case Node::Kind::kIf:
      for (const auto& [cond, body] : n.branches)
        if (truthy(eval(*cond, frame))) return render_body(body, frame, out);
      return render_body(n.else_body, frame, out);
    case Node::Kind::kFor:
      return render_for(n, frame, out);
    case Node::Kind::kSet:
      render_set(n, frame);
      return Flow::kNormal;
    case Node::Kind::kSetBlock: {
      std::string captured;
      render_body(n.body, frame, captured);
      frame.vars[n.targets[0]] = n.filter ? apply_filter(*n.filter, Value(captured), frame) : Value(captured);
      return Flow::kNormal;
    }
    case Node::Kind::kMacro:
      frame.vars[n.targets[0]] = make_macro(n, nullptr);
      return Flow::kNormal;
    case Node::Kind::kCallBlock: {
      // The macro gets the block as its `caller` keyword (it runs in its own frame, as in Jinja).
      if (n.expr->kind != Expr::Kind::kCall)
        throw TemplateError("line " + std::to_string(n.line) + ": a call block needs a macro call");
      const Value fn = eval(*n.expr->args[0], frame);
      CallArgs args;
      eval_args(*n.expr, 1, frame, args);
      args.kwargs.emplace_back("caller", make_macro(n, &frame));
      append(out, to_str(call(fn, args)));
      return Flow::kNormal;
    }
    case Node::Kind::kFilterBlock: {
      std::string captured;
      Frame inner{&frame, {}};
      render_body(n.body, inner, captured);
      append(out, to_str(apply_filter(*n.filter, Value(captured), frame)));
      return Flow::kNormal;
    }
    case Node::Kind::kWith: {
      Frame inner{&frame, {}};
      for (const auto& [name, expr] : n.params) inner.vars[name] = eval(*expr, frame);
      render_body(n.body, inner, out);
      return Flow::kNormal;
    }
    case Node::Kind::kScope:
      return render_body(n.body, frame, out);
    case Node::Kind::kBreak:
      return Flow::kBreak;
    case Node::Kind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::render_for(const Node& n, Frame& frame, std::string& out) {
  List items = iterate(eval(*n.expr, frame));
  if (n.filter) {
    List kept;
    for (Value& item : items) {
      Frame probe{&frame, {}};
      if (n.targets.size() == 1) {
        probe.vars[n.targets[0]] = item;
      } else {
        List parts = iterate(item);
        for (size_t t = 0; t < n.targets.size() && t < parts.size(); ++t) probe.vars[n.targets[t]] = parts[t];
      }
      if (truthy(eval(*n.filter, probe))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    Frame inner{&frame, {}};
    render_body(n.else_body, inner, out);  // a break or continue in it ends only the loop
    return Flow::kNormal;
  }
  const auto len = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < len; ++i) {
    step();
    Frame inner{&frame, {}};
    const Value& item = items[static_cast<size_t>(i)];
    if (n.targets.size() == 1) {
      inner.vars[n.targets[0]] = item;
    } else {
      List parts = iterate(item);
      if (parts.size() != n.targets.size())
        throw TemplateError("line " + std::to_string(n.line) + ": cannot unpack " + std::to_string(parts.size()) +
                            " values into " + std::to_string(n.targets.size()) + " names");
      for (size_t t = 0; t < parts.size(); ++t) inner.vars[n.targets[t]] = parts[t];
    }
    auto loop = make_dict();
    loop->set(Value("index"), Value(i + 1));
    loop->set(Value("index0"), Value(i));
    loop->set(Value("revindex"), Value(len - i));
    loop->set(Value("revindex0"), Value(len - i - 1));
    loop->set(Value("first"), Value(i == 0));
    loop->set(Value("last"), Value(i == len - 1));
    loop->set(Value("length"), Value(len));
    loop->set(Value("depth"), Value(1));
    loop->set(Value("depth0"), Value(0));
    loop->set(Value("previtem"),
              i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
    loop->set(Value("nextitem"),
              i + 1 < len ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
    loop->set(Value("cycle"), make_function("cycle", [i](Interpreter&, CallArgs& a) {
                if (a.args.empty()) throw TemplateError("no items for cycling given");
                return a.args[static_cast<size_t>(i) % a.args.size()];
              }));
    loop->is_namespace = true;  // attributes only: loop.index, not loop.items()
    inner.vars["loop"] = Value(std::move(loop));
    if (render_body(n.body, inner, out) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Interpreter::render_set(const Node& n, Frame& frame) {
  Value v = eval(*n.expr, frame);
  if (n.attr_target) {
    const Value target = lookup(n.targets[0], frame);
    if (!target.is_dict() || !target.as_dict().is_namespace)
      throw TemplateError("line " + std::to_string(n.line) + ": cannot assign attribute on non-namespace object");
    target.mutable_dict().set(Value(n.targets[1]), std::move(v));
    return;
  }
  if (n.targets.size() == 1) {
    frame.vars[n.targets[0]] = std::move(v);
    return;
  }
  List parts = iterate(v);
  if (parts.size() != n.targets.size())
    throw TemplateError("line " + std::to_string(n.line) + ": cannot unpack " + std::to_string(parts.size()) +
                        " values into " + std::to_string(n.targets.size()) + " names");
  for (size_t i = 0; i < parts.size(); ++i) frame.vars[n.targets[i]] = parts[i];
}

// A macro (or the body of a call block, whose `caller` renders in the calling frame).
Value Interpreter::make_macro(const Node& n, Frame* caller_body_frame) {
  const Node* node = &n;
  if (caller_body_frame != nullptr) {
    return make_function("caller", [node, caller_body_frame](Interpreter& in, CallArgs& a) {
      in.step();
      Frame inner{caller_body_frame, {}};
      for (size_t i = 0; i < node->params.size(); ++i) {
        Value v = arg(a, i, node->params[i].first.c_str());
        if (v.is_undefined() && node->params[i].second) v = in.eval(*node->params[i].second, inner);
        inner.vars[node->params[i].first] = v;
      }
      std::string out;
      in.render_body(node->body, inner, out);
      return Value(std::move(out));
    });
  }
  return make_function(n.targets[0], [node](Interpreter& in, CallArgs& a) { return in.call_macro(*node, a, Value()); });
}

Value Interpreter::call_macro(const Node& n, CallArgs& a, const Value& caller) {
  step();
  DepthGuard guard(*this);
  Frame inner{root_, {}};
  if (a.args.size() > n.params.size())
    throw TemplateError("macro '" + n.targets[0] + "' takes not more than " + std::to_string(n.params.size()) +
                        " argument(s)");
  for (size_t i = 0; i < n.params.size(); ++i) {
    Value v = arg(a, i, n.params[i].first.c_str());
    if (v.is_undefined() && n.params[i].second) v = eval(*n.params[i].second, inner);
    if (v.is_undefined()) v = Value::undefined("parameter '" + n.params[i].first + "' was not provided");
    inner.vars[n.params[i].first] = v;
  }
  for (const auto& [key, value] : a.kwargs) {
    bool known = false;
    for (const auto& p : n.params) known = known || p.first == key;
    if (!known && key != "caller")
      throw TemplateError("macro '" + n.targets[0] + "' takes no keyword argument '" + key + "'");
    if (key == "caller") inner.vars["caller"] = value;
  }
  if (!caller.is_undefined()) inner.vars["caller"] = caller;
  std::string out;
  render_body(n.body, inner, out);
  return Value(std::move(out));
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) throw_undefined(fn);
  if (!fn.is_function()) throw TemplateError("'" + short_type_name(fn) + "' object is not callable");
  return fn.as_function().call(*this, args);
}

void Interpreter::eval_args(const Expr& e, size_t first, Frame& frame, CallArgs& out) {
  for (size_t i = first; i < e.args.size(); ++i) out.args.push_back(eval(*e.args[i], frame));
  for (const auto& [key, expr] : e.kwargs) out.kwargs.emplace_back(key, eval(*expr, frame));
}

Value Interpreter::apply_filter(const Expr& e, Value input, Frame& frame) {
  // A chain over a null base (filter and set blocks): apply the inner filters first.
  if (e.args[0] && e.args[0]->kind == Expr::Kind::kFilter && e.args[0]->args[0] == nullptr) {
    input = apply_filter(*e.args[0], std::move(input), frame);
  } else if (e.args[0]) {
    input = eval(*e.args[0], frame);
  }
  const FilterFn f = find_filter(e.name);
  if (f == nullptr) throw TemplateError("line " + std::to_string(e.line) + ": no filter named '" + e.name + "'");
  CallArgs args;
  eval_args(e, 1, frame, args);
  return f(*this, input, args);
}

Value Interpreter::eval(const Expr& e, Frame& frame) {
  DepthGuard guard(*this);
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.value;
    case Expr::Kind::kName:
      return lookup(e.name, frame);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      List out;
      for (const ExprPtr& x : e.args) out.push_back(eval(*x, frame));
      return e.kind == Expr::Kind::kTuple ? Value::tuple(std::move(out)) : Value(std::move(out));
    }
    case Expr::Kind::kDict: {
      auto d = make_dict();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) d->set(eval(*e.args[i], frame), eval(*e.args[i + 1], frame));
      return Value(std::move(d));
    }
    case Expr::Kind::kAttr:
      return get_attr(eval(*e.args[0], frame), e.name);
    case Expr::Kind::kItem:
      return get_item(eval(*e.args[0], frame), eval(*e.args[1], frame));
    case Expr::Kind::kSlice: {
      const Value obj = eval(*e.args[0], frame);
      auto part = [&](size_t i) { return e.args[i] ? eval(*e.args[i], frame) : Value(); };
      return slice_value(obj, part(1), part(2), part(3));
    }
    case Expr::Kind::kCall:
      return eval_call(e, frame);
    case Expr::Kind::kFilter:
      return apply_filter(e, Value(), frame);
    case Expr::Kind::kTest: {
      const TestFn t = find_test(e.name);
      if (t == nullptr) throw TemplateError("line " + std::to_string(e.line) + ": no test named '" + e.name + "'");
      const Value input = eval(*e.args[0], frame);
      CallArgs args;
      eval_args(e, 1, frame, args);
      return Value(t(*this, input, args));
    }
    case Expr::Kind::kUnary: {
      return unary_op(e.name, eval(*e.args[0], frame));
    }
    case Expr::Kind::kBinary:
      return eval_binary(e, frame);
    case Expr::Kind::kCompare:
      return eval_compare(e, frame);
    case Expr::Kind::kCondExpr:
      if (truthy(eval(*e.args[0], frame))) return eval(*e.args[1], frame);
      return e.args[2] ? eval(*e.args[2], frame)
                       : Value::undefined(
                             "the inline if expression evaluated to false and "
                             "no else section was defined.");
  }
  return Value();
}

Value Interpreter::eval_binary(const Expr& e, Frame& frame) {
  Value a = eval(*e.args[0], frame);
  if (e.name == "and") return truthy(a) ? eval(*e.args[1], frame) : a;
  if (e.name == "or") return truthy(a) ? a : eval(*e.args[1], frame);
  return binary_op(e.name, a, eval(*e.args[1], frame));
}

Value Interpreter::eval_compare(const Expr& e, Frame& frame) {
  Value left = eval(*e.args[0], frame);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.args[i + 1], frame);
    const std::string& op = e.ops[i];
    bool r = false;
    if (op == "==")
      r = equals(left, right);
    else if (op == "!=")
      r = !equals(left, right);
    else if (op == "<")
      r = less(left, right);
    else if (op == ">")
      r = less(right, left);
    else if (op == "<=")
      r = !less(right, left);
    else if (op == ">=")
      r = !less(left, right);
    else if (op == "in")
      r = contains(right, left);
    else
      r = !contains(right, left);
    if (!r) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Interpreter::eval_call(const Expr& e, Frame& frame) {
  const Value fn = eval(*e.args[0], frame);
  CallArgs args;
  eval_args(e, 1, frame, args);
  return call(fn, args);
}

}  // namespace specd::jinja

// Recursive-descent parser and tree-walking evaluator of circuit expressions. Nesting is capped
// (kMaxDepth) so hostile text cannot exhaust the stack; division and modulo by zero are errors.
#include "model/expr.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <optional>
#include <set>

namespace met::model {

struct ExprNode {
  enum class Kind { number, string, name, unary, binary, cond, call } kind;
  std::string op;     // operator, function or name
  double value = 0;   // number
  std::string text;   // string literal
  std::vector<std::shared_ptr<const ExprNode>> kids;
};

namespace {

using NodeP = std::shared_ptr<const ExprNode>;
constexpr int kMaxDepth = 64;

struct Parser {
  std::string_view s;
  std::size_t pos = 0;
  int depth = 0;
  std::string error;  // first error, "column N: ..."

  void skip() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t' || s[pos] == '\n' || s[pos] == '\r')) ++pos;
  }
  bool eat(std::string_view tok) {
    skip();
    if (s.substr(pos, tok.size()) != tok) return false;
    pos += tok.size();
    return true;
  }
  bool peek(std::string_view tok) {
    skip();
    return s.substr(pos, tok.size()) == tok;
  }
  NodeP fail_at(const std::string& what) {
    if (error.empty()) error = fmt::format("column {}: {}", pos + 1, what);
    return nullptr;
  }
  static NodeP make(ExprNode::Kind k, std::string op, std::vector<NodeP> kids) {
    auto n = std::make_shared<ExprNode>();
    n->kind = k;
    n->op = std::move(op);
    n->kids = std::move(kids);
    return n;
  }

  NodeP cond() {
    if (++depth > kMaxDepth) return fail_at("expression nested too deeply");
    NodeP c = disj();
    if (c && eat("?")) {
      NodeP a = cond();
      if (!a) return nullptr;
      if (!eat(":")) return fail_at("expected ':' of '?:'");
      NodeP b = cond();
      if (!b) return nullptr;
      c = make(ExprNode::Kind::cond, "?:", {c, a, b});
    }
    --depth;
    return c;
  }
  NodeP disj() {
    NodeP l = conj();
    while (l && eat("||")) {
      NodeP r = conj();
      if (!r) return nullptr;
      l = make(ExprNode::Kind::binary, "||", {l, r});
    }
    return l;
  }
  NodeP conj() {
    NodeP l = cmp();
    while (l && eat("&&")) {
      NodeP r = cmp();
      if (!r) return nullptr;
      l = make(ExprNode::Kind::binary, "&&", {l, r});
    }
    return l;
  }
  NodeP cmp() {
    NodeP l = add();
    while (l) {
      std::string op;
      for (std::string_view t : {"==", "!=", "<=", ">=", "<", ">"}) {
        if (eat(t)) {
          op = std::string(t);
          break;
        }
      }
      if (op.empty()) break;
      NodeP r = add();
      if (!r) return nullptr;
      l = make(ExprNode::Kind::binary, op, {l, r});
    }
    return l;
  }
  NodeP add() {
    NodeP l = mul();
    while (l) {
      std::string op;
      if (eat("+")) op = "+";
      else if (eat("-")) op = "-";
      else break;
      NodeP r = mul();
      if (!r) return nullptr;
      l = make(ExprNode::Kind::binary, op, {l, r});
    }
    return l;
  }
  NodeP mul() {
    NodeP l = unary();
    while (l) {
      std::string op;
      if (eat("*")) op = "*";
      else if (eat("//")) op = "//";
      else if (eat("/")) op = "/";
      else if (eat("%")) op = "%";
      else break;
      NodeP r = unary();
      if (!r) return nullptr;
      l = make(ExprNode::Kind::binary, op, {l, r});
    }
    return l;
  }
  NodeP unary() {
    if (++depth > kMaxDepth) return fail_at("expression nested too deeply");
    NodeP out;
    if (peek("!") && !peek("!=")) {
      eat("!");
      NodeP k = unary();
      out = k ? make(ExprNode::Kind::unary, "!", {k}) : nullptr;
    } else if (eat("-")) {
      NodeP k = unary();
      out = k ? make(ExprNode::Kind::unary, "-", {k}) : nullptr;
    } else if (eat("+")) {
      out = unary();
    } else {
      out = primary();
    }
    --depth;
    return out;
  }
  NodeP primary() {
    skip();
    if (pos >= s.size()) return fail_at("unexpected end of expression");
    const char c = s[pos];
    if (c == '(') {
      ++pos;
      NodeP e = cond();
      if (!e) return nullptr;
      if (!eat(")")) return fail_at("expected ')'");
      return e;
    }
    if (c == '\'') {
      const std::size_t close = s.find('\'', pos + 1);
      if (close == std::string_view::npos) return fail_at("unterminated string literal");
      auto n = std::make_shared<ExprNode>();
      n->kind = ExprNode::Kind::string;
      n->text = std::string(s.substr(pos + 1, close - pos - 1));
      pos = close + 1;
      return n;
    }
    if ((c >= '0' && c <= '9') || c == '.') {
      std::size_t end = pos;
      while (end < s.size() && ((s[end] >= '0' && s[end] <= '9') || s[end] == '.')) ++end;
      if (end < s.size() && (s[end] == 'e' || s[end] == 'E')) {
        std::size_t e = end + 1;
        if (e < s.size() && (s[e] == '+' || s[e] == '-')) ++e;
        if (e < s.size() && s[e] >= '0' && s[e] <= '9') {
          end = e;
          while (end < s.size() && s[end] >= '0' && s[end] <= '9') ++end;
        }
      }
      double v = 0;
      auto [ptr, ec] = std::from_chars(s.data() + pos, s.data() + end, v);
      if (ec != std::errc() || ptr != s.data() + end || !std::isfinite(v)) {
        return fail_at(fmt::format("bad number '{}'", s.substr(pos, end - pos)));
      }
      auto n = std::make_shared<ExprNode>();
      n->kind = ExprNode::Kind::number;
      n->value = v;
      pos = end;
      return n;
    }
    if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      std::size_t end = pos;
      while (end < s.size() && (s[end] == '_' || (s[end] >= 'a' && s[end] <= 'z') ||
                                (s[end] >= 'A' && s[end] <= 'Z') || (s[end] >= '0' && s[end] <= '9'))) {
        ++end;
      }
      std::string name(s.substr(pos, end - pos));
      pos = end;
      if (eat("(")) {
        static const std::set<std::string> kFuncs{"min", "max", "ceil", "floor", "sqrt"};
        if (!kFuncs.count(name)) return fail_at(fmt::format("unknown function '{}' (known: ceil, floor, max, min, sqrt)", name));
        std::vector<NodeP> args;
        if (!eat(")")) {
          do {
            NodeP a = cond();
            if (!a) return nullptr;
            args.push_back(a);
          } while (eat(","));
          if (!eat(")")) return fail_at("expected ')' after arguments");
        }
        const std::size_t want = (name == "min" || name == "max") ? 2 : 1;
        if (args.size() != want) {
          return fail_at(fmt::format("'{}' takes {} argument{}, found {}", name, want, want == 1 ? "" : "s", args.size()));
        }
        return make(ExprNode::Kind::call, name, std::move(args));
      }
      auto n = std::make_shared<ExprNode>();
      n->kind = ExprNode::Kind::name;
      n->op = std::move(name);
      return n;
    }
    return fail_at(fmt::format("unexpected character '{}'", c));
  }
};

void collect(const ExprNode& n, std::set<std::string>& out) {
  if (n.kind == ExprNode::Kind::name) out.insert(n.op);
  for (const auto& k : n.kids) collect(*k, out);
}

struct Evaluator {
  const Env& env;
  std::string error;

  std::optional<Value> bad(std::string what) {
    if (error.empty()) error = std::move(what);
    return std::nullopt;
  }
  std::optional<double> num(const ExprNode& n, const char* ctx) {
    auto v = eval(n);
    if (!v) return std::nullopt;
    if (v->is_string) {
      bad(fmt::format("'{}' needs a number, found the string '{}'", ctx, v->text));
      return std::nullopt;
    }
    return v->number;
  }

  std::optional<Value> eval(const ExprNode& n) {
    switch (n.kind) {
      case ExprNode::Kind::number: return Value::num(n.value);
      case ExprNode::Kind::string: return Value::str(n.text);
      case ExprNode::Kind::name: {
        auto it = env.find(n.op);
        if (it == env.end()) return bad(fmt::format("unknown name '{}'", n.op));
        return it->second;
      }
      case ExprNode::Kind::unary: {
        auto v = num(*n.kids[0], n.op.c_str());
        if (!v) return std::nullopt;
        return Value::num(n.op == "!" ? (*v == 0 ? 1 : 0) : -*v);
      }
      case ExprNode::Kind::cond: {
        auto c = num(*n.kids[0], "?:");
        if (!c) return std::nullopt;
        return eval(*n.kids[*c != 0 ? 1 : 2]);
      }
      case ExprNode::Kind::call: {
        auto a = num(*n.kids[0], n.op.c_str());
        if (!a) return std::nullopt;
        if (n.op == "ceil") return Value::num(std::ceil(*a));
        if (n.op == "floor") return Value::num(std::floor(*a));
        if (n.op == "sqrt") {
          if (*a < 0) return bad(fmt::format("'sqrt' of a negative number ({})", *a));
          return Value::num(std::sqrt(*a));
        }
        auto b = num(*n.kids[1], n.op.c_str());
        if (!b) return std::nullopt;
        return Value::num(n.op == "min" ? std::min(*a, *b) : std::max(*a, *b));
      }
      case ExprNode::Kind::binary: break;
    }
    const std::string& op = n.op;
    if (op == "&&" || op == "||") {
      auto a = num(*n.kids[0], op.c_str());
      if (!a) return std::nullopt;
      if (op == "&&" && *a == 0) return Value::num(0);
      if (op == "||" && *a != 0) return Value::num(1);
      auto b = num(*n.kids[1], op.c_str());
      if (!b) return std::nullopt;
      return Value::num(*b != 0 ? 1 : 0);
    }
    auto l = eval(*n.kids[0]);
    if (!l) return std::nullopt;
    auto r = eval(*n.kids[1]);
    if (!r) return std::nullopt;
    if (op == "==" || op == "!=") {
      if (l->is_string != r->is_string) return bad(fmt::format("'{}' compares a string with a number", op));
      const bool eq = l->is_string ? l->text == r->text : l->number == r->number;
      return Value::num((op == "==") == eq ? 1 : 0);
    }
    if (l->is_string || r->is_string) return bad(fmt::format("'{}' needs numbers, found a string", op));
    const double a = l->number, b = r->number;
    if (op == "<") return Value::num(a < b ? 1 : 0);
    if (op == "<=") return Value::num(a <= b ? 1 : 0);
    if (op == ">") return Value::num(a > b ? 1 : 0);
    if (op == ">=") return Value::num(a >= b ? 1 : 0);
    if (op == "+") return Value::num(a + b);
    if (op == "-") return Value::num(a - b);
    if (op == "*") return Value::num(a * b);
    if (b == 0) return bad(fmt::format("'{}' by zero", op));
    if (op == "/") return Value::num(a / b);
    if (op == "//") return Value::num(std::floor(a / b));
    return Value::num(a - b * std::floor(a / b));  // %: the sign follows the divisor, as // floors
  }
};

}  // namespace

std::vector<std::string> Expr::names() const {
  std::set<std::string> out;
  if (root_) collect(*root_, out);
  return {out.begin(), out.end()};
}

Expected<Value> Expr::eval(const Env& env) const {
  if (!root_) return fail(fmt::format("{}: empty expression", where_));
  Evaluator ev{env, {}};
  auto v = ev.eval(*root_);
  if (!v) return fail(fmt::format("{}: '{}': {}", where_, text_, ev.error));
  if (!v->is_string && !std::isfinite(v->number)) {
    return fail(fmt::format("{}: '{}': result is not finite", where_, text_));
  }
  return *v;
}

Expected<double> Expr::number(const Env& env) const {
  MET_TRY(Value v, eval(env));
  if (v.is_string) return fail(fmt::format("{}: '{}': expected a number, found the string '{}'", where_, text_, v.text));
  return v.number;
}

Expected<Expr> parse_expr(std::string_view text, std::string where) {
  Parser p{text, 0, 0, {}};
  NodeP root = p.cond();
  if (root) {
    p.skip();
    if (p.pos != text.size()) root = p.fail_at(fmt::format("unexpected '{}'", text.substr(p.pos, 1)));
  }
  if (!root) return fail(fmt::format("{}: '{}': {}", where, text, p.error));
  Expr e;
  e.root_ = std::move(root);
  e.text_ = std::string(text);
  e.where_ = std::move(where);
  return e;
}

Expr constant_expr(double v, std::string where) {
  auto n = std::make_shared<ExprNode>();
  n->kind = ExprNode::Kind::number;
  n->value = v;
  Expr e;
  e.root_ = std::move(n);
  e.text_ = fmt::format("{}", v);
  e.where_ = std::move(where);
  return e;
}

}  // namespace met::model

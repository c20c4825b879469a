// Recursive-descent parser following jinja2's grammar (parser.py's precedence and statement set,
// restricted to what chat templates use: if/for/set/macro/filter/break/continue).
#include "text/jinja_parser.hpp"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

namespace met::jinja {

Expr::~Expr() {
  std::vector<ExprPtr> todo;
  auto take = [&todo](Expr& e) {
    for (auto& a : e.args)
      if (a) todo.push_back(std::move(a));
    for (auto& kw : e.kwargs)
      if (kw.second) todo.push_back(std::move(kw.second));
  };
  take(*this);
  while (!todo.empty()) {
    ExprPtr x = std::move(todo.back());
    todo.pop_back();
    take(*x);  // x is destroyed childless at the end of this iteration
  }
}

namespace {

struct ParseError {
  std::string message;
  long offset;
};

// How deep a template may nest: expressions in expressions (parentheses, unary operators, chains
// of operators, filters, attributes and calls) and statements in statements. The parser and the
// renderer recurse once per level, so an unbounded depth would overflow the stack instead of being
// an error (jinja2 stops at Python's recursion limit, a few hundred levels of its own frames).
constexpr int kMaxNesting = 200;

// The depth of a tree, without recursion.
int tree_depth(const Expr& root) {
  int deepest = 0;
  std::vector<std::pair<const Expr*, int>> todo{{&root, 1}};
  while (!todo.empty()) {
    const auto [e, d] = todo.back();
    todo.pop_back();
    deepest = std::max(deepest, d);
    for (const auto& a : e->args)
      if (a) todo.emplace_back(a.get(), d + 1);
    for (const auto& kw : e->kwargs)
      if (kw.second) todo.emplace_back(kw.second.get(), d + 1);
  }
  return deepest;
}

// Placeholder name a filter block's body is bound to while its filters run.
constexpr const char* kBodyName = "\x01body";

struct Parser {
  const std::vector<Token>& toks;
  std::size_t i = 0;

  const Token& cur() const { return toks[i]; }
  const Token& peek(std::size_t n = 1) const { return toks[std::min(i + n, toks.size() - 1)]; }
  [[noreturn]] void error(const std::string& what, long offset) { throw ParseError{what, offset}; }
  [[noreturn]] void error(const std::string& what) { error(what, cur().offset); }
  bool is_op(const char* op) const { return cur().kind == Token::Kind::op && cur().text == op; }
  bool is_name(const char* n) const { return cur().kind == Token::Kind::name && cur().text == n; }
  std::string describe(const Token& t) const {
    switch (t.kind) {
      case Token::Kind::eof: return "end of template";
      case Token::Kind::block_end: return "end of statement block";
      case Token::Kind::var_end: return "end of print statement";
      case Token::Kind::string: return "string";
      case Token::Kind::data: return "template data";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!is_op(op)) error(std::string("expected '") + op + "', got " + describe(cur()));
    ++i;
  }
  std::string expect_name() {
    if (cur().kind != Token::Kind::name) error("expected a name, got " + describe(cur()));
    return toks[i++].text;
  }
  void expect_block_end() {
    if (cur().kind != Token::Kind::block_end) error("expected end of statement block, got " + describe(cur()));
    ++i;
  }

  // Levels of the rules that recurse (expression, not, unary, statement bodies), and of
  // expression() alone: its outermost call checks the whole tree, whose operator chains the rules
  // build in loops rather than by recursing.
  int nest = 0, expr_nest = 0;
  [[noreturn]] void too_deep(long offset) {
    error("the template nests deeper than " + std::to_string(kMaxNesting) + " levels", offset);
  }
  struct Level {
    Parser& p;
    int& n;
    Level(Parser& parser, int& counter) : p(parser), n(counter) {
      if (++n > kMaxNesting) p.too_deep(p.cur().offset);
    }
    ~Level() { --n; }
    Level(const Level&) = delete;
    Level& operator=(const Level&) = delete;
  };

  static ExprPtr make(Expr::Kind k, long offset) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->offset = offset;
    return e;
  }

  // ---- expressions ----
  ExprPtr expression(bool with_cond = true) {
    const long off = cur().offset;
    ExprPtr e;
    {
      const Level level(*this, nest);
      const Level outer(*this, expr_nest);
      e = conditional(with_cond);
      if (expr_nest > 1) return e;
    }
    if (tree_depth(*e) > kMaxNesting) too_deep(off);
    return e;
  }
  ExprPtr conditional(bool with_cond) {
    long off = cur().offset;
    ExprPtr e = or_expr();
    if (!with_cond) return e;
    while (is_name("if")) {
      ++i;
      auto c = make(Expr::Kind::cond, off);
      ExprPtr cond = or_expr();
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(cond));
      if (is_name("else")) {
        ++i;
        c->args.push_back(expression());
        c->has_else = true;
      }
      e = std::move(c);
    }
    return e;
  }
  ExprPtr or_expr() {
    ExprPtr l = and_expr();
    while (is_name("or")) {
      long off = cur().offset;
      ++i;
      auto b = make(Expr::Kind::logical_or, off);
      b->args.push_back(std::move(l));
      b->args.push_back(and_expr());
      l = std::move(b);
    }
    return l;
  }
  ExprPtr and_expr() {
    ExprPtr l = not_expr();
    while (is_name("and")) {
      long off = cur().offset;
      ++i;
      auto b = make(Expr::Kind::logical_and, off);
      b->args.push_back(std::move(l));
      b->args.push_back(not_expr());
      l = std::move(b);
    }
    return l;
  }
  ExprPtr not_expr() {
    if (is_name("not")) {
      const Level level(*this, nest);
      auto n = make(Expr::Kind::logical_not, cur().offset);
      ++i;
      n->args.push_back(not_expr());
      return n;
    }
    return compare();
  }
  ExprPtr compare() {
    long off = cur().offset;
    ExprPtr l = math1();
    ExprPtr c;
    while (true) {
      std::string op;
      if (cur().kind == Token::Kind::op &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        ++i;
      } else if (is_name("in")) {
        op = "in";
        ++i;
      } else if (is_name("not") && peek().kind == Token::Kind::name && peek().text == "in") {
        op = "notin";
        i += 2;
      } else {
        break;
      }
      if (!c) {
        c = make(Expr::Kind::compare, off);
        c->args.push_back(std::move(l));
      }
      c->ops.push_back(op);
      c->args.push_back(math1());
    }
    return c ? std::move(c) : std::move(l);
  }
  ExprPtr binary(ExprPtr l, const std::string& op, ExprPtr r, long off) {
    auto b = make(Expr::Kind::binary, off);
    b->name = op;
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }
  ExprPtr math1() {
    ExprPtr l = concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      long off = cur().offset;
      ++i;
      l = binary(std::move(l), op, concat(), off);
    }
    return l;
  }
  ExprPtr concat() {
    ExprPtr l = math2();
    while (is_op("~")) {
      long off = cur().offset;
      ++i;
      l = binary(std::move(l), "~", math2(), off);
    }
    return l;
  }
  ExprPtr math2() {
    ExprPtr l = pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      long off = cur().offset;
      ++i;
      l = binary(std::move(l), op, pow(), off);
    }
    return l;
  }
  ExprPtr pow() {
    ExprPtr l = unary(true);
    while (is_op("**")) {
      long off = cur().offset;
      ++i;
      l = binary(std::move(l), "**", unary(true), off);
    }
    return l;
  }
  ExprPtr unary(bool with_filter) {
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Level level(*this, nest);
      auto u = make(Expr::Kind::unary, cur().offset);
      u->name = cur().text;
      ++i;
      u->args.push_back(unary(false));
      e = std::move(u);
    } else {
      e = primary();
    }
    e = postfix(std::move(e));
    if (with_filter) e = filter_expr(std::move(e));
    return e;
  }
  ExprPtr primary() {
    const Token& t = cur();
    if (t.kind == Token::Kind::name) {
      ++i;
      if (t.text == "true" || t.text == "True") return constant(Value(true), t.offset);
      if (t.text == "false" || t.text == "False") return constant(Value(false), t.offset);
      if (t.text == "none" || t.text == "None") return constant(Value(None{}), t.offset);
      auto n = make(Expr::Kind::name, t.offset);
      n->name = t.text;
      return n;
    }
    if (t.kind == Token::Kind::string) {
      std::string s;
      long off = t.offset;
      while (cur().kind == Token::Kind::string) s += toks[i++].text;
      return constant(Value(std::move(s)), off);
    }
    if (t.kind == Token::Kind::integer) {
      ++i;
      return constant(Value(t.int_value), t.offset);
    }
    if (t.kind == Token::Kind::floating) {
      ++i;
      return constant(Value(t.float_value), t.offset);
    }
    if (is_op("(")) {
      long off = t.offset;
      ++i;
      if (is_op(")")) {
        ++i;
        return make(Expr::Kind::tuple, off);
      }
      ExprPtr first = expression();
      if (is_op(")")) {
        ++i;
        return first;
      }
      auto tup = make(Expr::Kind::tuple, off);
      tup->args.push_back(std::move(first));
      while (is_op(",")) {
        ++i;
        if (is_op(")")) break;
        tup->args.push_back(expression());
      }
      expect_op(")");
      return tup;
    }
    if (is_op("[")) {
      auto l = make(Expr::Kind::list, t.offset);
      ++i;
      while (!is_op("]")) {
        if (!l->args.empty()) expect_op(",");
        if (is_op("]")) break;
        l->args.push_back(expression());
      }
      ++i;
      return l;
    }
    if (is_op("{")) {
      auto d = make(Expr::Kind::dict, t.offset);
      ++i;
      while (!is_op("}")) {
        if (!d->args.empty()) expect_op(",");
        if (is_op("}")) break;
        d->args.push_back(expression());
        expect_op(":");
        d->args.push_back(expression());
      }
      ++i;
      return d;
    }
    error("unexpected " + describe(t));
  }
  ExprPtr constant(Value v, long off) {
    auto c = make(Expr::Kind::constant, off);
    c->value = std::move(v);
    return c;
  }
  ExprPtr postfix(ExprPtr e) {
    while (true) {
      if (is_op(".")) {
        long off = cur().offset;
        ++i;
        if (cur().kind == Token::Kind::integer) {
          auto it = make(Expr::Kind::item, off);
          it->args.push_back(std::move(e));
          it->args.push_back(constant(Value(cur().int_value), cur().offset));
          ++i;
          e = std::move(it);
          continue;
        }
        auto a = make(Expr::Kind::attr, off);
        a->name = expect_name();
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (is_op("[")) {
        long off = cur().offset;
        ++i;
        e = subscript(std::move(e), off);
      } else if (is_op("(")) {
        e = call(std::move(e), Expr::Kind::call, "");
      } else {
        return e;
      }
    }
  }
  ExprPtr subscript(ExprPtr obj, long off) {
    // [a], [a:b], [a:b:c], [::c]; a tuple index like [a, b] is not used by chat templates.
    ExprPtr parts[3];
    int colons = 0;
    if (!is_op(":")) parts[0] = expression();
    while (is_op(":") && colons < 2) {
      ++i;
      ++colons;
      if (!is_op(":") && !is_op("]")) parts[colons] = expression();
    }
    expect_op("]");
    if (colons == 0) {
      auto it = make(Expr::Kind::item, off);
      it->args.push_back(std::move(obj));
      it->args.push_back(std::move(parts[0]));
      return it;
    }
    auto s = make(Expr::Kind::slice, off);
    s->args.push_back(std::move(obj));
    for (auto& p : parts) s->args.push_back(p ? std::move(p) : constant(Value(None{}), off));
    return s;
  }
  // Call arguments after the callee/subject: positional then keyword (name=expr).
  void call_args(Expr& c) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (cur().kind == Token::Kind::name && peek().kind == Token::Kind::op && peek().text == "=") {
        std::string key = toks[i].text;
        i += 2;
        c.kwargs.emplace_back(key, expression());
      } else {
        if (!c.kwargs.empty()) error("positional argument follows keyword argument");
        c.args.push_back(expression());
      }
    }
    ++i;
  }
  ExprPtr call(ExprPtr callee, Expr::Kind kind, const std::string& name) {
    auto c = make(kind, callee->offset);
    if (kind == Expr::Kind::call) c->offset = cur().offset;
    c->name = name;
    c->args.push_back(std::move(callee));
    call_args(*c);
    return c;
  }
  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".")) {
      ++i;
      n += "." + expect_name();
    }
    return n;
  }
  ExprPtr filter_expr(ExprPtr e) {
    while (true) {
      if (is_op("|")) {
        ++i;
        e = filter_one(std::move(e));
      } else if (is_name("is")) {
        long off = cur().offset;
        ++i;
        bool negated = false;
        if (is_name("not")) {
          ++i;
          negated = true;
        }
        long name_off = cur().offset;
        std::string name = dotted_name();
        auto t = make(Expr::Kind::test, off);
        t->offset = name_off;
        t->name = name;
        t->negated = negated;
        t->args.push_back(std::move(e));
        if (is_op("(")) {
          call_args(*t);
        } else if ((cur().kind == Token::Kind::name || cur().kind == Token::Kind::string ||
                    cur().kind == Token::Kind::integer || cur().kind == Token::Kind::floating ||
                    is_op("(") || is_op("[") || is_op("{")) &&
                   !(is_name("else") || is_name("or") || is_name("and"))) {
          if (is_name("is")) error("you cannot chain multiple tests with is");
          ExprPtr arg = postfix(primary());
          t->args.push_back(std::move(arg));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = call(std::move(e), Expr::Kind::call, "");
      } else {
        return e;
      }
    }
  }
  ExprPtr filter_one(ExprPtr subject) {
    long off = cur().offset;
    std::string name = dotted_name();
    auto f = make(Expr::Kind::filter, off);
    f->name = name;
    f->args.push_back(std::move(subject));
    if (is_op("(")) call_args(*f);
    return f;
  }

  // ---- statements ----
  // Parses until a block tag whose name is in `ends`; leaves i at that name token.
  Body subparse(const std::set<std::string>& ends) {
    const Level level(*this, nest);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.kind == Token::Kind::eof) {
        if (!ends.empty()) {
          std::string want;
          for (const auto& e : ends) want += (want.empty() ? "'" : " or '") + e + "'";
          error("unexpected end of template, expected " + want);
        }
        return body;
      }
      if (t.kind == Token::Kind::data) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::data;
        s->offset = t.offset;
        s->text = t.text;
        body.push_back(std::move(s));
        ++i;
      } else if (t.kind == Token::Kind::var_begin) {
        ++i;
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::print;
        s->offset = t.offset;
        s->exprs.push_back(tuple_or_expression());
        if (cur().kind != Token::Kind::var_end) error("expected end of print statement, got " + describe(cur()));
        ++i;
        body.push_back(std::move(s));
      } else if (t.kind == Token::Kind::block_begin) {
        ++i;
        if (cur().kind == Token::Kind::name && ends.count(cur().text)) return body;
        body.push_back(statement());
      } else {
        error("unexpected " + describe(t));
      }
    }
  }
  ExprPtr tuple_or_expression() {
    long off = cur().offset;
    ExprPtr e = expression();
    if (!is_op(",")) return e;
    auto tup = make(Expr::Kind::tuple, off);
    tup->args.push_back(std::move(e));
    while (is_op(",")) {
      ++i;
      if (cur().kind == Token::Kind::var_end || cur().kind == Token::Kind::block_end) break;
      tup->args.push_back(expression());
    }
    return tup;
  }
  std::vector<std::string> target_names() {
    std::vector<std::string> names;
    bool paren = is_op("(");
    if (paren) ++i;
    names.push_back(expect_name());
    while (is_op(",")) {
      ++i;
      if (cur().kind != Token::Kind::name) break;
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }
  std::unique_ptr<Stmt> statement() {
    const Token& t = cur();
    if (t.kind != Token::Kind::name) error("tag name expected");
    auto s = std::make_unique<Stmt>();
    s->offset = t.offset;
    const std::string tag = t.text;
    ++i;
    if (tag == "if") {
      s->kind = Stmt::Kind::if_;
      s->exprs.push_back(expression());
      expect_block_end();
      while (true) {
        s->bodies.push_back(subparse({"elif", "else", "endif"}));
        std::string end = toks[i++].text;
        if (end == "elif") {
          s->exprs.push_back(expression());
          expect_block_end();
        } else if (end == "else") {
          expect_block_end();
          s->bodies.push_back(subparse({"endif"}));
          s->has_else = true;
          ++i;
          expect_block_end();
          break;
        } else {
          expect_block_end();
          break;
        }
      }
    } else if (tag == "for") {
      s->kind = Stmt::Kind::for_;
      s->targets = target_names();
      if (!is_name("in")) error("expected 'in', got " + describe(cur()));
      ++i;
      s->exprs.push_back(tuple_or_expression_no_cond());
      if (is_name("if")) {
        ++i;
        s->exprs.push_back(expression());
      }
      if (is_name("recursive")) error("recursive loops are not supported");
      expect_block_end();
      s->bodies.push_back(subparse({"endfor", "else"}));
      if (toks[i++].text == "else") {
        expect_block_end();
        s->bodies.push_back(subparse({"endfor"}));
        s->has_else = true;
        ++i;
      }
      expect_block_end();
    } else if (tag == "set") {
      std::string first = expect_name();
      if (is_op(".")) {
        ++i;
        s->kind = Stmt::Kind::set;
        s->targets = {first};
        s->ns_attr = expect_name();
        expect_op("=");
        s->exprs.push_back(tuple_or_expression());
        expect_block_end();
      } else if (is_op("=") || is_op(",")) {
        s->kind = Stmt::Kind::set;
        s->targets = {first};
        while (is_op(",")) {
          ++i;
          s->targets.push_back(expect_name());
        }
        expect_op("=");
        s->exprs.push_back(tuple_or_expression());
        expect_block_end();
      } else {
        s->kind = Stmt::Kind::set_block;
        s->targets = {first};
        if (is_op("|")) s->filter = body_filters();
        expect_block_end();
        s->bodies.push_back(subparse({"endset"}));
        ++i;
        expect_block_end();
      }
    } else if (tag == "macro") {
      s->kind = Stmt::Kind::macro;
      s->name = expect_name();
      expect_op("(");
      while (!is_op(")")) {
        if (!s->params.empty()) expect_op(",");
        s->params.push_back(expect_name());
        if (is_op("=")) {
          ++i;
          s->defaults.push_back(expression());
        } else {
          s->defaults.push_back(nullptr);
        }
      }
      ++i;
      expect_block_end();
      s->bodies.push_back(subparse({"endmacro"}));
      ++i;
      if (cur().kind == Token::Kind::name) ++i;  // {% endmacro name %}
      expect_block_end();
    } else if (tag == "filter") {
      s->kind = Stmt::Kind::filter_block;
      auto placeholder = make(Expr::Kind::name, cur().offset);
      placeholder->name = kBodyName;
      ExprPtr chain = filter_one(std::move(placeholder));
      while (is_op("|")) {
        ++i;
        chain = filter_one(std::move(chain));
      }
      s->filter = std::move(chain);
      expect_block_end();
      s->bodies.push_back(subparse({"endfilter"}));
      ++i;
      expect_block_end();
    } else if (tag == "break" || tag == "continue") {
      s->kind = tag == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_;
      expect_block_end();
    } else if (tag == "generation") {
      // transformers' AssistantTracker marks assistant spans; rendering passes the body through.
      s->kind = Stmt::Kind::if_;
      s->exprs.push_back(constant(Value(true), t.offset));
      expect_block_end();
      s->bodies.push_back(subparse({"endgeneration"}));
      ++i;
      expect_block_end();
    } else {
      error("unknown tag '" + tag + "'", t.offset);
    }
    return s;
  }
  ExprPtr tuple_or_expression_no_cond() {
    // The iterable of a for loop: `if` after it is the loop filter, not a conditional expression.
    long off = cur().offset;
    ExprPtr e = expression(/*with_cond=*/false);
    if (!is_op(",")) return e;
    auto tup = make(Expr::Kind::tuple, off);
    tup->args.push_back(std::move(e));
    while (is_op(",")) {
      ++i;
      tup->args.push_back(expression(false));
    }
    return tup;
  }
  ExprPtr body_filters() {
    auto placeholder = make(Expr::Kind::name, cur().offset);
    placeholder->name = kBodyName;
    ExprPtr chain = std::move(placeholder);
    while (is_op("|")) {
      ++i;
      chain = filter_one(std::move(chain));
    }
    return chain;
  }
};

}  // namespace

Expected<Body> parse(const std::vector<Token>& tokens, const std::string& normalized, const std::string& display) {
  Parser p{tokens};
  try {
    return p.subparse({});
  } catch (const ParseError& e) {
    return fail(display + ":" + location(normalized, e.offset) + ": " + e.message);
  }
}

}  // namespace met::jinja

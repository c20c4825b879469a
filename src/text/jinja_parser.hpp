// Syntax tree of a Jinja template and the parser that builds it from tokens, with Jinja's
// operator precedence (or < and < not < comparisons < + - < ~ < * / // % < ** < unary < postfix/filters).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "text/jinja_lexer.hpp"
#include "text/jinja_value.hpp"

namespace met::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    constant, name, attr, item, slice, call, filter, test, unary, binary, logical_and, logical_or,
    logical_not, compare, cond, list, tuple, dict
  };
  Kind kind;
  long offset = 0;
  Value value;               // constant
  std::string name;          // name, attr, filter/test name, unary/binary operator
  std::vector<ExprPtr> args;  // operands; call/filter/test: [subject or callee, positional...]
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // call/filter/test keywords
  std::vector<std::string> ops;  // compare: operators between args
  bool negated = false;       // test: `is not`
  bool has_else = false;      // cond: args = [then, cond, else?]

  Expr() = default;
  Expr(const Expr&) = delete;
  Expr& operator=(const Expr&) = delete;
  ~Expr();  // frees the subtree without recursing once per level: operator chains can be long
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind { data, print, if_, for_, set, set_block, macro, break_, continue_, filter_block };
  Kind kind;
  long offset = 0;
  std::string text;                    // data
  std::vector<ExprPtr> exprs;          // print: [e]; if: conditions; for: [iter, filter?]; set: [value]
  std::vector<Body> bodies;            // if: one per condition (+ else); for: [body, else]
  bool has_else = false;
  std::vector<std::string> targets;    // for/set names (tuple unpacking when >1); set_block: [name]
  std::string ns_attr;                 // set ns.attr: targets = [ns], ns_attr = attr
  ExprPtr filter;                      // set_block / filter_block: filter chain over a placeholder
  // macro
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;       // aligned with params; null where none
};

Expected<Body> parse(const std::vector<Token>& tokens, const std::string& normalized, const std::string& display);

}  // namespace met::jinja

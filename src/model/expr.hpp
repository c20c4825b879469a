// The circuit expression language (docs/arch/kernel-tree.md "Expressions"): parsed once into an
// immutable tree, evaluated many times against an environment of parameters, `arch` and `i`.
// Values are numbers or strings; booleans are 1 and 0. Every error names where the text came from.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.hpp"

namespace met::model {

struct Value {
  bool is_string = false;
  double number = 0;
  std::string text;

  static Value num(double v) { return Value{false, v, {}}; }
  static Value str(std::string s) { return Value{true, 0, std::move(s)}; }
};

using Env = std::map<std::string, Value, std::less<>>;

struct ExprNode;

class Expr {
 public:
  Expr() = default;
  bool empty() const { return root_ == nullptr; }
  const std::string& text() const { return text_; }
  const std::string& where() const { return where_; }
  // Names the expression reads (parameters, `arch`, `i`), sorted, each once.
  std::vector<std::string> names() const;
  Expected<Value> eval(const Env& env) const;
  // eval, and the value must be a number.
  Expected<double> number(const Env& env) const;

 private:
  friend Expected<Expr> parse_expr(std::string_view text, std::string where);
  friend Expr constant_expr(double v, std::string where);
  std::shared_ptr<const ExprNode> root_;
  std::string text_;
  std::string where_;  // "kernels/circuits/dense-gqa.toml:41: node 3 of kind 'full' param 'out'"
};

// where prefixes every error of the expression, at parse and at evaluation.
Expected<Expr> parse_expr(std::string_view text, std::string where);
// A literal number (TOML integers and floats where an expression is expected).
Expr constant_expr(double v, std::string where);

}  // namespace met::model

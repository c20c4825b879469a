// Expression language: precedence, floor division and modulo, strings, functions, and located
// errors. Each case names the mutation of the evaluator or parser it would catch.
#include <doctest/doctest.h>

#include "model/expr.hpp"

using namespace met::model;

namespace {
double eval(const std::string& text, const Env& env = {}) {
  auto e = parse_expr(text, "t.toml:1");
  REQUIRE_MESSAGE(e.ok(), e.error().message);
  auto v = e->number(env);
  REQUIRE_MESSAGE(v.ok(), v.error().message);
  return *v;
}
std::string error_of(const std::string& text, const Env& env = {}) {
  auto e = parse_expr(text, "t.toml:7");
  if (!e) return e.error().message;
  auto v = e->eval(env);
  return v ? std::string("no error") : v.error().message;
}
}  // namespace

TEST_CASE("multiplication binds tighter than addition, and parentheses override it") {
  CHECK(eval("2 + 3 * 4") == 14);
  CHECK(eval("(2 + 3) * 4") == 20);
  CHECK(eval("(32 + 2 * 8) * 128") == 6144);
}

TEST_CASE("'/' is real division and '//' floors; '%' follows the divisor's sign") {
  CHECK(eval("7 / 2") == 3.5);
  CHECK(eval("7 // 2") == 3);
  CHECK(eval("-7 // 2") == -4);
  CHECK(eval("7 % 3") == 1);
  CHECK(eval("-1 % 3") == 2);
}

TEST_CASE("parameters, 'i' and 'arch' come from the environment") {
  Env env{{"hidden", Value::num(4096)}, {"heads", Value::num(32)}, {"i", Value::num(5)},
          {"arch", Value::str("Qwen3ForCausalLM")}, {"pattern", Value::num(6)}};
  CHECK(eval("hidden // heads", env) == 128);
  CHECK(eval("(i + 1) % pattern == 0", env) == 1);
  CHECK(eval("arch == 'Qwen3ForCausalLM'", env) == 1);
  CHECK(eval("arch != 'Qwen3ForCausalLM'", env) == 0);
}

TEST_CASE("logic, comparisons and the conditional short-circuit as documented") {
  CHECK(eval("1 && 0 || 1") == 1);
  CHECK(eval("!0") == 1);
  CHECK(eval("!(3 > 2)") == 0);
  CHECK(eval("3 >= 3 && 2 <= 1") == 0);
  CHECK(eval("0 ? 1 / 0 : 7") == 7);    // the untaken branch is never evaluated
  CHECK(eval("0 && 1 / 0") == 0);
  CHECK(eval("1 ? 2 : 0 ? 3 : 4") == 2);
}

TEST_CASE("min, max, ceil and floor") {
  CHECK(eval("min(3, 2)") == 2);
  CHECK(eval("max(3, 2)") == 3);
  CHECK(eval("ceil(2.1)") == 3);
  CHECK(eval("floor(2.9)") == 2);
  CHECK(eval("sqrt(1152)") == doctest::Approx(33.941125496954285));  // Gemma's embedding scale
  CHECK(eval("1.5e3") == 1500);
}

TEST_CASE("names the expression reads are listed once, sorted") {
  auto e = parse_expr("(heads + 2 * kv_heads) * head_dim + heads", "x");
  REQUIRE(e.ok());
  CHECK(e->names() == std::vector<std::string>{"head_dim", "heads", "kv_heads"});
}

TEST_CASE("errors are located: an unknown name, a bad token, a missing paren, division by zero") {
  CHECK(error_of("hidden * 2") == "t.toml:7: 'hidden * 2': unknown name 'hidden'");
  CHECK(error_of("2 $ 3") == "t.toml:7: '2 $ 3': column 3: unexpected '$'");
  CHECK(error_of("(1 + 2") == "t.toml:7: '(1 + 2': column 7: expected ')'");
  CHECK(error_of("4 // 0") == "t.toml:7: '4 // 0': '//' by zero");
  CHECK(error_of("cbrt(8)") == "t.toml:7: 'cbrt(8)': column 6: unknown function 'cbrt' (known: ceil, floor, max, min, sqrt)");
  CHECK(error_of("sqrt(0 - 4)") == "t.toml:7: 'sqrt(0 - 4)': 'sqrt' of a negative number (-4)");
  CHECK(error_of("min(1)") == "t.toml:7: 'min(1)': column 7: 'min' takes 2 arguments, found 1");
  CHECK(error_of("'abc") == "t.toml:7: ''abc': column 1: unterminated string literal");
}

TEST_CASE("a string where a number is needed is an error, not zero") {
  Env env{{"arch", Value::str("X")}};
  CHECK(error_of("arch + 1", env) == "t.toml:7: 'arch + 1': '+' needs numbers, found a string");
  CHECK(error_of("arch == 1", env) == "t.toml:7: 'arch == 1': '==' compares a string with a number");
}

TEST_CASE("deep nesting is refused instead of overflowing the stack") {
  std::string deep(10000, '(');
  CHECK(error_of(deep).find("nested too deeply") != std::string::npos);
  std::string nots(10000, '-');
  CHECK(error_of(nots + "1").find("nested too deeply") != std::string::npos);
}

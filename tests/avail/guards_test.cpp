// #if expression evaluation and the conditional walk: each case names the evaluator mistake it
// catches (wrong precedence, eager evaluation, lost nesting, unlocated errors).
#include <doctest/doctest.h>

#include "avail/guards.hpp"

using met::avail::eval_pp_expr;
using met::avail::Macros;
using met::avail::scan_conditionals;

namespace {

long long ev(const char* expr, const Macros& m = {}) {
  auto v = eval_pp_expr(expr, m, "t.cuh:1");
  REQUIRE_MESSAGE(v.ok(), (v.ok() ? "" : v.error().message));
  return *v;
}

std::string ev_error(const char* expr, const Macros& m = {}) {
  auto v = eval_pp_expr(expr, m, "t.cuh:7");
  REQUIRE_MESSAGE(!v.ok(), expr);
  return v.error().message;
}

}  // namespace

TEST_CASE("operator precedence follows C (catches a flat left-to-right evaluator)") {
  CHECK(ev("1 + 2 * 3") == 7);
  CHECK(ev("(1 + 2) * 3") == 9);
  CHECK(ev("1 << 2 + 1") == 8);
  CHECK(ev("1 | 2 ^ 3 & 1") == 3);  // 1 | (2 ^ (3 & 1))
  CHECK(ev("2 == 2 & 0") == 0);     // (2 == 2) & 0
  CHECK(ev("1 || 0 && 0") == 1);    // 1 || (0 && 0)
  CHECK(ev("0 ? 1 : 0 ? 2 : 3") == 3);
  CHECK(ev("1 ? 2 : 3 + 10") == 2);
  CHECK(ev("10 - 4 - 3") == 3);     // left associative
  CHECK(ev("100 / 10 / 5") == 2);
  CHECK(ev("-7 / 2") == -3);
  CHECK(ev("-7 % 3") == -1);
  CHECK(ev("!0 + ~0") == 0);
  CHECK(ev("- - 3") == 3);
  CHECK(ev("3 < 4 == 1") == 1);
  CHECK(ev("8 >> 1 >= 4") == 1);
}

TEST_CASE("integer literals: hex, octal, binary, suffixes; unsigned arithmetic where C has it") {
  CHECK(ev("0x1F") == 31);
  CHECK(ev("017") == 15);
  CHECK(ev("0") == 0);
  CHECK(ev("0b101") == 5);
  CHECK(ev("900UL") == 900);
  CHECK(ev("10ll + 2LLU") == 12);
  CHECK(ev("'A'") == 65);
  CHECK(ev("-1 < 0") == 1);
  CHECK(ev("-1 < 0u") == 0);           // -1 converts to unsigned: a signed-only evaluator says 1
  CHECK(ev("0xFFFFFFFFFFFFFFFF > 0") == 1);  // too large for intmax_t: unsigned
  CHECK(ev_error("12abc").find("invalid suffix 'abc'") != std::string::npos);
  CHECK(ev_error("09").find("invalid digit '9'") != std::string::npos);
  CHECK(ev_error("1.5").find("floating constant") != std::string::npos);
  CHECK(ev_error("99999999999999999999").find("too large") != std::string::npos);
}

TEST_CASE("identifiers and both defined forms (catches undefined-is-error and defined-as-value)") {
  const Macros m{{"MET_HAS_WGMMA", 1}, {"MET_HAS_TMA", 0}, {"__CUDA_ARCH__", 900}};
  CHECK(ev("MET_HAS_WGMMA && MET_HAS_TMA", m) == 0);
  CHECK(ev("MET_HAS_UNKNOWN", m) == 0);
  CHECK(ev("defined MET_HAS_TMA", m) == 1);  // defined as 0 is still defined
  CHECK(ev("defined(MET_HAS_TMA) && !MET_HAS_TMA", m) == 1);
  CHECK(ev("defined ( MET_HAS_UNKNOWN )", m) == 0);
  CHECK(ev("!defined MET_HAS_UNKNOWN", m) == 1);
  CHECK(ev("__CUDA_ARCH__ >= 900", m) == 1);
  CHECK(ev("__CUDA_ARCH__ >= 1000", m) == 0);
  CHECK(ev("true && !false") == 1);
}

TEST_CASE("short-circuit: division by zero is an error only where evaluated") {
  const Macros m{{"N", 0}};
  CHECK(ev("N && 1 / N", m) == 0);
  CHECK(ev("!N || 1 / N", m) == 1);
  CHECK(ev("N ? 1 / N : 7", m) == 7);
  CHECK(ev("1 ? 5 : 1 % N", m) == 5);
  CHECK(ev("0 && (1 << 99)") == 0);
  CHECK(ev_error("1 / N", m) == "t.cuh:7: division by zero in expression '1 / N'");
  CHECK(ev_error("1 || 0 ? 1 / N : 0", m).find("division by zero") != std::string::npos);
  CHECK(ev_error("1 << 64").find("shift count 64 is out of range") != std::string::npos);
}

TEST_CASE("garbage tokens are located errors, never a silent 0") {
  CHECK(ev_error("1 +") == "t.cuh:7: expression ends too early in expression '1 +'");
  CHECK(ev_error("(1") == "t.cuh:7: missing ')' in expression '(1'");
  CHECK(ev_error("1 2") == "t.cuh:7: unexpected '2' in expression '1 2'");
  CHECK(ev_error("1 @ 2") == "t.cuh:7: unexpected '@' in expression '1 @ 2'");
  CHECK(ev_error("A = 1") == "t.cuh:7: unexpected '=' in expression 'A = 1'");
  CHECK(ev_error("\"x\"").find("string literal") != std::string::npos);
  CHECK(ev_error("1 ? 2") == "t.cuh:7: '?' without ':' in expression '1 ? 2'");
  CHECK(ev_error("defined") == "t.cuh:7: 'defined' without a macro name in expression 'defined'");
  CHECK(ev_error("defined(X") == "t.cuh:7: missing ')' after 'defined(X' in expression 'defined(X'");
  CHECK(ev_error("__has_include(<x.h>)") ==
        "t.cuh:7: function-like macro '__has_include' is not supported in expression '__has_include(<x.h>)'");
  CHECK(ev_error("   ") == "t.cuh:7: empty expression");
}

TEST_CASE("logical lines: continuations joined, comments stripped, literals kept") {
  auto lines = met::avail::logical_lines("#if A && \\\n    B /* c1\n c2 */ && C // tail\nx = \"//no\"; /* a */ y\n", "f.cuh");
  REQUIRE(lines.ok());
  REQUIRE(lines->size() == 2);
  CHECK((*lines)[0].line == 1);
  CHECK((*lines)[0].text == "#if A &&     B   && C ");
  CHECK((*lines)[1].line == 4);
  CHECK((*lines)[1].text == "x = \"//no\";   y");
  auto bad = met::avail::logical_lines("a\n/* open\n", "f.cuh");
  REQUIRE(!bad.ok());
  CHECK(bad.error().message == "f.cuh:2: unterminated comment");
}

TEST_CASE("nested #if/#elif/#else pick exactly one branch per level (catches a lost elif or else)") {
  const char* src =
      "#if MET_HAS_WGMMA\n"          // 1
      "wgmma\n"                      // 2
      "#  if MET_HAS_TMA\n"          // 3
      "wgmma_tma\n"                  // 4
      "#  else\n"                    // 5
      "wgmma_no_tma\n"               // 6
      "#  endif\n"                   // 7
      "#elif MET_HAS_MMA_SYNC\n"     // 8
      "mma\n"                        // 9
      "#elif 1\n"                    // 10
      "fallback\n"                   // 11
      "#else\n"                      // 12
      "never\n"                      // 13
      "#endif\n";                    // 14
  auto active = [&](const Macros& m) {
    auto s = scan_conditionals(src, "k.cuh", m);
    REQUIRE_MESSAGE(s.ok(), (s.ok() ? "" : s.error().message));
    std::string out;
    for (const auto& l : s->lines) {
      if (s->groups[l.group].active) out += l.text + ";";
    }
    return out;
  };
  CHECK(active({{"MET_HAS_WGMMA", 1}, {"MET_HAS_TMA", 1}}) == "wgmma;wgmma_tma;");
  CHECK(active({{"MET_HAS_WGMMA", 1}}) == "wgmma;wgmma_no_tma;");
  CHECK(active({{"MET_HAS_MMA_SYNC", 1}}) == "mma;");
  CHECK(active({}) == "fallback;");
}

TEST_CASE("rendered conditions say which branch a line is in") {
  const char* src =
      "#ifdef A\n"
      "a\n"
      "#elif B || C\n"
      "b\n"
      "#else\n"
      "#if D\n"
      "d\n"
      "#endif\n"
      "#endif\n";
  auto s = scan_conditionals(src, "k.cuh", {{"D", 1}});
  REQUIRE(s.ok());
  REQUIRE(s->lines.size() == 3);
  const auto& g0 = s->groups[s->lines[0].group];
  const auto& g1 = s->groups[s->lines[1].group];
  const auto& g2 = s->groups[s->lines[2].group];
  CHECK(g0.condition == "defined(A)");
  CHECK(!g0.active);
  CHECK(g0.failed == "defined(A)");
  CHECK(g0.failed_line == 1);
  CHECK(g1.condition == "!(defined(A)) && (B || C)");
  CHECK(g1.failed_line == 3);
  CHECK(g2.condition == "!(defined(A)) && !(B || C) && D");
  CHECK(g2.active);
  CHECK(g2.failed.empty());
}

TEST_CASE("a taken branch stops later #elif from being evaluated, a skipped group hides garbage") {
  // GCC and clang accept both: the #elif after a taken branch and the #if inside a skipped group
  // are never evaluated.
  auto s = scan_conditionals("#if 1\nx\n#elif 1/0\ny\n#endif\n#if 0\n#if @@@\n#endif\n#bogus\n#endif\n", "k.cuh", {});
  CHECK_MESSAGE(s.ok(), (s.ok() ? "" : s.error().message));
}

TEST_CASE("#define and #undef in active groups change later conditions; in skipped groups they do not") {
  const char* src =
      "# define MET_TILE (64 * 2)\n"
      "#if 0\n"
      "#define MET_TILE 1\n"
      "#endif\n"
      "#if MET_TILE == 128\n"
      "tile\n"
      "#endif\n"
      "#undef MET_HAS_TMA\n"
      "#ifndef MET_HAS_TMA\n"
      "no_tma\n"
      "#endif\n"
      "#define MET_INLINE __device__ __forceinline__\n"
      "#define MET_EMPTY\n"
      "#if defined(MET_INLINE) && MET_EMPTY\n"
      "opaque_defined\n"
      "#endif\n";
  auto s = scan_conditionals(src, "k.cuh", {{"MET_HAS_TMA", 1}});
  REQUIRE_MESSAGE(s.ok(), (s.ok() ? "" : s.error().message));
  std::string out;
  for (const auto& l : s->lines) {
    if (s->groups[l.group].active) out += l.text + ";";
  }
  CHECK(out == "tile;no_tma;opaque_defined;");
  CHECK(s->macros.at("MET_TILE") == 128);
  CHECK(s->macros.count("MET_HAS_TMA") == 0);
  auto bad = scan_conditionals("#define MET_INLINE __device__ inline\n#if MET_INLINE\n#endif\n", "k.cuh", {});
  REQUIRE(!bad.ok());
  CHECK(bad.error().message ==
        "k.cuh:2: 'MET_INLINE' (defined at k.cuh:1) is not an integer macro in expression 'MET_INLINE'");
}

TEST_CASE("an include guard is left out of rendered conditions") {
  auto s = scan_conditionals("#ifndef MET_GEMM_CUH\n#define MET_GEMM_CUH\n#if MET_HAS_MFMA\nk\n#endif\n#endif\n", "k.cuh", {});
  REQUIRE(s.ok());
  REQUIRE(s->lines.size() == 1);
  CHECK(s->groups[s->lines[0].group].condition == "MET_HAS_MFMA");
}

TEST_CASE("unbalanced directives are located errors") {
  auto err = [](const char* src) {
    auto s = scan_conditionals(src, "kernels/hopper/gemm_wgmma.cuh", {});
    REQUIRE_MESSAGE(!s.ok(), src);
    return s.error().message;
  };
  CHECK(err("x\n\n#elif A\n") == "kernels/hopper/gemm_wgmma.cuh:3: #elif without #if");
  CHECK(err("#else\n") == "kernels/hopper/gemm_wgmma.cuh:1: #else without #if");
  CHECK(err("#if 1\n#endif\n#endif\n") == "kernels/hopper/gemm_wgmma.cuh:3: #endif without #if");
  CHECK(err("a\n#if 1\n#if 0\n#endif\n") ==
        "kernels/hopper/gemm_wgmma.cuh:2: unterminated #if (no #endif before the end of the file)");
  CHECK(err("#if 1\n#else\n#elif 1\n#endif\n") ==
        "kernels/hopper/gemm_wgmma.cuh:3: #elif after #else (the #if is at line 1)");
  CHECK(err("#if 1\n#else\n#else\n#endif\n") == "kernels/hopper/gemm_wgmma.cuh:3: #else after #else (the #if is at line 1)");
  CHECK(err("#if\n#endif\n") == "kernels/hopper/gemm_wgmma.cuh:1: #if with no expression");
  CHECK(err("#ifdef A B\n#endif\n") == "kernels/hopper/gemm_wgmma.cuh:1: #ifdef takes one macro name, found 'A B'");
  CHECK(err("#if 1\n#endif junk\n") == "kernels/hopper/gemm_wgmma.cuh:2: extra tokens 'junk' after #endif");
  CHECK(err("/* a\n b */ #if A ==\n#endif\n") ==
        "kernels/hopper/gemm_wgmma.cuh:1: expression ends too early in expression 'A =='");
  CHECK(err("#if 0\n#else\n#error needs mma\n#endif\n") == "kernels/hopper/gemm_wgmma.cuh:3: #error needs mma");
  CHECK(err("#iff A\n") == "kernels/hopper/gemm_wgmma.cuh:1: unknown directive '#iff'");
  CHECK(err("#if A \\\n  && (B\n#endif\n") == "kernels/hopper/gemm_wgmma.cuh:1: missing ')' in expression 'A && (B'");
}

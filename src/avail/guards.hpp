// Preprocessor conditionals as the compiler sees them: #if integer constant expressions (C rules:
// precedence, unsigned promotion, short-circuit) and the #if/#elif/#else/#endif walk of a source,
// with object-like #define/#undef honoured in active regions. Nothing here reads a file.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.hpp"

namespace met::avail {

// Macro name -> integer value; a name absent from the map is undefined.
using Macros = std::map<std::string, long long>;

// Evaluates a #if expression. Undefined identifiers are 0, `defined X` and `defined(X)` test the
// map, `true`/`false` are 1/0 (C++). Division by zero and out-of-range shifts are errors only where
// evaluated. Errors read "<where>: <what> in expression '<expr>'".
Expected<long long> eval_pp_expr(std::string_view expr, const Macros& macros, const std::string& where);

// Identifiers an expression names, in order of first appearance, without `defined`/`true`/`false`.
// with_defined_operands: also the X of `defined X` (guards written as `#if defined(MET_HAS_X)`).
std::vector<std::string> pp_identifiers(std::string_view expr, bool with_defined_operands);

// One logical line: continuations joined, comments replaced by a space; `line` is the physical line
// it starts on (1-based).
struct SourceLine {
  int line = 0;
  std::string text;
};
// Errors: an unterminated /* comment, located at its start.
Expected<std::vector<SourceLine>> logical_lines(std::string_view text, const std::string& file);

// The preprocessor state shared by the code lines between two directives.
struct Group {
  bool active = true;
  std::string condition;  // conjunction of the enclosing branch conditions; "" = unconditional
  std::string failed;     // outermost branch condition that is false; "" when active
  int failed_line = 0;    // line of the directive that opened that branch
  Macros env;             // values of the identifiers of `condition`, taken at each directive
};

// A non-directive logical line and the group it belongs to.
struct CodeLine {
  int line = 0;
  std::string text;
  std::size_t group = 0;  // index into ConditionalScan::groups
};

struct ConditionalScan {
  std::vector<Group> groups;  // groups[0] is the unconditional top level
  std::vector<CodeLine> lines;
  Macros macros;              // the macro map after the last line
};

// Walks a source: tracks nesting, evaluates #if/#elif where the preprocessor would (not inside a
// skipped group, not after a taken branch), applies #define/#undef in active groups (integer
// bodies; an empty body counts as 1; other bodies define a non-integer macro whose use in #if is an
// error), and fails on an active #error. Structure errors (#elif/#else/#endif without #if, #elif
// after #else, unterminated #if, unknown directives in active groups) are "file:line: ...".
// An include guard (#ifndef X / #define X opening the file) is left out of rendered conditions.
Expected<ConditionalScan> scan_conditionals(std::string_view text, const std::string& file, Macros macros);

}  // namespace met::avail

// Tokenizer of Jinja source with the whitespace rules transformers configures: trim_blocks,
// lstrip_blocks, `-`/`+` markers, keep_trailing_newline off, {% raw %} blocks, comments dropped.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.hpp"

namespace met::jinja {

struct Token {
  enum class Kind { data, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, eof };
  Kind kind;
  std::string text;  // data text, name, operator, or the decoded string literal
  std::int64_t int_value = 0;
  double float_value = 0;
  long offset = 0;  // into the normalized source
};

// Source as Jinja sees it: line breaks normalized to "\n", one trailing line break dropped.
std::string normalize_source(std::string_view source);
// "line:col" (1-based) of a byte offset in the normalized source.
std::string location(const std::string& normalized, long offset);
// Tokens of the normalized source; errors are "display:line:col: ...".
Expected<std::vector<Token>> tokenize(const std::string& normalized, const std::string& display);

}  // namespace met::jinja

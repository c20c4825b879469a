// The regular expressions of tokenizer.json (written for Oniguruma, which tokenizers uses), run
// with PCRE2 in UTF + UCP mode. `\s` and `\S` are rewritten to Oniguruma's set (Unicode
// White_Space; PCRE2's also holds U+180E), so both engines split the same text the same way.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/expected.hpp"

namespace met::text {

class TokenizerRegex {
 public:
  // `where` locates the pattern in error messages ("tok.json: pre_tokenizer.pattern").
  static Expected<TokenizerRegex> compile(std::string_view onig_pattern, const std::string& where);
  // A regex that matches `literal` exactly.
  static Expected<TokenizerRegex> literal(std::string_view literal, const std::string& where);

  // Non-empty, non-overlapping matches of valid UTF-8 `text`, left to right, as byte ranges.
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view text) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
};

// Oniguruma pattern -> PCRE2 pattern (exposed for its unit test).
std::string onig_to_pcre2(std::string_view pattern);

}  // namespace met::text

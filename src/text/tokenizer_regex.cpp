// PCRE2 (8-bit, JIT when available) behind the tokenizer's regex interface.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/tokenizer_regex.hpp"

#include <pcre2.h>

namespace met::text {

namespace {
// Oniguruma's \s for UTF-8: the Unicode White_Space property.
constexpr std::string_view kOnigSpace =
    "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
}  // namespace

std::string onig_to_pcre2(std::string_view p) {
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 's') {
        if (in_class)
          out += kOnigSpace;
        else
          out += "[" + std::string(kOnigSpace) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kOnigSpace) + "]";
      } else {
        out += c;
        out += e;
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < p.size() && p[i + 1] == '^') {
        out += '^';
        ++i;
      }
      if (i + 1 < p.size() && p[i + 1] == ']') {
        out += ']';
        ++i;
      }
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct TokenizerRegex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {
Expected<pcre2_code*> compile_pcre2(const std::string& pattern, const std::string& where) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    return fail(where + ": bad regex at offset " + std::to_string(offset) + ": " + reinterpret_cast<const char*>(buf));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // failure is fine: the interpreter runs instead
  return code;
}
}  // namespace

Expected<TokenizerRegex> TokenizerRegex::compile(std::string_view onig_pattern, const std::string& where) {
  MET_TRY(pcre2_code * code, compile_pcre2(onig_to_pcre2(onig_pattern), where));
  auto holder = std::make_shared<Code>();
  holder->code = code;
  TokenizerRegex r;
  r.code_ = std::move(holder);
  return r;
}

Expected<TokenizerRegex> TokenizerRegex::literal(std::string_view literal, const std::string& where) {
  std::string p = "\\Q";
  for (std::size_t i = 0; i < literal.size(); ++i) {
    if (literal.substr(i, 2) == "\\E") {
      p += "\\E\\\\E\\Q";
      ++i;
      continue;
    }
    p += literal[i];
  }
  p += "\\E";
  MET_TRY(pcre2_code * code, compile_pcre2(p, where));
  auto holder = std::make_shared<Code>();
  holder->code = code;
  TokenizerRegex r;
  r.code_ = std::move(holder);
  return r;
}

std::vector<std::pair<std::size_t, std::size_t>> TokenizerRegex::find_all(std::string_view text) const {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_->code, nullptr);
  std::size_t start = 0;
  while (start <= text.size()) {
    const int rc =
        pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const std::size_t s = ov[0], e = ov[1];
    if (e > s) {
      out.emplace_back(s, e);
      start = e;
    } else {
      // An empty match: step over one whole character.
      if (s >= text.size()) break;
      std::size_t n = 1;
      while (s + n < text.size() && (static_cast<unsigned char>(text[s + n]) & 0xC0) == 0x80) ++n;
      start = s + n;
    }
  }
  pcre2_match_data_free(md);
  return out;
}

}  // namespace met::text

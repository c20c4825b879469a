// Jinja's lexer as jinja2 3.1 behaves with trim_blocks and lstrip_blocks: data runs up to the
// next `{{`, `{%` or `{#`; `-` strips all whitespace on its side, `+` keeps it; lstrip removes a
// line's leading blanks before a block or comment tag; trim removes one newline after `%}`/`#}`.
#include "text/jinja_lexer.hpp"

#include <cctype>

#include "text/jinja_value.hpp"

namespace met::jinja {

std::string normalize_source(std::string_view s) {
  // Python's str.splitlines() breaks, joined back with "\n" (which drops one trailing break).
  std::string out;
  bool ended_with_break = false;
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    if (c == '\r') len = (i + 1 < s.size() && s[i + 1] == '\n') ? 2 : 1;
    else if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) len = 1;
    else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85) len = 2;
    else if (c == 0xe2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
             (static_cast<unsigned char>(s[i + 2]) == 0xa8 || static_cast<unsigned char>(s[i + 2]) == 0xa9))
      len = 3;
    if (len) {
      out += '\n';
      i += len;
      ended_with_break = true;
    } else {
      out += s[i];
      ++i;
      ended_with_break = false;
    }
  }
  if (ended_with_break) out.pop_back();
  return out;
}

std::string location(const std::string& src, long offset) {
  int line = 1, col = 1;
  for (long i = 0; i < offset && i < static_cast<long>(src.size()); ++i) {
    if (src[static_cast<std::size_t>(i)] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<unsigned char>(src[static_cast<std::size_t>(i)]) & 0xc0) != 0x80) {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

namespace {

bool ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python's str.rstrip() on the ASCII whitespace a template's data holds.
std::string rstrip(const std::string& s) {
  std::size_t n = s.size();
  while (n && ascii_space(s[n - 1])) --n;
  return s.substr(0, n);
}

struct Lexer {
  const std::string& src;
  const std::string& display;
  std::vector<Token> out;
  std::size_t pos = 0;
  bool line_starting = true;  // the last consumed text ended with "\n" (or nothing was consumed)
  std::string error;

  bool fail(std::size_t at, const std::string& what) {
    error = display + ":" + location(src, static_cast<long>(at)) + ": " + what;
    return false;
  }
  bool at(std::size_t p, std::string_view s) const { return src.compare(p, s.size(), s) == 0; }
  void push(Token::Kind k, std::string text, std::size_t offset) {
    Token t{k, std::move(text)};
    t.offset = static_cast<long>(offset);
    out.push_back(std::move(t));
  }

  // Data before a tag at `tag` (sign is '-', '+' or 0): applies `-` stripping or lstrip_blocks.
  void emit_data(std::size_t start, std::size_t tag, char sign, bool lstrip_applies) {
    std::string text = src.substr(start, tag - start);
    if (sign == '-') {
      text = rstrip(text);
    } else if (sign != '+' && lstrip_applies) {
      std::size_t nl = text.rfind('\n');
      std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        bool blank = l_pos < text.size();
        for (std::size_t i = l_pos; i < text.size(); ++i)
          if (!ascii_space(text[i])) blank = false;
        if (blank) text.resize(l_pos);
      }
    }
    if (!text.empty()) push(Token::Kind::data, std::move(text), start);
  }

  // Consumes an end marker at pos: "-X}" + all whitespace, "+X}", or "X}" + one "\n" if trim.
  void consume_end(std::size_t len_without_sign, bool trim) {
    std::size_t start = pos;
    if (src[pos] == '-') {
      pos += 1 + len_without_sign;
      while (pos < src.size() && ascii_space(src[pos])) ++pos;
    } else if (src[pos] == '+') {
      pos += 1 + len_without_sign;
    } else {
      pos += len_without_sign;
      if (trim && pos < src.size() && src[pos] == '\n') ++pos;
    }
    line_starting = pos > start && src[pos - 1] == '\n';
  }

  // `{% raw %}` at pos (after the `{%` and sign): returns true and lexes the raw body.
  bool try_raw(std::size_t after_sign) {
    std::size_t p = after_sign;
    while (p < src.size() && ascii_space(src[p])) ++p;
    if (!at(p, "raw")) return false;
    p += 3;
    if (p < src.size() && (std::isalnum(static_cast<unsigned char>(src[p])) || src[p] == '_')) return false;
    while (p < src.size() && ascii_space(src[p])) ++p;
    if (at(p, "-%}")) {
      p += 3;
      while (p < src.size() && ascii_space(src[p])) ++p;
    } else if (at(p, "%}")) {
      p += 2;
    } else {
      return false;
    }
    std::size_t body = p;
    // Find `{%[-+]? endraw` followed by an end marker.
    for (std::size_t q = src.find("{%", body); q != std::string::npos; q = src.find("{%", q + 1)) {
      std::size_t r = q + 2;
      char sign = 0;
      if (r < src.size() && (src[r] == '-' || src[r] == '+')) sign = src[r++];
      while (r < src.size() && ascii_space(src[r])) ++r;
      if (!at(r, "endraw")) continue;
      r += 6;
      while (r < src.size() && ascii_space(src[r])) ++r;
      if (!(at(r, "%}") || at(r, "-%}") || at(r, "+%}"))) continue;
      line_starting = body > 0 && src[body - 1] == '\n';
      emit_data(body, q, sign, /*lstrip_applies=*/true);
      pos = r;
      consume_end(2, /*trim=*/true);
      return true;
    }
    fail(pos, "missing end of raw directive");
    return true;
  }

  bool lex_expression(const std::string& end) {  // end is "}}" or "%}"
    std::vector<char> balance;
    while (true) {
      while (pos < src.size() && ascii_space(src[pos])) ++pos;
      if (pos >= src.size()) return fail(pos, "unexpected end of template, expected '" + end + "'");
      if (balance.empty() && (at(pos, end) || ((src[pos] == '-' || src[pos] == '+') && at(pos + 1, end)))) {
        if (src[pos] == '+' && end == "}}") return fail(pos, "unexpected char '+'");
        push(end == "}}" ? Token::Kind::var_end : Token::Kind::block_end, end, pos);
        consume_end(2, /*trim=*/end == "%}");
        return true;
      }
      char c = src[pos];
      std::size_t start = pos;
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        while (pos < src.size() && (std::isalnum(static_cast<unsigned char>(src[pos])) || src[pos] == '_')) ++pos;
        push(Token::Kind::name, src.substr(start, pos - start), start);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        if (!lex_number()) return false;
      } else if (c == '\'' || c == '"') {
        if (!lex_string()) return false;
      } else {
        static const char* ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]",
                                    "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};
        std::string op;
        for (const char* o : ops)
          if (at(pos, o)) {
            op = o;
            break;
          }
        if (op.empty()) return fail(pos, std::string("unexpected char '") + c + "'");
        if (op == "{" || op == "(" || op == "[") balance.push_back(op == "{" ? '}' : op == "(" ? ')' : ']');
        if (op == "}" || op == ")" || op == "]") {
          if (balance.empty()) return fail(pos, "unexpected '" + op + "'");
          if (balance.back() != op[0])
            return fail(pos, "unexpected '" + op + "', expected '" + std::string(1, balance.back()) + "'");
          balance.pop_back();
        }
        pos += op.size();
        push(Token::Kind::op, op, start);
      }
      line_starting = src[pos - 1] == '\n';
    }
  }

  bool lex_number() {
    std::size_t start = pos;
    auto digits = [&] {
      while (pos < src.size() && (std::isdigit(static_cast<unsigned char>(src[pos])) ||
                                  (src[pos] == '_' && pos + 1 < src.size() &&
                                   std::isdigit(static_cast<unsigned char>(src[pos + 1])))))
        ++pos;
    };
    digits();
    bool is_float = false;
    if (pos + 1 < src.size() && src[pos] == '.' && std::isdigit(static_cast<unsigned char>(src[pos + 1]))) {
      is_float = true;
      ++pos;
      digits();
    }
    if (pos < src.size() && (src[pos] == 'e' || src[pos] == 'E')) {
      std::size_t p = pos + 1;
      if (p < src.size() && (src[p] == '+' || src[p] == '-')) ++p;
      if (p < src.size() && std::isdigit(static_cast<unsigned char>(src[p]))) {
        is_float = true;
        pos = p;
        digits();
      }
    }
    std::string text;
    for (std::size_t i = start; i < pos; ++i)
      if (src[i] != '_') text += src[i];
    Token t{is_float ? Token::Kind::floating : Token::Kind::integer, text};
    t.offset = static_cast<long>(start);
    try {
      if (is_float) t.float_value = std::stod(text);
      else t.int_value = std::stoll(text);
    } catch (const std::exception&) {
      return fail(start, "number out of range '" + text + "'");
    }
    out.push_back(std::move(t));
    return true;
  }

  // String literal with Python's unicode-escape decoding of backslash escapes.
  bool lex_string() {
    std::size_t start = pos;
    char q = src[pos++];
    std::string v;
    while (true) {
      if (pos >= src.size()) return fail(start, "unterminated string literal");
      char c = src[pos];
      if (c == q) {
        ++pos;
        break;
      }
      if (c != '\\') {
        v += c;
        ++pos;
        continue;
      }
      if (pos + 1 >= src.size()) return fail(start, "unterminated string literal");
      char e = src[pos + 1];
      pos += 2;
      auto hex = [&](int n) -> bool {
        if (pos + static_cast<std::size_t>(n) > src.size()) return false;
        char32_t cp = 0;
        for (int i = 0; i < n; ++i) {
          char h = src[pos + static_cast<std::size_t>(i)];
          if (!std::isxdigit(static_cast<unsigned char>(h))) return false;
          cp = cp * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        pos += static_cast<std::size_t>(n);
        append_utf8(v, cp);
        return true;
      };
      switch (e) {
        case '\n': break;
        case '\\': v += '\\'; break;
        case '\'': v += '\''; break;
        case '"': v += '"'; break;
        case 'a': v += '\a'; break;
        case 'b': v += '\b'; break;
        case 'f': v += '\f'; break;
        case 'n': v += '\n'; break;
        case 'r': v += '\r'; break;
        case 't': v += '\t'; break;
        case 'v': v += '\v'; break;
        case 'x': if (!hex(2)) return fail(pos - 2, "truncated \\xXX escape"); break;
        case 'u': if (!hex(4)) return fail(pos - 2, "truncated \\uXXXX escape"); break;
        case 'U': if (!hex(8)) return fail(pos - 2, "truncated \\UXXXXXXXX escape"); break;
        default:
          if (e >= '0' && e <= '7') {
            char32_t cp = static_cast<char32_t>(e - '0');
            for (int i = 0; i < 2 && pos < src.size() && src[pos] >= '0' && src[pos] <= '7'; ++i)
              cp = cp * 8 + static_cast<char32_t>(src[pos++] - '0');
            append_utf8(v, cp);
          } else {
            v += '\\';
            v += e;
          }
      }
    }
    push(Token::Kind::string, std::move(v), start);
    return true;
  }

  bool run() {
    while (pos < src.size()) {
      std::size_t tag = pos;
      while (true) {
        tag = src.find('{', tag);
        if (tag == std::string::npos || tag + 1 >= src.size()) {
          tag = std::string::npos;
          break;
        }
        char n = src[tag + 1];
        if (n == '{' || n == '%' || n == '#') break;
        ++tag;
      }
      if (tag == std::string::npos) {
        push(Token::Kind::data, src.substr(pos), pos);
        pos = src.size();
        break;
      }
      char kind = src[tag + 1];
      char sign = 0;
      if (tag + 2 < src.size() && (src[tag + 2] == '-' || src[tag + 2] == '+')) sign = src[tag + 2];
      std::size_t after = tag + 2 + (sign ? 1 : 0);
      std::size_t data_start = pos;
      if (kind == '%') {
        pos = tag;
        emit_data(data_start, tag, sign, /*lstrip_applies=*/true);
        if (try_raw(after)) {
          if (!error.empty()) return false;
          continue;
        }
        push(Token::Kind::block_begin, "{%", tag);
        pos = after;
        if (!lex_expression("%}")) return false;
      } else if (kind == '{') {
        emit_data(data_start, tag, sign, /*lstrip_applies=*/false);
        push(Token::Kind::var_begin, "{{", tag);
        pos = after;
        if (!lex_expression("}}")) return false;
      } else {
        emit_data(data_start, tag, sign, /*lstrip_applies=*/true);
        std::size_t e = src.find("#}", after);
        if (e == std::string::npos) return fail(tag, "missing end of comment tag");
        pos = e;
        if (e > after && (src[e - 1] == '-' || src[e - 1] == '+')) pos = e - 1;
        consume_end(2, /*trim=*/true);
      }
    }
    Token eof{Token::Kind::eof, ""};
    eof.offset = static_cast<long>(src.size());
    out.push_back(std::move(eof));
    return true;
  }
};

}  // namespace

Expected<std::vector<Token>> tokenize(const std::string& normalized, const std::string& display) {
  Lexer lx{normalized, display, {}, 0, true, {}};
  if (!lx.run()) return fail(lx.error);
  return std::move(lx.out);
}

}  // namespace met::jinja

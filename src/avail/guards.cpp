// Preprocessor conditionals: a #if expression evaluator (C integer semantics over 64 bits, wrapping
// where C leaves overflow undefined) and the conditional walk of one source text. Every error names
// the file and line of the directive.
#include "avail/guards.hpp"

#include <fmt/format.h>

#include <cctype>
#include <climits>
#include <optional>
#include <set>

#include "core/strings.hpp"

namespace met::avail {

namespace {

// ---------------------------------------------------------------------------------------------
// #if expressions

enum class Tok { number, ident, punct, end };

struct Token {
  Tok kind = Tok::end;
  std::string text;
  unsigned long long bits = 0;
  bool uns = false;
};

// A value of a #if expression: intmax_t or uintmax_t, as C evaluates it.
struct Val {
  unsigned long long bits = 0;
  bool uns = false;
  long long s() const { return static_cast<long long>(bits); }
  bool truth() const { return bits != 0; }
};

Val sval(long long v) { return Val{static_cast<unsigned long long>(v), false}; }

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string squash(std::string_view s) {
  std::string out;
  bool space = false;
  for (char c : trim(s)) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  // Returns the next token or an error message (without location).
  std::optional<std::string> next(Token& t) {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
    t = Token{};
    if (i_ >= s_.size()) return std::nullopt;
    const char c = s_[i_];
    if (ident_start(c)) {
      std::size_t b = i_;
      while (i_ < s_.size() && ident_char(s_[i_])) ++i_;
      t.kind = Tok::ident;
      t.text = std::string(s_.substr(b, i_ - b));
      return std::nullopt;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && i_ + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_ + 1])))) {
      return number(t);
    }
    if (c == '\'') return character(t);
    if (c == '"') return std::string("unexpected string literal");
    static const char* const two[] = {"<<", ">>", "<=", ">=", "==", "!=", "&&", "||"};
    for (const char* p : two) {
      if (s_.substr(i_, 2) == p) {
        t.kind = Tok::punct;
        t.text = p;
        i_ += 2;
        return std::nullopt;
      }
    }
    if (std::string_view("()!~-+*/%<>&^|?:").find(c) != std::string_view::npos) {
      t.kind = Tok::punct;
      t.text = std::string(1, c);
      ++i_;
      return std::nullopt;
    }
    return fmt::format("unexpected '{}'", c);
  }

 private:
  std::optional<std::string> number(Token& t) {
    // A pp-number: digits, letters, '.', '_', digit separators and exponent signs.
    std::size_t b = i_;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (ident_char(c) || c == '.' || (c == '\'' && i_ + 1 < s_.size() && ident_char(s_[i_ + 1]))) {
        ++i_;
      } else if ((c == '+' || c == '-') && i_ > b && std::string_view("eEpP").find(s_[i_ - 1]) != std::string_view::npos &&
                 !(s_.substr(b, 2) == "0x" || s_.substr(b, 2) == "0X")) {
        ++i_;
      } else {
        break;
      }
    }
    const std::string text(s_.substr(b, i_ - b));
    t.kind = Tok::number;
    t.text = text;
    std::string digits;
    for (char c : text) {
      if (c != '\'') digits += c;
    }
    int base = 10;
    std::size_t p = 0;
    if (digits.size() > 1 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
      base = 16;
      p = 2;
    } else if (digits.size() > 1 && digits[0] == '0' && (digits[1] == 'b' || digits[1] == 'B')) {
      base = 2;
      p = 2;
    } else if (digits[0] == '0') {
      base = 8;
    }
    if (digits.find('.') != std::string::npos ||
        (base != 16 && digits.find_first_of("eE") != std::string::npos && digits.find_first_of("eE") < digits.find_first_of("uUlL"))) {
      return fmt::format("floating constant '{}' in a preprocessor expression", text);
    }
    const std::size_t first = p;
    unsigned long long v = 0;
    bool overflow = false;
    for (; p < digits.size(); ++p) {
      const char c = digits[p];
      int d = -1;
      if (std::isdigit(static_cast<unsigned char>(c))) d = c - '0';
      else if (base == 16 && std::isxdigit(static_cast<unsigned char>(c))) d = std::tolower(c) - 'a' + 10;
      else break;
      if (d >= base) return fmt::format("invalid digit '{}' in constant '{}'", c, text);
      if (v > (ULLONG_MAX - static_cast<unsigned>(d)) / static_cast<unsigned>(base)) overflow = true;
      v = v * static_cast<unsigned>(base) + static_cast<unsigned>(d);
    }
    if (p == first && base != 8) return fmt::format("constant '{}' has no digits", text);
    if (overflow) return fmt::format("integer constant '{}' is too large", text);
    const std::string suffix = digits.substr(p);
    static const std::set<std::string> valid = {"",    "u",   "U",   "l",   "L",   "ul",  "uL",  "Ul",  "UL",
                                                "lu",  "lU",  "Lu",  "LU",  "ll",  "LL",  "ull", "uLL", "Ull",
                                                "ULL", "llu", "llU", "LLu", "LLU"};
    if (!valid.count(suffix)) return fmt::format("invalid suffix '{}' on integer constant '{}'", suffix, text);
    t.bits = v;
    t.uns = suffix.find_first_of("uU") != std::string::npos || v > static_cast<unsigned long long>(LLONG_MAX);
    return std::nullopt;
  }

  std::optional<std::string> character(Token& t) {
    std::size_t b = i_++;
    unsigned long long v = 0;
    int count = 0;
    while (i_ < s_.size() && s_[i_] != '\'') {
      char c = s_[i_++];
      if (c == '\\' && i_ < s_.size()) {
        const char e = s_[i_++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
            int x = e - '0';
            for (int k = 0; k < 2 && i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '7'; ++k) x = x * 8 + (s_[i_++] - '0');
            c = static_cast<char>(x);
            break;
          }
          case 'x': {
            int x = 0;
            while (i_ < s_.size() && std::isxdigit(static_cast<unsigned char>(s_[i_]))) {
              const char h = s_[i_++];
              x = x * 16 + (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : std::tolower(h) - 'a' + 10);
            }
            c = static_cast<char>(x);
            break;
          }
          case 'a': c = '\a'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          case 'v': c = '\v'; break;
          default: c = e; break;  // \\ \' \" \?
        }
      }
      v = static_cast<unsigned long long>(static_cast<long long>(static_cast<signed char>(c)));
      ++count;
    }
    if (i_ >= s_.size()) return std::string("unterminated character constant");
    ++i_;
    if (count != 1) return fmt::format("character constant {} must hold one character", s_.substr(b, i_ - b));
    t.kind = Tok::number;
    t.text = std::string(s_.substr(b, i_ - b));
    t.bits = v;
    return std::nullopt;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

// Recursive descent over the token list; `eval` false parses a short-circuited operand, whose
// division by zero is not an error (C evaluates only what the operators reach).
class Parser {
 public:
  Parser(std::vector<Token> toks, const Macros& m) : t_(std::move(toks)), m_(m) {}

  std::optional<Val> parse_all() {
    auto v = cond(true);
    if (!v) return std::nullopt;
    if (peek().kind != Tok::end) return err(fmt::format("unexpected '{}'", peek().text));
    return v;
  }

  const std::string& error() const { return err_; }

 private:
  const Token& peek() const { return t_[i_]; }
  bool is(const char* p) const { return peek().kind == Tok::punct && peek().text == p; }
  std::nullopt_t err(std::string m) {
    if (err_.empty()) err_ = std::move(m);
    return std::nullopt;
  }

  std::optional<Val> cond(bool eval) {
    auto c = binary(1, eval);
    if (!c) return std::nullopt;
    if (!is("?")) return c;
    ++i_;
    auto a = cond(eval && c->truth());
    if (!a) return std::nullopt;
    if (!is(":")) return err(peek().kind == Tok::end ? "'?' without ':'" : fmt::format("expected ':', found '{}'", peek().text));
    ++i_;
    auto b = cond(eval && !c->truth());
    if (!b) return std::nullopt;
    Val r = c->truth() ? *a : *b;
    r.uns = a->uns || b->uns;
    return r;
  }

  static int prec(const Token& t) {
    if (t.kind != Tok::punct) return 0;
    const std::string& p = t.text;
    if (p == "||") return 1;
    if (p == "&&") return 2;
    if (p == "|") return 3;
    if (p == "^") return 4;
    if (p == "&") return 5;
    if (p == "==" || p == "!=") return 6;
    if (p == "<" || p == ">" || p == "<=" || p == ">=") return 7;
    if (p == "<<" || p == ">>") return 8;
    if (p == "+" || p == "-") return 9;
    if (p == "*" || p == "/" || p == "%") return 10;
    return 0;
  }

  std::optional<Val> binary(int min_prec, bool eval) {
    auto lhs = unary(eval);
    if (!lhs) return std::nullopt;
    for (;;) {
      const int p = prec(peek());
      if (p == 0 || p < min_prec) return lhs;
      const std::string op = peek().text;
      ++i_;
      bool rhs_eval = eval;
      if (op == "&&") rhs_eval = eval && lhs->truth();
      if (op == "||") rhs_eval = eval && !lhs->truth();
      auto rhs = binary(p + 1, rhs_eval);
      if (!rhs) return std::nullopt;
      auto r = apply(op, *lhs, *rhs, rhs_eval);
      if (!r) return std::nullopt;
      lhs = r;
    }
  }

  std::optional<Val> apply(const std::string& op, Val a, Val b, bool eval) {
    if (op == "&&") return sval(a.truth() && b.truth());
    if (op == "||") return sval(a.truth() || b.truth());
    if (op == "<<" || op == ">>") {
      // The result has the left operand's type; the count must be in [0, 64).
      const bool bad = (!b.uns && b.s() < 0) || b.bits >= 64;
      if (bad) {
        if (eval) return err(fmt::format("shift count {} is out of range", b.uns ? fmt::format("{}", b.bits) : fmt::format("{}", b.s())));
        return Val{0, a.uns};
      }
      if (op == "<<") return Val{a.bits << b.bits, a.uns};
      if (a.uns) return Val{a.bits >> b.bits, true};
      return sval(a.s() >> b.bits);
    }
    const bool uns = a.uns || b.uns;  // usual arithmetic conversions
    if (op == "==") return sval(a.bits == b.bits);
    if (op == "!=") return sval(a.bits != b.bits);
    if (op == "<") return sval(uns ? a.bits < b.bits : a.s() < b.s());
    if (op == ">") return sval(uns ? a.bits > b.bits : a.s() > b.s());
    if (op == "<=") return sval(uns ? a.bits <= b.bits : a.s() <= b.s());
    if (op == ">=") return sval(uns ? a.bits >= b.bits : a.s() >= b.s());
    if (op == "&") return Val{a.bits & b.bits, uns};
    if (op == "^") return Val{a.bits ^ b.bits, uns};
    if (op == "|") return Val{a.bits | b.bits, uns};
    if (op == "+") return Val{a.bits + b.bits, uns};
    if (op == "-") return Val{a.bits - b.bits, uns};
    if (op == "*") return Val{a.bits * b.bits, uns};
    // "/" and "%"
    if (b.bits == 0) {
      if (eval) return err("division by zero");
      return Val{0, uns};
    }
    if (uns) return Val{op == "/" ? a.bits / b.bits : a.bits % b.bits, true};
    if (a.s() == LLONG_MIN && b.s() == -1) return op == "/" ? sval(LLONG_MIN) : sval(0);  // wraps
    return sval(op == "/" ? a.s() / b.s() : a.s() % b.s());
  }

  std::optional<Val> unary(bool eval) {
    const Token& t = peek();
    if (t.kind == Tok::punct) {
      const std::string op = t.text;
      if (op == "(") {
        ++i_;
        auto v = cond(eval);
        if (!v) return std::nullopt;
        if (!is(")")) return err(peek().kind == Tok::end ? "missing ')'" : fmt::format("expected ')', found '{}'", peek().text));
        ++i_;
        return v;
      }
      if (op == "!" || op == "~" || op == "-" || op == "+") {
        ++i_;
        auto v = unary(eval);
        if (!v) return std::nullopt;
        if (op == "!") return sval(!v->truth());
        if (op == "~") return Val{~v->bits, v->uns};
        if (op == "-") return Val{0 - v->bits, v->uns};
        return v;
      }
      return err(fmt::format("expected a value, found '{}'", op));
    }
    if (t.kind == Tok::number) {
      ++i_;
      return Val{t.bits, t.uns};
    }
    if (t.kind == Tok::ident) {
      const std::string name = t.text;
      ++i_;
      if (name == "defined") {
        const bool paren = is("(");
        if (paren) ++i_;
        if (peek().kind != Tok::ident) return err("'defined' without a macro name");
        const std::string m = peek().text;
        ++i_;
        if (paren) {
          if (!is(")")) return err(fmt::format("missing ')' after 'defined({}'", m));
          ++i_;
        }
        return sval(m_.count(m) ? 1 : 0);
      }
      if (is("(")) return err(fmt::format("function-like macro '{}' is not supported", name));
      if (name == "true") return sval(1);
      if (name == "false") return sval(0);
      auto it = m_.find(name);
      return sval(it == m_.end() ? 0 : it->second);
    }
    return err("expression ends too early");
  }

  std::vector<Token> t_;
  const Macros& m_;
  std::size_t i_ = 0;
  std::string err_;
};

std::optional<std::string> lex_all(std::string_view expr, std::vector<Token>& out) {
  Lexer lx(expr);
  for (;;) {
    Token t;
    if (auto e = lx.next(t)) return e;
    out.push_back(t);
    if (t.kind == Tok::end) return std::nullopt;
  }
}

}  // namespace

Expected<long long> eval_pp_expr(std::string_view expr, const Macros& macros, const std::string& where) {
  const std::string shown = squash(expr);
  std::vector<Token> toks;
  if (auto e = lex_all(expr, toks)) {
    // `__has_include(<x.h>)` fails to lex at '.', but the real problem is the macro call before it.
    for (std::size_t i = 0; i + 1 < toks.size(); ++i) {
      if (toks[i].kind == Tok::ident && toks[i].text != "defined" && toks[i + 1].kind == Tok::punct && toks[i + 1].text == "(") {
        return fail(fmt::format("{}: function-like macro '{}' is not supported in expression '{}'", where, toks[i].text, shown));
      }
    }
    return fail(fmt::format("{}: {} in expression '{}'", where, *e, shown));
  }
  if (toks.size() == 1) return fail(fmt::format("{}: empty expression", where));
  Parser p(std::move(toks), macros);
  auto v = p.parse_all();
  if (!v) return fail(fmt::format("{}: {} in expression '{}'", where, p.error(), shown));
  return v->s();
}

std::vector<std::string> pp_identifiers(std::string_view expr, bool with_defined_operands) {
  std::vector<Token> toks;
  lex_all(expr, toks);  // on a lexing error, the identifiers before it
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < toks.size(); ++i) {
    if (toks[i].kind != Tok::ident) continue;
    const std::string& name = toks[i].text;
    if (name == "true" || name == "false") continue;
    if (name == "defined") {
      std::size_t j = i + 1;
      if (j < toks.size() && toks[j].kind == Tok::punct && toks[j].text == "(") ++j;
      if (j < toks.size() && toks[j].kind == Tok::ident) {
        if (with_defined_operands && seen.insert(toks[j].text).second) out.push_back(toks[j].text);
        i = j;
      }
      continue;
    }
    if (seen.insert(name).second) out.push_back(name);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Logical lines

Expected<std::vector<SourceLine>> logical_lines(std::string_view text, const std::string& file) {
  // Phase 2: splice backslash-newline, remembering the physical line of every kept character.
  std::string s;
  std::vector<int> phys;
  s.reserve(text.size());
  phys.reserve(text.size());
  int line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      std::size_t j = i + 1;
      if (j < text.size() && text[j] == '\r') ++j;
      if (j < text.size() && text[j] == '\n') {
        i = j;
        ++line;
        continue;
      }
    }
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
    s += c;
    phys.push_back(line);
    if (c == '\n') ++line;
  }
  // Phase 3: comments become one space; a block comment spanning lines keeps the logical line open.
  std::vector<SourceLine> out;
  SourceLine cur;
  bool started = false;
  auto put = [&](char c, std::size_t at) {
    if (!started) {
      cur.line = phys[at];
      started = true;
    }
    cur.text += c;
  };
  auto flush = [&](std::size_t at) {
    if (!started) cur.line = phys[at];
    out.push_back(std::move(cur));
    cur = SourceLine{};
    started = false;
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\n') {
      flush(i);
      continue;
    }
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i + 1 < s.size() && s[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      const std::size_t end = s.find("*/", i + 2);
      if (end == std::string::npos) return fail(fmt::format("{}:{}: unterminated comment", file, phys[i]));
      put(' ', i);
      i = end + 1;
      continue;
    }
    if (c == '"' || c == '\'') {
      // A literal is copied as is, so a "//" inside it is not a comment; it ends at the line's end
      // at the latest (an apostrophe in skipped text is not an error).
      put(c, i);
      std::size_t j = i + 1;
      while (j < s.size() && s[j] != '\n' && s[j] != c) {
        if (s[j] == '\\' && j + 1 < s.size() && s[j + 1] != '\n') {
          put(s[j], j);
          ++j;
        }
        put(s[j], j);
        ++j;
      }
      if (j < s.size() && s[j] == c) put(s[j], j);
      else --j;
      i = j;
      continue;
    }
    put(c, i);
  }
  if (started || (!s.empty() && s.back() != '\n')) flush(s.empty() ? 0 : s.size() - 1);
  return out;
}

// ---------------------------------------------------------------------------------------------
// The conditional walk

namespace {

struct Frame {
  int line = 0;                     // the #if / #ifdef / #ifndef
  bool parent_active = true;
  bool taken = false;               // an earlier branch (or this one) was true
  bool active = false;              // the current branch is compiled
  bool seen_else = false;
  bool include_guard = false;
  std::vector<std::string> prior;   // own conditions of earlier branches
  std::string raw;                  // own condition of the current branch ("B" of an #elif B)
  std::string branch;               // rendered condition of the current branch ("!(A) && B")
  int branch_line = 0;
  Macros env;                       // values of the identifiers of the branch conditions
};

// Wraps a condition that would not read as one operand of `&&`.
std::string operand(const std::string& c) {
  int depth = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (c[i] == '(') ++depth;
    if (c[i] == ')') --depth;
    const bool loose = c[i] == '?' || (c[i] == '|' && i + 1 < c.size() && c[i + 1] == '|');
    if (depth == 0 && loose) return "(" + c + ")";
  }
  return c;
}

std::string render_branch(const std::vector<std::string>& prior, const std::string* current) {
  std::vector<std::string> parts;
  for (const auto& p : prior) parts.push_back("!(" + p + ")");
  if (current) parts.push_back(operand(*current));
  return join(parts, " && ");
}

bool is_identifier(std::string_view s) {
  if (s.empty() || !ident_start(s[0])) return false;
  for (char c : s) {
    if (!ident_char(c)) return false;
  }
  return true;
}

class Walker {
 public:
  Walker(std::string file, Macros macros) : file_(std::move(file)), macros_(std::move(macros)) {
    out_.groups.push_back(Group{});
  }

  Expected<ConditionalScan> run(const std::vector<SourceLine>& lines) {
    for (std::size_t k = 0; k < lines.size(); ++k) {
      const SourceLine& l = lines[k];
      const std::string_view t = trim(l.text);
      if (t.empty()) continue;
      if (t[0] != '#') {
        out_.lines.push_back(CodeLine{l.line, l.text, out_.groups.size() - 1});
        seen_code_ = true;
        continue;
      }
      std::string_view rest = trim(t.substr(1));
      std::size_t n = 0;
      while (n < rest.size() && ident_char(rest[n])) ++n;
      const std::string name(rest.substr(0, n));
      const std::string arg = squash(rest.substr(n));
      const SourceLine* next = nullptr;
      for (std::size_t j = k + 1; j < lines.size(); ++j) {
        if (!trim(lines[j].text).empty()) {
          next = &lines[j];
          break;
        }
      }
      MET_CHECK(directive(l.line, name, arg, next));
      seen_code_ = true;
    }
    if (!stack_.empty()) {
      const Frame& f = stack_.back();
      return fail(fmt::format("{}:{}: unterminated #if (no #endif before the end of the file)", file_, f.line));
    }
    out_.macros = macros_;
    return std::move(out_);
  }

 private:
  std::string at(int line) const { return fmt::format("{}:{}", file_, line); }
  bool active() const { return stack_.empty() || stack_.back().active; }

  Expected<bool> evaluate(const std::string& expr, int line, const char* what) {
    if (expr.empty()) return fail(fmt::format("{}: #{} with no expression", at(line), what));
    for (const auto& id : pp_identifiers(expr, false)) {
      auto it = opaque_.find(id);
      if (it != opaque_.end()) {
        return fail(fmt::format("{}: '{}' (defined at {}) is not an integer macro in expression '{}'", at(line), id, it->second, expr));
      }
    }
    MET_TRY(long long v, eval_pp_expr(expr, macros_, at(line)));
    return v != 0;
  }

  // Remembers the values a branch condition saw, so it can be re-evaluated with a kind flipped.
  void snapshot(Frame& f, const std::string& cond) {
    for (const auto& id : pp_identifiers(cond, true)) {
      auto it = macros_.find(id);
      if (it != macros_.end()) f.env.emplace(id, it->second);
    }
  }

  void push_group() {
    Group g;
    std::vector<std::string> parts;
    for (const Frame& f : stack_) {
      if (!f.include_guard) parts.push_back(f.branch);
      if (g.active && !f.active) {
        g.active = false;
        g.failed = f.branch;
        g.failed_line = f.branch_line;
      }
    }
    if (parts.size() == 1) {
      g.condition = parts[0];
    } else {
      for (auto& p : parts) p = operand(p);
      g.condition = join(parts, " && ");
    }
    for (const Frame& f : stack_) g.env.insert(f.env.begin(), f.env.end());
    out_.groups.push_back(std::move(g));
  }

  Expected<void> directive(int line, const std::string& name, const std::string& arg, const SourceLine* next) {
    if (name == "if" || name == "ifdef" || name == "ifndef") {
      Frame f;
      f.line = line;
      f.branch_line = line;
      f.parent_active = active();
      if (name == "if") {
        f.branch = arg;
        if (f.parent_active) {
          MET_TRY(bool v, evaluate(arg, line, "if"));
          f.active = v;
        }
      } else {
        if (f.parent_active && !is_identifier(arg)) {
          return fail(arg.empty() ? fmt::format("{}: #{} without a macro name", at(line), name)
                                  : fmt::format("{}: #{} takes one macro name, found '{}'", at(line), name, arg));
        }
        f.branch = (name == "ifdef" ? "defined(" : "!defined(") + arg + ")";
        f.active = f.parent_active && ((macros_.count(arg) != 0 || opaque_.count(arg) != 0) == (name == "ifdef"));
        if (name == "ifndef" && !seen_code_ && stack_.empty() && next) {
          const std::string_view nt = trim(next->text);
          if (!nt.empty() && nt[0] == '#') {
            std::string_view r = trim(nt.substr(1));
            if (starts_with(r, "define")) {
              r = trim(r.substr(6));
              std::size_t n = 0;
              while (n < r.size() && ident_char(r[n])) ++n;
              f.include_guard = r.substr(0, n) == arg;
            }
          }
        }
      }
      f.taken = f.active;
      f.raw = f.branch;
      snapshot(f, f.branch);
      stack_.push_back(std::move(f));
      push_group();
      return {};
    }
    if (name == "elif" || name == "else") {
      if (stack_.empty()) return fail(fmt::format("{}: #{} without #if", at(line), name));
      Frame& f = stack_.back();
      if (f.seen_else) return fail(fmt::format("{}: #{} after #else (the #if is at line {})", at(line), name, f.line));
      if (name == "else" && !arg.empty() && f.parent_active) {
        return fail(fmt::format("{}: extra tokens '{}' after #else", at(line), arg));
      }
      f.prior.push_back(f.raw);
      f.branch_line = line;
      if (name == "elif") {
        f.raw = arg;
        f.branch = render_branch(f.prior, &arg);
        bool v = false;
        if (f.parent_active && !f.taken) {
          MET_TRY(v, evaluate(arg, line, "elif"));
        } else if (arg.empty()) {
          return fail(fmt::format("{}: #elif with no expression", at(line)));
        }
        f.active = v;
        snapshot(f, arg);
      } else {
        f.seen_else = true;
        f.branch = render_branch(f.prior, nullptr);
        f.active = f.parent_active && !f.taken;
      }
      f.taken = f.taken || f.active;
      push_group();
      return {};
    }
    if (name == "endif") {
      if (stack_.empty()) return fail(fmt::format("{}: #endif without #if", at(line)));
      if (!arg.empty() && stack_.back().parent_active) return fail(fmt::format("{}: extra tokens '{}' after #endif", at(line), arg));
      stack_.pop_back();
      push_group();
      return {};
    }
    if (!active()) return {};  // skipped groups: only the nesting matters
    if (name == "define") return define(line, arg);
    if (name == "undef") {
      if (!is_identifier(arg)) return fail(fmt::format("{}: #undef takes one macro name, found '{}'", at(line), arg));
      macros_.erase(arg);
      opaque_.erase(arg);
      return {};
    }
    if (name == "error") return fail(fmt::format("{}: #error {}", at(line), arg));
    static const std::set<std::string> ignored = {"", "include", "include_next", "pragma", "line", "warning", "ident"};
    if (ignored.count(name)) return {};
    return fail(fmt::format("{}: unknown directive '#{}'", at(line), name));
  }

  Expected<void> define(int line, const std::string& arg) {
    std::size_t n = 0;
    while (n < arg.size() && ident_char(arg[n])) ++n;
    const std::string name = arg.substr(0, n);
    if (!is_identifier(name)) return fail(fmt::format("{}: #define without a macro name", at(line)));
    if (name == "defined") return fail(fmt::format("{}: 'defined' cannot be defined", at(line)));
    macros_.erase(name);
    opaque_.erase(name);
    if (n < arg.size() && arg[n] == '(') {  // function-like: defined, but never an integer
      opaque_.emplace(name, at(line));
      macros_.emplace(name, 0);
      return {};
    }
    const std::string body(trim(std::string_view(arg).substr(n)));
    if (body.empty()) {
      macros_.emplace(name, 1);
      return {};
    }
    bool uses_opaque = false;
    for (const auto& id : pp_identifiers(body, false)) uses_opaque = uses_opaque || opaque_.count(id) != 0;
    auto v = uses_opaque ? Expected<long long>(fail("")) : eval_pp_expr(body, macros_, at(line));
    if (v) {
      macros_.emplace(name, *v);
    } else {
      opaque_.emplace(name, at(line));
      macros_.emplace(name, 0);
    }
    return {};
  }

  std::string file_;
  Macros macros_;
  std::map<std::string, std::string> opaque_;  // non-integer macros -> where defined
  std::vector<Frame> stack_;
  bool seen_code_ = false;
  ConditionalScan out_;
};

}  // namespace

Expected<ConditionalScan> scan_conditionals(std::string_view text, const std::string& file, Macros macros) {
  MET_TRY(auto lines, logical_lines(text, file));
  Walker w(file, std::move(macros));
  return w.run(lines);
}

}  // namespace met::avail

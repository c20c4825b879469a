// Finds entry-point definitions in a source walked by scan_conditionals. Only the declaration's
// shape is read: an interpreter body `MET_ENTRY(op)` (defines met_<op>), or a host function
// (extern "C", optional __global__ and __launch_bounds__(...), void, met_ name, '('); the body is
// never parsed.
#include "avail/scan.hpp"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <optional>

#include "core/strings.hpp"

namespace met::avail {

namespace {

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

struct Cursor {
  std::string_view s;
  std::size_t i = 0;

  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  // Consumes `w` when it is the next whole token.
  bool word(std::string_view w) {
    ws();
    if (s.substr(i, w.size()) != w) return false;
    const std::size_t e = i + w.size();
    if (word_char(w.back()) && e < s.size() && word_char(s[e])) return false;
    i = e;
    return true;
  }
  // Consumes a balanced "( ... )".
  bool parens() {
    ws();
    if (i >= s.size() || s[i] != '(') return false;
    int depth = 0;
    for (; i < s.size(); ++i) {
      if (s[i] == '(') ++depth;
      if (s[i] == ')' && --depth == 0) {
        ++i;
        return true;
      }
    }
    return false;
  }
  std::string ident() {
    ws();
    const std::size_t b = i;
    while (i < s.size() && word_char(s[i])) ++i;
    return std::string(s.substr(b, i - b));
  }
};

struct Match {
  std::string name;
  bool global = false;
  std::size_t open = 0;  // offset of the '(' of the parameter list
};

// `MET_ENTRY(op)`: an interpreter body (kernels/common/interp/args.cuh) defines met_<op>.
std::optional<Match> match_body(std::string_view line) {
  Cursor c{line};
  if (!c.word("MET_ENTRY")) return std::nullopt;
  c.ws();
  if (c.i >= line.size() || line[c.i] != '(') return std::nullopt;
  Match m;
  m.open = c.i;
  ++c.i;
  const std::string op = c.ident();
  c.ws();
  if (op.empty() || c.i >= line.size() || line[c.i] != ')') return std::nullopt;
  m.name = "met_" + op;
  m.global = true;
  return m;
}

std::optional<Match> match_entry(std::string_view line) {
  if (auto b = match_body(line)) return b;
  Cursor c{line};
  if (!c.word("extern") || !c.word("\"C\"")) return std::nullopt;
  Match m;
  m.global = c.word("__global__");
  if (c.word("__launch_bounds__") && !c.parens()) return std::nullopt;
  if (!c.word("void")) return std::nullopt;
  if (c.word("__launch_bounds__") && !c.parens()) return std::nullopt;
  m.name = c.ident();
  if (!starts_with(m.name, "met_") || m.name.size() == 4) return std::nullopt;
  c.ws();
  if (c.i >= line.size() || line[c.i] != '(') return std::nullopt;
  m.open = c.i;
  return m;
}

// `extern "C" [__global__] void` with nothing after it: a declaration split across lines.
bool declaration_without_name(std::string_view line) {
  Cursor c{line};
  if (!c.word("extern") || !c.word("\"C\"")) return false;
  c.word("__global__");
  if (c.word("__launch_bounds__") && !c.parens()) return false;
  if (!c.word("void")) return false;
  if (c.word("__launch_bounds__") && !c.parens()) return false;
  c.ws();
  return c.i >= line.size();
}

// True when the parameter list opened at (line k, offset open) is followed by ';' (a prototype).
bool is_prototype(const std::vector<CodeLine>& lines, std::size_t k, std::size_t open) {
  int depth = 0;
  bool closed = false;
  for (std::size_t j = k; j < lines.size(); ++j) {
    const std::string& t = lines[j].text;
    for (std::size_t p = (j == k ? open : 0); p < t.size(); ++p) {
      const char ch = t[p];
      if (!closed) {
        if (ch == '(') ++depth;
        if (ch == ')' && --depth == 0) closed = true;
        continue;
      }
      if (std::isspace(static_cast<unsigned char>(ch))) continue;
      return ch == ';';
    }
  }
  return false;
}

}  // namespace

Expected<std::vector<EntryPoint>> scan_entry_points(std::string_view text, const std::string& file, const Macros& macros) {
  MET_TRY(ConditionalScan scan, scan_conditionals(text, file, macros));
  std::vector<EntryPoint> out;
  std::map<std::string, int> defined_at;
  for (std::size_t k = 0; k < scan.lines.size(); ++k) {
    const CodeLine& cl = scan.lines[k];
    auto m = match_entry(cl.text);
    if (!m && declaration_without_name(cl.text)) {
      // nvcc would emit the kernel; a scan that skipped it would disagree with the compiler.
      return fail(fmt::format("{}:{}: entry point declaration must name its met_ function on the same line", file, cl.line));
    }
    if (!m || is_prototype(scan.lines, k, m->open)) continue;
    const Group& g = scan.groups[cl.group];
    EntryPoint e;
    e.name = m->name;
    e.file = file;
    e.line = cl.line;
    e.global = m->global;
    e.defined = g.active;
    e.condition = g.condition;
    e.failed = g.failed;
    e.failed_line = g.failed_line;
    e.env = g.env;
    if (e.defined) {
      auto [it, fresh] = defined_at.emplace(e.name, e.line);
      if (!fresh) return fail(fmt::format("{}:{}: '{}' is already defined at line {}", file, e.line, e.name, it->second));
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace met::avail

// Built-in filters, tests, methods and globals, each following the documented behaviour of
// jinja2 3.1 (filters.py/tests.py semantics) and Python's str/dict/list methods.
#include "text/jinja_builtins.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <set>

#include "core/strings.hpp"

namespace met::jinja {

namespace {

[[noreturn]] void raise(const std::string& what) { throw RenderError(what); }

// ---- argument binding ----
struct Bound {
  Args& args;
  std::string fn;
  // Parameter `idx` (0-based after the subject) by position or keyword, else `def`.
  Value get(std::size_t idx, const char* name, Value def = Value()) const {
    if (idx < args.positional.size()) return args.positional[idx];
    for (const auto& [k, v] : args.keywords)
      if (k == name) return v;
    return def;
  }
  bool has(std::size_t idx, const char* name) const {
    if (idx < args.positional.size()) return true;
    for (const auto& [k, v] : args.keywords)
      if (k == name) return true;
    return false;
  }
};

std::string lower_cp_string(const std::string& s, bool upper);

char32_t lower_cp(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xc0 && c <= 0xde && c != 0xd7) || (c >= 0x391 && c <= 0x3a9 && c != 0x3a2) || (c >= 0x410 && c <= 0x42f))
    return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  return c;
}
char32_t upper_cp(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xe0 && c <= 0xfe && c != 0xf7) || (c >= 0x3b1 && c <= 0x3c9 && c != 0x3c2) || (c >= 0x430 && c <= 0x44f))
    return c - 32;
  if (c == 0x3c2) return 0x3a3;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  return c;
}
bool is_cased_letter(char32_t c) { return lower_cp(c) != c || upper_cp(c) != c; }

std::string lower_cp_string(const std::string& s, bool upper) {
  std::string out;
  for (char32_t c : decode_utf8(s)) append_utf8(out, upper ? upper_cp(c) : lower_cp(c));
  return out;
}
std::string py_lower(const std::string& s) { return lower_cp_string(s, false); }
std::string py_upper(const std::string& s) { return lower_cp_string(s, true); }

// Python str.title(): a cased letter after an uncased character starts a word.
std::string py_title(const std::string& s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t c : decode_utf8(s)) {
    append_utf8(out, prev_cased ? lower_cp(c) : upper_cp(c));
    prev_cased = is_cased_letter(c);
  }
  return out;
}

std::string py_capitalize(const std::string& s) {
  auto cps = decode_utf8(s);
  std::string out;
  for (std::size_t i = 0; i < cps.size(); ++i) append_utf8(out, i == 0 ? upper_cp(cps[i]) : lower_cp(cps[i]));
  return out;
}

// Jinja's title filter: words start after whitespace or one of - ( { [ <.
std::string jinja_title(const std::string& s) {
  std::string out;
  bool start = true;
  for (char32_t c : decode_utf8(s)) {
    bool sep = is_py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      append_utf8(out, c);
      start = true;
    } else {
      append_utf8(out, start ? upper_cp(c) : lower_cp(c));
      start = false;
    }
  }
  return out;
}

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  auto cps = decode_utf8(s);
  std::vector<char32_t> set;
  bool ws = chars.is_none() || chars.is_undefined();
  if (!ws) {
    if (!chars.is_string()) raise("strip arg must be None or str");
    set = decode_utf8(chars.as_string());
  }
  auto strip_it = [&](char32_t c) { return ws ? is_py_space(c) : std::find(set.begin(), set.end(), c) != set.end(); };
  std::size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  return encode_utf8(std::vector<char32_t>(cps.begin() + static_cast<long>(b), cps.begin() + static_cast<long>(e)));
}

Value py_split(const std::string& s, const Value& sep, std::int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep.is_none() || sep.is_undefined()) {
    auto cps = decode_utf8(s);
    std::vector<std::pair<std::size_t, std::size_t>> words;  // [begin, end) in code points
    std::size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && is_py_space(cps[i])) ++i;
      if (i >= cps.size()) break;
      std::size_t b = i;
      while (i < cps.size() && !is_py_space(cps[i])) ++i;
      words.emplace_back(b, i);
    }
    auto sub = [&](std::size_t b, std::size_t e) {
      return encode_utf8(std::vector<char32_t>(cps.begin() + static_cast<long>(b), cps.begin() + static_cast<long>(e)));
    };
    if (maxsplit < 0 || static_cast<std::size_t>(maxsplit) >= words.size()) {
      for (auto [b, e] : words) parts.push_back(sub(b, e));
    } else if (!from_right) {
      for (std::size_t k = 0; k < static_cast<std::size_t>(maxsplit); ++k) parts.push_back(sub(words[k].first, words[k].second));
      std::size_t rest = words[static_cast<std::size_t>(maxsplit)].first;
      std::size_t end = cps.size();
      while (end > rest && is_py_space(cps[end - 1])) --end;
      parts.push_back(sub(rest, end));
    } else {
      std::size_t n = words.size() - static_cast<std::size_t>(maxsplit);
      std::size_t b = 0;
      while (b < cps.size() && is_py_space(cps[b])) ++b;
      parts.push_back(sub(b, words[n - 1].second));
      for (std::size_t k = n; k < words.size(); ++k) parts.push_back(sub(words[k].first, words[k].second));
    }
  } else {
    if (!sep.is_string()) raise("must be str or None, not " + sep.type_name());
    const std::string& d = sep.as_string();
    if (d.empty()) raise("empty separator");
    if (!from_right) {
      std::size_t start = 0;
      std::int64_t n = 0;
      while (true) {
        std::size_t p = (maxsplit >= 0 && n >= maxsplit) ? std::string::npos : s.find(d, start);
        if (p == std::string::npos) {
          parts.push_back(s.substr(start));
          break;
        }
        parts.push_back(s.substr(start, p - start));
        start = p + d.size();
        ++n;
      }
    } else {
      std::size_t end = s.size();
      std::int64_t n = 0;
      while (true) {
        std::size_t p = (maxsplit >= 0 && n >= maxsplit) || end < d.size() ? std::string::npos : s.rfind(d, end - d.size());
        if (p == std::string::npos) {
          parts.insert(parts.begin(), s.substr(0, end));
          break;
        }
        parts.insert(parts.begin(), s.substr(p + d.size(), end - p - d.size()));
        end = p;
        ++n;
      }
    }
  }
  std::vector<Value> items;
  for (auto& p : parts) items.emplace_back(std::move(p));
  return Value::list(std::move(items));
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, std::int64_t count) {
  std::string out;
  if (old.empty()) {
    auto cps = decode_utf8(s);
    std::int64_t n = 0;
    for (std::size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || n < count) {
        out += rep;
        ++n;
      }
      if (i < cps.size()) append_utf8(out, cps[i]);
    }
    return out;
  }
  std::size_t start = 0;
  std::int64_t n = 0;
  while (true) {
    std::size_t p = (count >= 0 && n >= count) ? std::string::npos : s.find(old, start);
    if (p == std::string::npos) break;
    out += s.substr(start, p - start) + rep;
    start = p + old.size();
    ++n;
  }
  return out + s.substr(start);
}

std::int64_t to_index(const Value& v, const char* what) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  raise(std::string(what) + " indices must be integers, not " + v.type_name());
}

std::string require_string(const Value& v, const std::string& fn) {
  if (!v.is_string()) raise(fn + "() argument must be str, not " + v.type_name());
  return v.as_string();
}

std::int64_t cp_find(const std::string& s, const std::string& sub, bool from_right) {
  std::size_t p = from_right ? s.rfind(sub) : s.find(sub);
  if (p == std::string::npos) return -1;
  return static_cast<std::int64_t>(decode_utf8(s.substr(0, p)).size());
}

bool prefix_match(const std::string& s, const Value& arg, bool suffix, const std::string& fn) {
  auto one = [&](const Value& p) {
    const std::string& x = require_string(p, fn);
    if (x.size() > s.size()) return false;
    return suffix ? s.compare(s.size() - x.size(), x.size(), x) == 0 : s.compare(0, x.size(), x) == 0;
  };
  if (arg.is_tuple()) {
    for (const auto& p : arg.items())
      if (one(p)) return true;
    return false;
  }
  return one(arg);
}

Value method(const Value& self, const std::string& name, std::function<Value(const Value&, Args&)> body) {
  return Value::function(name, [self, body](Args& a) { return body(self, a); });
}

Value str_method(const Value& s, const std::string& name) {
  static const std::set<std::string> known = {
      "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "replace", "upper", "lower",
      "title", "capitalize", "find", "rfind", "index", "count", "join", "splitlines", "isdigit", "isalpha",
      "isalnum", "isspace", "isupper", "islower", "format"};
  if (!known.count(name)) return Value::undefined("'str object' has no attribute '" + name + "'");
  return method(s, name, [name](const Value& self, Args& a) -> Value {
    const std::string& str = self.as_string();
    Bound b{a, name};
    if (name == "strip") return Value(py_strip(str, b.get(0, "chars", None{}), true, true));
    if (name == "lstrip") return Value(py_strip(str, b.get(0, "chars", None{}), true, false));
    if (name == "rstrip") return Value(py_strip(str, b.get(0, "chars", None{}), false, true));
    if (name == "split" || name == "rsplit")
      return py_split(str, b.get(0, "sep", None{}), b.get(1, "maxsplit", Value(-1)).as_int(), name == "rsplit");
    if (name == "startswith" || name == "endswith") return Value(prefix_match(str, b.get(0, "prefix"), name == "endswith", name));
    if (name == "replace")
      return Value(py_replace(str, require_string(b.get(0, "old"), name), require_string(b.get(1, "new"), name),
                              b.get(2, "count", Value(-1)).as_int()));
    if (name == "upper") return Value(py_upper(str));
    if (name == "lower") return Value(py_lower(str));
    if (name == "title") return Value(py_title(str));
    if (name == "capitalize") return Value(py_capitalize(str));
    if (name == "find" || name == "rfind") return Value(cp_find(str, require_string(b.get(0, "sub"), name), name == "rfind"));
    if (name == "index") {
      std::int64_t p = cp_find(str, require_string(b.get(0, "sub"), name), false);
      if (p < 0) raise("substring not found");
      return Value(p);
    }
    if (name == "count") {
      const std::string sub = require_string(b.get(0, "sub"), name);
      if (sub.empty()) return Value(static_cast<std::int64_t>(decode_utf8(str).size() + 1));
      std::int64_t n = 0;
      for (std::size_t p = str.find(sub); p != std::string::npos; p = str.find(sub, p + sub.size())) ++n;
      return Value(n);
    }
    if (name == "join") {
      std::string out;
      bool first = true;
      for (const auto& v : iterate(b.get(0, "iterable"))) {
        if (!first) out += str;
        first = false;
        if (!v.is_string()) raise("sequence item: expected str instance, " + v.type_name() + " found");
        out += v.as_string();
      }
      return Value(out);
    }
    if (name == "splitlines") {
      std::vector<Value> lines;
      std::size_t start = 0;
      for (std::size_t i = 0; i < str.size(); ++i) {
        if (str[i] == '\n' || str[i] == '\r') {
          lines.emplace_back(str.substr(start, i - start));
          if (str[i] == '\r' && i + 1 < str.size() && str[i + 1] == '\n') ++i;
          start = i + 1;
        }
      }
      if (start < str.size()) lines.emplace_back(str.substr(start));
      return Value::list(std::move(lines));
    }
    if (name == "format") raise("str.format is not supported");
    auto cps = decode_utf8(str);
    auto all = [&](auto pred) {
      if (cps.empty()) return false;
      for (char32_t c : cps)
        if (!pred(c)) return false;
      return true;
    };
    if (name == "isdigit") return Value(all([](char32_t c) { return c >= '0' && c <= '9'; }));
    if (name == "isalpha") return Value(all([](char32_t c) { return is_cased_letter(c); }));
    if (name == "isalnum") return Value(all([](char32_t c) { return is_cased_letter(c) || (c >= '0' && c <= '9'); }));
    if (name == "isspace") return Value(all(is_py_space));
    bool any_cased = false, any_lower = false, any_upper = false;
    for (char32_t c : cps) {
      if (lower_cp(c) != c) any_upper = true, any_cased = true;
      if (upper_cp(c) != c) any_lower = true, any_cased = true;
    }
    if (name == "isupper") return Value(any_cased && !any_lower);
    return Value(any_cased && !any_upper);  // islower
  });
}

Value unsafe(const std::string& attr, const std::string& type) {
  return Value::undefined("access to attribute '" + attr + "' of '" + type + "' object is unsafe.");
}

Value items_of(const Value& d) {
  std::vector<Value> out;
  for (const auto& [k, v] : d.as_dict().items) out.push_back(Value::list({k, v}, /*tuple=*/true));
  return Value::list(std::move(out));
}

Value dict_method(const Value& d, const std::string& name) {
  static const std::set<std::string> mutating = {"clear", "pop", "popitem", "setdefault", "update"};
  if (mutating.count(name)) return unsafe(name, "dict");
  if (name == "get")
    return method(d, name, [](const Value& self, Args& a) -> Value {
      Bound b{a, "get"};
      const Value* v = self.as_dict().find(b.get(0, "key"));
      return v ? *v : b.get(1, "default", None{});
    });
  if (name == "items") return method(d, name, [](const Value& self, Args&) { return items_of(self); });
  if (name == "keys")
    return method(d, name, [](const Value& self, Args&) {
      std::vector<Value> out;
      for (const auto& [k, v] : self.as_dict().items) out.push_back(k);
      return Value::list(std::move(out));
    });
  if (name == "values")
    return method(d, name, [](const Value& self, Args&) {
      std::vector<Value> out;
      for (const auto& [k, v] : self.as_dict().items) out.push_back(v);
      return Value::list(std::move(out));
    });
  if (name == "copy") return method(d, name, [](const Value& self, Args&) { return self; });
  return Value();  // not a method
}

Value list_method(const Value& l, const std::string& name) {
  static const std::set<std::string> mutating = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
  std::string type = l.is_tuple() ? "tuple" : "list";
  if (!l.is_tuple() && mutating.count(name)) return unsafe(name, type);
  if (name == "index" || name == "count")
    return method(l, name, [name](const Value& self, Args& a) -> Value {
      Bound b{a, name};
      Value x = b.get(0, "value");
      std::int64_t n = 0;
      for (std::size_t i = 0; i < self.items().size(); ++i) {
        if (!equals(self.items()[i], x)) continue;
        if (name == "index") return Value(static_cast<std::int64_t>(i));
        ++n;
      }
      if (name == "index") raise(x.repr() + " is not in list");
      return Value(n);
    });
  return Value::undefined("'" + type + " object' has no attribute '" + name + "'");
}

}  // namespace

void require_defined(const Value& v) {
  if (v.is_undefined()) raise(v.undefined_hint().empty() ? "value is undefined" : v.undefined_hint());
}

Value get_attr(const Value& obj, const std::string& name) {
  require_defined(obj);
  if (obj.is_dict()) {
    Value m = dict_method(obj, name);
    if (!m.is_undefined() || !m.undefined_hint().empty()) return m;
    if (const Value* v = obj.as_dict().find(Value(name))) return *v;
    return Value::undefined("'dict object' has no attribute '" + name + "'");
  }
  if (obj.is_string()) return str_method(obj, name);
  if (obj.is_list()) return list_method(obj, name);
  if (obj.is_object()) {
    auto& attrs = obj.as_object().attrs;
    auto it = attrs.find(name);
    if (it != attrs.end()) return it->second;
    return Value::undefined("'" + obj.as_object().type_name + " object' has no attribute '" + name + "'");
  }
  if (obj.is_none()) return Value::undefined("'None' has no attribute '" + name + "'");
  return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + name + "'");
}

Value get_item(const Value& obj, const Value& key) {
  require_defined(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(key)) return *v;
    if (key.is_string()) {
      Value m = dict_method(obj, key.as_string());
      if (!m.is_undefined() || !m.undefined_hint().empty()) return m;
    }
    return Value::undefined("'dict object' has no attribute " + key.repr());
  }
  if (obj.is_list() || obj.is_string()) {
    if (key.is_string()) return get_attr(obj, key.as_string());
    if (!key.is_int() && !key.is_bool()) raise(obj.type_name() + " indices must be integers or slices, not " + key.type_name());
    std::int64_t i = key.as_int();
    if (obj.is_list()) {
      auto n = static_cast<std::int64_t>(obj.items().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("'" + obj.type_name() + " object' has no element " + key.repr());
      return obj.items()[static_cast<std::size_t>(i)];
    }
    auto cps = decode_utf8(obj.as_string());
    auto n = static_cast<std::int64_t>(cps.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("'str object' has no element " + key.repr());
    std::string out;
    append_utf8(out, cps[static_cast<std::size_t>(i)]);
    return Value(out);
  }
  if (obj.is_object() && key.is_string()) return get_attr(obj, key.as_string());
  return Value::undefined("'" + obj.type_name() + " object' has no element " + key.repr());
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step_v) {
  require_defined(obj);
  std::int64_t step = step_v.is_none() ? 1 : to_index(step_v, "slice");
  if (step == 0) raise("slice step cannot be zero");
  std::vector<char32_t> cps;
  bool is_str = obj.is_string();
  if (is_str) cps = decode_utf8(obj.as_string());
  else if (!obj.is_list()) raise("'" + obj.type_name() + "' object is not subscriptable");
  auto n = static_cast<std::int64_t>(is_str ? cps.size() : obj.items().size());
  auto clamp = [&](const Value& v, std::int64_t def) {
    if (v.is_none()) return def;
    std::int64_t i = to_index(v, "slice");
    if (i < 0) i += n;
    if (step > 0) return std::clamp<std::int64_t>(i, 0, n);
    return std::clamp<std::int64_t>(i, -1, n - 1);
  };
  std::int64_t b = clamp(start, step > 0 ? 0 : n - 1);
  std::int64_t e = clamp(stop, step > 0 ? n : -1);
  std::vector<std::int64_t> idx;
  for (std::int64_t i = b; step > 0 ? i < e : i > e; i += step) idx.push_back(i);
  if (is_str) {
    std::string out;
    for (auto i : idx) append_utf8(out, cps[static_cast<std::size_t>(i)]);
    return Value(out);
  }
  std::vector<Value> out;
  for (auto i : idx) out.push_back(obj.items()[static_cast<std::size_t>(i)]);
  return Value::list(std::move(out), obj.is_tuple());
}

std::vector<Value> iterate(const Value& v) {
  if (v.is_undefined()) return {};
  if (v.is_list()) return v.items();
  if (v.is_dict()) {
    std::vector<Value> keys;
    for (const auto& [k, val] : v.as_dict().items) keys.push_back(k);
    return keys;
  }
  if (v.is_string()) {
    std::vector<Value> out;
    for (char32_t c : decode_utf8(v.as_string())) {
      std::string s;
      append_utf8(s, c);
      out.emplace_back(std::move(s));
    }
    return out;
  }
  raise("'" + v.type_name() + "' object is not iterable");
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) raise("'in <string>' requires string as left operand, not " + item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) return container.as_dict().find(item) != nullptr;
  if (container.is_list()) {
    for (const auto& v : container.items())
      if (equals(v, item)) return true;
    return false;
  }
  if (container.is_undefined()) return false;
  raise("argument of type '" + container.type_name() + "' is not iterable");
}

namespace {
// Integers are 64-bit here (Python's are unbounded): a result that does not fit is an error, never
// a wrapped value.
// Passing r by value, checked(op, __builtin_mul_overflow(x, y, &r), r) could read r before the builtin
// writes it (argument evaluation order is unspecified), so the result comes in by pointer.
std::int64_t checked(const std::string& op, bool overflow, const std::int64_t* r) {
  if (overflow) raise("integer overflow in " + op + " (met's template integers are 64-bit)");
  return *r;
}
// A string or list repeated n times may hold at most this many bytes or items.
constexpr std::int64_t kMaxRepeat = std::int64_t{1} << 26;
}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value(a.str() + b.str());
  require_defined(a);
  require_defined(b);
  auto unsupported = [&]() -> Value {
    raise("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
  };
  bool nums = a.is_number() && b.is_number();
  bool ints = nums && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) {
      std::int64_t r = 0;
      return Value(checked(op, __builtin_add_overflow(a.as_int(), b.as_int(), &r), &r));
    }
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      std::vector<Value> out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(out), a.is_tuple());
    }
    if (a.is_string()) raise("can only concatenate str (not \"" + b.type_name() + "\") to str");
    return unsupported();
  }
  if (op == "-") {
    if (ints) {
      std::int64_t r = 0;
      return Value(checked(op, __builtin_sub_overflow(a.as_int(), b.as_int(), &r), &r));
    }
    if (nums) return Value(a.as_double() - b.as_double());
    return unsupported();
  }
  if (op == "*") {
    if (ints) {
      std::int64_t r = 0;
      return Value(checked(op, __builtin_mul_overflow(a.as_int(), b.as_int(), &r), &r));
    }
    if (nums) return Value(a.as_double() * b.as_double());
    const Value* seq = a.is_string() || a.is_list() ? &a : b.is_string() || b.is_list() ? &b : nullptr;
    const Value* count = seq == &a ? &b : &a;
    if (seq && (count->is_int() || count->is_bool())) {
      std::int64_t n = std::max<std::int64_t>(0, count->as_int());
      const auto unit = static_cast<std::int64_t>(seq->is_string() ? seq->as_string().size() : seq->items().size());
      if (unit > 0 && n > kMaxRepeat / unit) raise("repetition by " + std::to_string(n) + " is too large");
      if (seq->is_string()) {
        std::string out;
        for (std::int64_t i = 0; i < n; ++i) out += seq->as_string();
        return Value(out);
      }
      std::vector<Value> out;
      for (std::int64_t i = 0; i < n; ++i) out.insert(out.end(), seq->items().begin(), seq->items().end());
      return Value::list(std::move(out), seq->is_tuple());
    }
    return unsupported();
  }
  if (!nums) {
    if (op == "%" && a.is_string()) raise("string formatting with % is not supported");
    return unsupported();
  }
  if (op == "/") {
    if (b.as_double() == 0) raise("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (b.as_double() == 0) raise(op == "//" ? "integer division or modulo by zero" : "integer modulo by zero");
    if (ints) {
      std::int64_t x = a.as_int(), y = b.as_int();
      if (y == -1) {  // the one quotient that can overflow: INT64_MIN // -1
        std::int64_t neg = 0;
        return op == "//" ? Value(checked(op, __builtin_sub_overflow(std::int64_t{0}, x, &neg), &neg)) : Value(std::int64_t{0});
      }
      std::int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        --q;
        r += y;
      }
      return op == "//" ? Value(q) : Value(r);
    }
    double x = a.as_double(), y = b.as_double();
    double r = std::fmod(x, y);
    if (r != 0 && ((r < 0) != (y < 0))) r += y;
    if (op == "%") return Value(r);
    return Value(std::floor((x - r) / y + 0.5) == (x - r) / y ? (x - r) / y : std::floor(x / y));
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      std::int64_t r = 1, base = a.as_int();
      for (std::int64_t e = b.as_int(); e > 0; e >>= 1) {  // by squaring: an exponent of 10**18 is 60 steps
        if (e & 1) r = checked(op, __builtin_mul_overflow(r, base, &r), &r);
        if (e > 1) base = checked(op, __builtin_mul_overflow(base, base, &base), &base);
      }
      return Value(r);
    }
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  return unsupported();
}

Value call_value(const Value& callee, Args& args) {
  require_defined(callee);
  if (!callee.is_function()) raise("'" + callee.type_name() + "' object is not callable");
  return callee.as_function().call(args);
}

// ---- tests ----

namespace {

using TestFn = bool (*)(const Value&, Bound&);

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> t = {
      {"defined", [](const Value& v, Bound&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, Bound&) { return v.is_undefined(); }},
      {"none", [](const Value& v, Bound&) { return v.is_none(); }},
      {"boolean", [](const Value& v, Bound&) { return v.is_bool(); }},
      {"false", [](const Value& v, Bound&) { return v.is_bool() && !v.as_bool(); }},
      {"true", [](const Value& v, Bound&) { return v.is_bool() && v.as_bool(); }},
      {"integer", [](const Value& v, Bound&) { return v.is_int(); }},
      {"float", [](const Value& v, Bound&) { return v.is_float(); }},
      {"number", [](const Value& v, Bound&) { return v.is_number(); }},
      {"string", [](const Value& v, Bound&) { return v.is_string(); }},
      {"mapping", [](const Value& v, Bound&) { return v.is_dict(); }},
      {"iterable", [](const Value& v, Bound&) { return v.is_undefined() || v.is_list() || v.is_dict() || v.is_string(); }},
      {"sequence", [](const Value& v, Bound&) { return v.is_undefined() || v.is_list() || v.is_dict() || v.is_string(); }},
      {"callable", [](const Value& v, Bound&) { return v.is_function(); }},
      {"escaped", [](const Value&, Bound&) { return false; }},
      {"sameas", [](const Value& v, Bound& b) {
         Value o = b.get(0, "other");
         if (v.is_none() || v.is_bool() || o.is_none() || o.is_bool())
           return v.is_none() == o.is_none() && v.is_bool() == o.is_bool() && equals(v, o);
         return (v.is_int() && o.is_int() && equals(v, o)) || (v.is_object() && equals(v, o));
       }},
      {"in", [](const Value& v, Bound& b) { return contains(b.get(0, "seq"), v); }},
      {"eq", [](const Value& v, Bound& b) { return equals(v, b.get(0, "other")); }},
      {"ne", [](const Value& v, Bound& b) { return !equals(v, b.get(0, "other")); }},
      {"lt", [](const Value& v, Bound& b) { return less(v, b.get(0, "other")); }},
      {"le", [](const Value& v, Bound& b) { return !less(b.get(0, "other"), v); }},
      {"gt", [](const Value& v, Bound& b) { return less(b.get(0, "other"), v); }},
      {"ge", [](const Value& v, Bound& b) { return !less(v, b.get(0, "other")); }},
      {"odd", [](const Value& v, Bound&) { return to_index(v, "odd") % 2 != 0; }},
      {"even", [](const Value& v, Bound&) { return to_index(v, "even") % 2 == 0; }},
      {"divisibleby", [](const Value& v, Bound& b) {
         std::int64_t d = to_index(b.get(0, "num"), "divisibleby");
         if (d == 0) raise("integer modulo by zero");
         return to_index(v, "divisibleby") % d == 0;
       }},
      {"lower", [](const Value& v, Bound&) { return v.is_string() && py_lower(v.as_string()) == v.as_string(); }},
      {"upper", [](const Value& v, Bound&) { return v.is_string() && py_upper(v.as_string()) == v.as_string(); }},
  };
  return t;
}

std::string test_alias(const std::string& name) {
  static const std::map<std::string, std::string> aliases = {
      {"equalto", "eq"}, {"==", "eq"}, {"!=", "ne"}, {"lessthan", "lt"}, {"<", "lt"}, {"<=", "le"},
      {"greaterthan", "gt"}, {">", "gt"}, {">=", "ge"}};
  auto it = aliases.find(name);
  return it == aliases.end() ? name : it->second;
}

// ---- filters ----

// Item attribute for attribute= arguments: dotted path, integer parts index, as environment.getitem.
Value attribute_of(const Value& item, const Value& attribute) {
  if (attribute.is_int()) return get_item(item, attribute);
  Value cur = item;
  std::string path = attribute.str();
  std::size_t start = 0;
  while (true) {
    std::size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (cur.is_undefined()) return cur;
    cur = digits ? get_item(cur, Value(static_cast<std::int64_t>(std::stoll(part)))) : get_item(cur, Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

Value sort_key(const Value& item, const Value& attribute, bool case_sensitive) {
  Value k = attribute.is_none() || attribute.is_undefined() ? item : attribute_of(item, attribute);
  if (!case_sensitive && k.is_string()) return Value(py_lower(k.as_string()));
  return k;
}

Args rest_args(const Args& a, std::size_t from) {
  Args r;
  for (std::size_t i = from; i < a.positional.size(); ++i) r.positional.push_back(a.positional[i]);
  r.keywords = a.keywords;
  return r;
}

Value select_like(const Value& seq, Args& a, bool by_attr, bool keep) {
  std::size_t first = by_attr ? 1 : 0;
  Value attr = by_attr ? (a.positional.empty() ? Value() : a.positional[0]) : Value();
  bool has_test = a.positional.size() > first;
  std::string test = has_test ? a.positional[first].str() : "";
  Args targs = rest_args(a, first + 1);
  std::vector<Value> out;
  for (const auto& item : iterate(seq)) {
    Value v = by_attr ? attribute_of(item, attr) : item;
    bool ok = has_test ? apply_test(test, v, targs) : v.truthy();
    if (ok == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

std::vector<std::string> py_splitlines(const std::string& s) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      lines.push_back(s.substr(start, i - start));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < s.size()) lines.push_back(s.substr(start));
  return lines;
}

Value py_round(const Value& v, std::int64_t precision, const std::string& method) {
  if (method != "common" && method != "ceil" && method != "floor") raise("method must be common, ceil or floor");
  if (v.is_int() || v.is_bool()) {
    if (method == "common") return Value(v.as_int());
  } else if (!v.is_float()) {
    raise("type " + v.type_name() + " doesn't define __round__ method");
  }
  double x = v.as_double();
  double scale = std::pow(10.0, static_cast<double>(precision));
  if (method == "ceil") return Value(std::ceil(x * scale) / scale);
  if (method == "floor") return Value(std::floor(x * scale) / scale);
  // Python's round(): round half to even on the scaled value.
  double y = x * scale;
  double r = std::nearbyint(y);
  return Value(r / scale);
}

// int(d) as python computes it for |int: NaN is a ValueError (the filter's default), and a value
// outside 64 bits, infinity included, an overflow (python's ints are unbounded, met's are not).
Value float_to_int(double d, const Value& def) {
  if (std::isnan(d)) return def;
  if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0))
    raise("integer overflow in int (met's template integers are 64-bit)");
  return Value(static_cast<std::int64_t>(d));
}

Value to_int(const Value& v, const Value& def, std::int64_t base) {
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) return float_to_int(v.as_double(), def);
  if (v.is_string()) {
    std::string s = py_strip(v.as_string(), None{}, true, true);
    try {
      std::size_t used = 0;
      std::string t = s;
      std::erase(t, '_');
      if (base == 16 && (t.rfind("0x", 0) == 0 || t.rfind("0X", 0) == 0)) t = t.substr(2);
      long long r = std::stoll(t, &used, static_cast<int>(base));
      if (used == t.size()) return Value(static_cast<std::int64_t>(r));
    } catch (const std::exception&) {
    }
    std::size_t used = 0;
    double d = 0;
    try {
      d = std::stod(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used > 0 && used == s.size()) return float_to_int(d, def);  // outside the try: an overflow is an error
  }
  return def;
}

Value to_float(const Value& v, const Value& def) {
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    std::string s = py_strip(v.as_string(), None{}, true, true);
    try {
      std::size_t used = 0;
      double d = std::stod(s, &used);
      if (used == s.size()) return Value(d);
    } catch (const std::exception&) {
    }
  }
  return def;
}

// The widest indent tojson and the indent filter take as a count of spaces: each nesting level or
// line repeats it, so a width from the template is bounded before it is allocated (jinja2 would
// run out of memory instead).
constexpr std::int64_t kMaxIndent = std::int64_t{1} << 12;

std::string indent_spaces(std::int64_t n, const char* what) {
  if (n > kMaxIndent) raise(std::string(what) + ": an indent of " + std::to_string(n) + " is too large");
  return std::string(static_cast<std::size_t>(std::max<std::int64_t>(0, n)), ' ');
}

JsonOptions json_options(Bound& b) {
  JsonOptions o;
  Value indent = b.get(1, "indent", None{});
  if (!indent.is_none()) {
    o.has_indent = true;
    o.item_separator = ",";
    if (indent.is_string()) {
      o.indent = indent.as_string();
    } else {
      o.indent = indent_spaces(indent.as_int(), "tojson");
    }
  }
  Value seps = b.get(2, "separators", None{});
  if (!seps.is_none()) {
    if (!seps.is_list() || seps.items().size() != 2) raise("separators must be a pair of strings");
    o.item_separator = seps.items()[0].str();
    o.key_separator = seps.items()[1].str();
  }
  o.sort_keys = b.get(3, "sort_keys", Value(false)).truthy();
  if (b.get(0, "ensure_ascii", Value(false)).truthy()) raise("tojson: ensure_ascii=True is not supported");
  return o;
}

Value min_max(const Value& seq, Bound& b, bool want_max) {
  bool cs = b.get(0, "case_sensitive", Value(false)).truthy();
  Value attr = b.get(1, "attribute", None{});
  auto items = iterate(seq);
  if (items.empty()) return Value::undefined(want_max ? "no max item, sequence was empty" : "no min item, sequence was empty");
  std::size_t best = 0;
  Value best_key = sort_key(items[0], attr, cs);
  for (std::size_t i = 1; i < items.size(); ++i) {
    Value k = sort_key(items[i], attr, cs);
    if (want_max ? less(best_key, k) : less(k, best_key)) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}

using FilterFn = Value (*)(const Value&, Bound&);

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> f = {
      {"tojson", [](const Value& v, Bound& b) { return Value(to_json(v, json_options(b))); }},
      {"trim", [](const Value& v, Bound& b) { return Value(py_strip(v.str(), b.get(0, "chars", None{}), true, true)); }},
      {"upper", [](const Value& v, Bound&) { return Value(py_upper(v.str())); }},
      {"lower", [](const Value& v, Bound&) { return Value(py_lower(v.str())); }},
      {"title", [](const Value& v, Bound&) { return Value(jinja_title(v.str())); }},
      {"capitalize", [](const Value& v, Bound&) { return Value(py_capitalize(v.str())); }},
      {"length", [](const Value& v, Bound&) -> Value {
         if (v.is_undefined()) return Value(0);
         if (v.is_string()) return Value(static_cast<std::int64_t>(decode_utf8(v.as_string()).size()));
         if (v.is_list()) return Value(static_cast<std::int64_t>(v.items().size()));
         if (v.is_dict()) return Value(static_cast<std::int64_t>(v.as_dict().items.size()));
         if (v.is_object()) return Value(static_cast<std::int64_t>(v.as_object().attrs.size()));
         raise("object of type '" + v.type_name() + "' has no len()");
       }},
      {"first", [](const Value& v, Bound&) {
         auto items = iterate(v);
         return items.empty() ? Value::undefined("no first item, sequence was empty") : items.front();
       }},
      {"last", [](const Value& v, Bound&) {
         if (v.is_dict()) raise("'dict' object is not reversible");
         auto items = iterate(v);
         return items.empty() ? Value::undefined("no last item, sequence was empty") : items.back();
       }},
      {"join", [](const Value& v, Bound& b) {
         std::string d = b.get(0, "d", Value("")).str();
         Value attr = b.get(1, "attribute", None{});
         std::string out;
         bool first = true;
         for (const auto& item : iterate(v)) {
           if (!first) out += d;
           first = false;
           out += (attr.is_none() ? item : attribute_of(item, attr)).str();
         }
         return Value(out);
       }},
      {"default", [](const Value& v, Bound& b) {
         bool boolean = b.get(1, "boolean", Value(false)).truthy();
         if (v.is_undefined() || (boolean && !v.truthy())) return b.get(0, "default_value", Value(""));
         return v;
       }},
      {"replace", [](const Value& v, Bound& b) {
         Value count = b.get(2, "count", None{});
         return Value(py_replace(v.str(), b.get(0, "old").str(), b.get(1, "new").str(), count.is_none() ? -1 : count.as_int()));
       }},
      {"list", [](const Value& v, Bound&) { return Value::list(iterate(v)); }},
      {"items", [](const Value& v, Bound&) -> Value {
         if (v.is_undefined()) return Value::list({});
         if (!v.is_dict()) raise("can only get item pairs from a mapping");
         return items_of(v);
       }},
      {"dictsort", [](const Value& v, Bound& b) {
         if (!v.is_dict()) raise("dictsort requires a mapping");
         bool cs = b.get(0, "case_sensitive", Value(false)).truthy();
         bool by_value = b.get(1, "by", Value("key")).str() == "value";
         bool reverse = b.get(2, "reverse", Value(false)).truthy();
         std::vector<Value> pairs = items_of(v).items();
         std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
           Value kx = sort_key(x.items()[by_value ? 1 : 0], None{}, cs);
           Value ky = sort_key(y.items()[by_value ? 1 : 0], None{}, cs);
           return reverse ? less(ky, kx) : less(kx, ky);
         });
         return Value::list(std::move(pairs));
       }},
      {"selectattr", [](const Value& v, Bound& b) { return select_like(v, b.args, true, true); }},
      {"rejectattr", [](const Value& v, Bound& b) { return select_like(v, b.args, true, false); }},
      {"select", [](const Value& v, Bound& b) { return select_like(v, b.args, false, true); }},
      {"reject", [](const Value& v, Bound& b) { return select_like(v, b.args, false, false); }},
      {"map", [](const Value& v, Bound& b) {
         std::vector<Value> out;
         bool by_attr = b.args.positional.empty();
         Value attr, def;
         for (const auto& [k, val] : b.args.keywords) {
           if (k == "attribute") attr = val;
           if (k == "default") def = val;
         }
         if (by_attr && attr.is_undefined()) raise("map requires a filter name or attribute=");
         Args fargs = rest_args(b.args, 1);
         for (const auto& item : iterate(v)) {
           if (by_attr) {
             Value x = attribute_of(item, attr);
             out.push_back(x.is_undefined() && !def.is_undefined() ? def : x);
           } else {
             out.push_back(apply_filter(b.args.positional[0].str(), item, fargs));
           }
         }
         return Value::list(std::move(out));
       }},
      {"attr", [](const Value& v, Bound& b) { return get_attr(v, b.get(0, "name").str()); }},
      {"string", [](const Value& v, Bound&) { return Value(v.str()); }},
      {"int", [](const Value& v, Bound& b) { return to_int(v, b.get(0, "default", Value(0)), b.get(1, "base", Value(10)).as_int()); }},
      {"float", [](const Value& v, Bound& b) { return to_float(v, b.get(0, "default", Value(0.0))); }},
      {"abs", [](const Value& v, Bound&) -> Value {
         if (v.is_int() || v.is_bool()) {
           std::int64_t r = 0;
           return Value(v.as_int() < 0 ? checked("abs", __builtin_sub_overflow(std::int64_t{0}, v.as_int(), &r), &r) : v.as_int());
         }
         if (v.is_float()) return Value(std::fabs(v.as_double()));
         raise("bad operand type for abs(): '" + v.type_name() + "'");
       }},
      {"round", [](const Value& v, Bound& b) {
         return py_round(v, b.get(0, "precision", Value(0)).as_int(), b.get(1, "method", Value("common")).str());
       }},
      {"indent", [](const Value& v, Bound& b) {
         Value width = b.get(0, "width", Value(4));
         bool first = b.get(1, "first", Value(false)).truthy();
         bool blank = b.get(2, "blank", Value(false)).truthy();
         std::string ind = width.is_string() ? width.as_string() : indent_spaces(width.as_int(), "indent");
         auto lines = py_splitlines(v.str() + "\n");
         std::string rv;
         if (blank) {
           for (std::size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
         } else {
           rv = lines.empty() ? "" : lines[0];
           for (std::size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : ind + lines[i]);
         }
         return Value(first ? ind + rv : rv);
       }},
      {"safe", [](const Value& v, Bound&) { return v; }},
      {"escape", [](const Value& v, Bound&) { return Value(html_escape(v.str())); }},
      {"unique", [](const Value& v, Bound& b) {
         bool cs = b.get(0, "case_sensitive", Value(false)).truthy();
         Value attr = b.get(1, "attribute", None{});
         std::vector<Value> out, seen;
         for (const auto& item : iterate(v)) {
           Value k = sort_key(item, attr, cs);
           if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
           seen.push_back(k);
           out.push_back(item);
         }
         return Value::list(std::move(out));
       }},
      {"sort", [](const Value& v, Bound& b) {
         bool reverse = b.get(0, "reverse", Value(false)).truthy();
         bool cs = b.get(1, "case_sensitive", Value(false)).truthy();
         Value attr = b.get(2, "attribute", None{});
         std::vector<Value> items = iterate(v);
         std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
           Value kx = sort_key(x, attr, cs), ky = sort_key(y, attr, cs);
           return reverse ? less(ky, kx) : less(kx, ky);
         });
         return Value::list(std::move(items));
       }},
      {"reverse", [](const Value& v, Bound&) -> Value {
         if (v.is_string()) {
           auto cps = decode_utf8(v.as_string());
           std::reverse(cps.begin(), cps.end());
           return Value(encode_utf8(cps));
         }
         auto items = iterate(v);
         std::reverse(items.begin(), items.end());
         return Value::list(std::move(items));
       }},
      {"sum", [](const Value& v, Bound& b) {
         Value attr = b.get(0, "attribute", None{});
         Value total = b.get(1, "start", Value(0));
         for (const auto& item : iterate(v)) total = binary_op("+", total, attr.is_none() ? item : attribute_of(item, attr));
         return total;
       }},
      {"min", [](const Value& v, Bound& b) { return min_max(v, b, false); }},
      {"max", [](const Value& v, Bound& b) { return min_max(v, b, true); }},
  };
  return f;
}

std::string filter_alias(const std::string& name) {
  static const std::map<std::string, std::string> aliases = {
      {"count", "length"}, {"d", "default"}, {"e", "escape"}, {"forceescape", "escape"}};
  auto it = aliases.find(name);
  return it == aliases.end() ? name : it->second;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(filter_alias(name)) != 0; }
bool has_test(const std::string& name) { return tests().count(test_alias(name)) != 0; }

Value apply_filter(const std::string& name, const Value& subject, Args& args) {
  auto it = filters().find(filter_alias(name));
  if (it == filters().end()) raise("no filter named '" + name + "'");
  Bound b{args, name};
  static const std::set<std::string> undefined_ok = {"default", "length", "string", "list", "items", "first",
                                                     "join", "safe", "escape", "trim", "upper", "lower",
                                                     "title", "capitalize", "unique", "sort", "reverse",
                                                     "select", "reject", "selectattr", "rejectattr", "map",
                                                     "replace", "indent", "int", "float", "sum", "min", "max"};
  if (subject.is_undefined() && !undefined_ok.count(filter_alias(name))) {
    if (filter_alias(name) != "tojson") require_defined(subject);
  }
  return it->second(subject, b);
}

bool apply_test(const std::string& name, const Value& subject, Args& args) {
  auto it = tests().find(test_alias(name));
  if (it == tests().end()) raise("no test named '" + name + "'");
  Bound b{args, name};
  return it->second(subject, b);
}

std::map<std::string, Value> make_globals() {
  std::map<std::string, Value> g;
  g["range"] = Value::function("range", [](Args& a) {
    std::int64_t start = 0, stop = 0, step = 1;
    auto& p = a.positional;
    if (p.size() == 1) stop = to_index(p[0], "range");
    else if (p.size() >= 2) {
      start = to_index(p[0], "range");
      stop = to_index(p[1], "range");
      if (p.size() >= 3) step = to_index(p[2], "range");
    } else {
      raise("range expected at least 1 argument, got 0");
    }
    if (step == 0) raise("range() arg 3 must not be zero");
    constexpr std::int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE
    std::vector<Value> out;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop;) {
      if (static_cast<std::int64_t>(out.size()) >= kMaxRange) raise("range too big");
      out.emplace_back(i);
      if (__builtin_add_overflow(i, step, &i)) break;  // past the end either way
    }
    return Value::list(std::move(out));
  });
  g["dict"] = Value::function("dict", [](Args& a) {
    std::vector<std::pair<Value, Value>> items;
    if (!a.positional.empty() && a.positional[0].is_dict()) items = a.positional[0].as_dict().items;
    for (auto& [k, v] : a.keywords) items.emplace_back(Value(k), v);
    return Value::dict(std::move(items));
  });
  g["namespace"] = Value::function("namespace", [](Args& a) {
    auto ns = std::make_shared<ObjectData>();
    ns->type_name = "Namespace";
    ns->assignable = true;
    if (!a.positional.empty() && a.positional[0].is_dict())
      for (const auto& [k, v] : a.positional[0].as_dict().items) ns->attrs[k.str()] = v;
    for (auto& [k, v] : a.keywords) ns->attrs[k] = v;
    return Value::object(std::move(ns));
  });
  g["raise_exception"] = Value::function("raise_exception", [](Args& a) -> Value {
    raise(std::string(kRaisedPrefix) + (a.positional.empty() ? std::string() : a.positional[0].str()));
  });
  g["strftime_now"] = Value::function("strftime_now", [](Args& a) {
    std::string fmt = a.positional.empty() ? std::string() : a.positional[0].str();
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[512];
    std::size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
    return Value(std::string(buf, n));
  });
  return g;
}

}  // namespace met::jinja

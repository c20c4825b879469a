// Python semantics of the engine's values: truthiness, str/repr, equality and ordering, and
// json.dumps as transformers' tojson filter calls it (ensure_ascii=False).
#include "text/jinja_value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace met::jinja {

Value Value::list(std::vector<Value> items, bool tuple) {
  Value v;
  v.v_ = std::make_shared<const ListData>(ListData{std::move(items), tuple});
  return v;
}

Value Value::dict(std::vector<std::pair<Value, Value>> items) {
  Value v;
  v.v_ = std::make_shared<const DictData>(DictData{std::move(items)});
  return v;
}

Value Value::function(std::string name, Function f) {
  Value v;
  v.v_ = std::make_shared<const FunctionData>(FunctionData{std::move(name), std::move(f)});
  return v;
}

std::int64_t Value::as_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  if (!is_int()) throw RenderError("'" + type_name() + "' object cannot be interpreted as an integer");
  return std::get<std::int64_t>(v_);
}

double Value::as_double() const {
  if (is_float()) return std::get<double>(v_);
  if (!is_int() && !is_bool()) throw RenderError("must be real number, not " + type_name());
  return static_cast<double>(as_int());
}

bool Value::truthy() const {
  switch (v_.index()) {
    case 0: case 1: return false;
    case 2: return as_bool();
    case 3: return as_int() != 0;
    case 4: return as_double() != 0.0;
    case 5: return !as_string().empty();
    case 6: return !items().empty();
    case 7: return !as_dict().items.empty();
    default: return true;
  }
}

std::string Value::type_name() const {
  switch (v_.index()) {
    case 0: return "Undefined";
    case 1: return "NoneType";
    case 2: return "bool";
    case 3: return "int";
    case 4: return "float";
    case 5: return "str";
    case 6: return is_tuple() ? "tuple" : "list";
    case 7: return "dict";
    case 8: return "builtin_function_or_method";
    default: return as_object().type_name;
  }
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci is "[-]d[.ddd]e[+-]XX": split into sign, digits and decimal exponent.
  bool neg = sci[0] == '-';
  std::size_t epos = sci.find('e');
  std::string mant = sci.substr(neg ? 1 : 0, epos - (neg ? 1 : 0));
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out = neg ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out + e;
  }
  if (exp < 0) return out + "0." + std::string(static_cast<std::size_t>(-exp - 1), '0') + digits;
  std::size_t int_len = static_cast<std::size_t>(exp) + 1;
  if (digits.size() <= int_len) return out + digits + std::string(int_len - digits.size(), '0') + ".0";
  return out + digits.substr(0, int_len) + "." + digits.substr(int_len);
}

std::vector<char32_t> decode_utf8(const std::string& s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    if (i + static_cast<std::size_t>(n) > s.size()) n = 1, cp = c;
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
    i += static_cast<std::size_t>(n);
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::string encode_utf8(const std::vector<char32_t>& cps) {
  std::string out;
  for (char32_t c : cps) append_utf8(out, c);
  return out;
}

bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
         c == 0x202f || c == 0x205f || c == 0x3000;
}

namespace {

// Python's str.isprintable for the characters repr() must escape (ASCII controls, C1, and the
// line/paragraph separators); other code points are taken as printable.
bool printable(char32_t c) {
  if (c < 0x20 || c == 0x7f) return false;
  if (c >= 0x80 && c <= 0xa0) return false;
  if (c == 0xad || c == 0x2028 || c == 0x2029 || (c >= 0x200b && c <= 0x200f)) return false;
  return true;
}

std::string string_repr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (char32_t c : decode_utf8(s)) {
    if (c == static_cast<char32_t>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!printable(c)) {
      char buf[16];
      if (c < 0x100)
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      append_utf8(out, c);
    }
  }
  out += q;
  return out;
}

}  // namespace

std::string Value::str() const {
  switch (v_.index()) {
    case 0: return "";
    case 5: return as_string();
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (v_.index()) {
    case 0: return "Undefined";
    case 1: return "None";
    case 2: return as_bool() ? "True" : "False";
    case 3: return std::to_string(as_int());
    case 4: return float_repr(as_double());
    case 5: return string_repr(as_string());
    case 6: {
      const auto& l = as_list();
      std::string out = l.tuple ? "(" : "[";
      for (std::size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        out += l.items[i].repr();
      }
      if (l.tuple && l.items.size() == 1) out += ",";
      return out + (l.tuple ? ")" : "]");
    }
    case 7: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : as_dict().items) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + "}";
    }
    case 8: return "<built-in function " + as_function().name + ">";
    default: {
      const auto& o = as_object();
      if (o.type_name == "Namespace") {
        std::vector<std::pair<Value, Value>> kv;
        for (const auto& [k, v] : o.attrs) kv.emplace_back(Value(k), v);
        return "<Namespace " + Value::dict(std::move(kv)).repr() + ">";
      }
      return "<" + o.type_name + ">";
    }
  }
}

const Value* DictData::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (equals(k, key)) return &v;
  return nullptr;
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.is_undefined() || b.is_undefined()) return a.is_undefined() && b.is_undefined();
  if (a.is_none() || b.is_none()) return a.is_none() && b.is_none();
  if (a.is_string() && b.is_string()) return a.as_string() == b.as_string();
  if (a.is_list() && b.is_list()) {
    if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
    for (std::size_t i = 0; i < a.items().size(); ++i)
      if (!equals(a.items()[i], b.items()[i])) return false;
    return true;
  }
  if (a.is_dict() && b.is_dict()) {
    const auto& da = a.as_dict();
    const auto& db = b.as_dict();
    if (da.items.size() != db.items.size()) return false;
    for (const auto& [k, v] : da.items) {
      const Value* o = db.find(k);
      if (!o || !equals(v, *o)) return false;
    }
    return true;
  }
  if (a.is_object() && b.is_object()) return &a.as_object() == &b.as_object();
  if (a.is_function() && b.is_function()) return &a.as_function() == &b.as_function();
  return false;
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 keeps code point order
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw RenderError("'<' not supported between instances of '" + a.type_name() + "' and '" +
                    b.type_name() + "'");
}

template <class Json>
Value from_json_impl(const Json& j, int depth) {
  if (depth > kMaxValueDepth) throw RenderError("the context nests deeper than " + std::to_string(kMaxValueDepth) + " levels");
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value(None{});
    case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.template get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: return Value(static_cast<std::int64_t>(j.template get<std::uint64_t>()));
    case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::json::value_t::string: return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      for (const auto& e : j) items.push_back(from_json_impl(e, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      std::vector<std::pair<Value, Value>> items;
      for (const auto& [k, v] : j.items()) items.emplace_back(Value(k), from_json_impl(v, depth + 1));
      return Value::dict(std::move(items));
    }
    default: return Value(None{});
  }
}

Value from_json(const nlohmann::json& j) { return from_json_impl(j, /*depth=*/1); }
Value from_json(const nlohmann::ordered_json& j) { return from_json_impl(j, /*depth=*/1); }

namespace {

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

std::string json_key(const Value& k) {
  if (k.is_string()) return k.as_string();
  if (k.is_bool()) return k.as_bool() ? "true" : "false";
  if (k.is_none()) return "null";
  if (k.is_int()) return std::to_string(k.as_int());
  if (k.is_float()) return float_repr(k.as_double());
  throw RenderError("keys must be str, int, float, bool or None, not " + k.type_name());
}

void json_dump(std::string& out, const Value& v, const JsonOptions& o, int depth) {
  auto newline = [&](int d) {
    out += '\n';
    for (int i = 0; i < d; ++i) out += o.indent;
  };
  if (v.is_none()) {
    out += "null";
  } else if (v.is_bool()) {
    out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    double d = v.as_double();
    out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : float_repr(d);
  } else if (v.is_string()) {
    json_string(out, v.as_string());
  } else if (v.is_list()) {
    const auto& items = v.items();
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (i) out += o.item_separator;
      if (o.has_indent) newline(depth + 1);
      json_dump(out, items[i], o, depth + 1);
    }
    if (o.has_indent) newline(depth);
    out += ']';
  } else if (v.is_dict()) {
    std::vector<std::pair<std::string, const Value*>> kv;
    for (const auto& [k, val] : v.as_dict().items) kv.emplace_back(json_key(k), &val);
    if (o.sort_keys)
      std::stable_sort(kv.begin(), kv.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    if (kv.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    for (std::size_t i = 0; i < kv.size(); ++i) {
      if (i) out += o.item_separator;
      if (o.has_indent) newline(depth + 1);
      json_string(out, kv[i].first);
      out += o.key_separator;
      json_dump(out, *kv[i].second, o, depth + 1);
    }
    if (o.has_indent) newline(depth);
    out += '}';
  } else {
    throw RenderError("object of type " + v.type_name() + " is not json serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options) {
  std::string out;
  json_dump(out, v, options, 0);
  return out;
}

}  // namespace met::jinja

// Values of the Jinja engine: Python's object model as chat templates see it (undefined, none,
// bool, int, float, str, list/tuple, insertion-ordered dict, callables, namespace/loop objects).
// Lists and dicts are immutable once built (the sandbox forbids mutation); namespaces are shared.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace met::jinja {

// Thrown inside the engine; Template::render turns it into a located Error. `offset` is the
// source offset of the node being evaluated when known (-1 until a node claims it).
struct RenderError : std::runtime_error {
  explicit RenderError(const std::string& what, long offset_ = -1)
      : std::runtime_error(what), offset(offset_) {}
  long offset;
};

class Value;
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};
using Function = std::function<Value(Args&)>;

struct Undefined {
  std::string hint;  // why it is undefined: "'x' is undefined"
};
struct None {};
struct ListData {
  std::vector<Value> items;
  bool tuple = false;
};
struct DictData;
struct FunctionData {
  std::string name;
  Function call;
};
struct ObjectData {  // namespace() objects and the loop variable
  std::string type_name;  // "Namespace" or "LoopContext"
  std::map<std::string, Value> attrs;
  bool assignable = false;
};

class Value {
 public:
  using Storage = std::variant<Undefined, None, bool, std::int64_t, double, std::string,
                               std::shared_ptr<const ListData>, std::shared_ptr<const DictData>,
                               std::shared_ptr<const FunctionData>, std::shared_ptr<ObjectData>>;
  Value() : v_(Undefined{}) {}
  Value(Undefined u) : v_(std::move(u)) {}
  Value(None) : v_(None{}) {}
  Value(bool b) : v_(b) {}
  Value(std::int64_t i) : v_(i) {}
  Value(int i) : v_(std::int64_t{i}) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value dict(std::vector<std::pair<Value, Value>> items);
  static Value function(std::string name, Function f);
  static Value object(std::shared_ptr<ObjectData> o) { Value v; v.v_ = std::move(o); return v; }
  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }

  bool is_undefined() const { return v_.index() == 0; }
  bool is_none() const { return v_.index() == 1; }
  bool is_bool() const { return v_.index() == 2; }
  bool is_int() const { return v_.index() == 3; }
  bool is_float() const { return v_.index() == 4; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_string() const { return v_.index() == 5; }
  bool is_list() const { return v_.index() == 6; }  // list or tuple
  bool is_tuple() const { return is_list() && as_list().tuple; }
  bool is_dict() const { return v_.index() == 7; }
  bool is_function() const { return v_.index() == 8; }
  bool is_object() const { return v_.index() == 9; }

  bool as_bool() const { return std::get<bool>(v_); }
  std::int64_t as_int() const;  // bool or int; else throws RenderError, as Python's TypeError
  double as_double() const;     // bool, int or float; else throws RenderError
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const ListData& as_list() const { return *std::get<6>(v_); }
  const std::vector<Value>& items() const { return as_list().items; }
  const DictData& as_dict() const { return *std::get<7>(v_); }
  const FunctionData& as_function() const { return *std::get<8>(v_); }
  ObjectData& as_object() const { return *std::get<9>(v_); }
  const std::string& undefined_hint() const { return std::get<0>(v_).hint; }

  bool truthy() const;
  std::string type_name() const;  // Python's type name: 'str', 'dict', 'NoneType'
  std::string str() const;        // Python str()
  std::string repr() const;       // Python repr()

 private:
  Storage v_;
};

struct DictData {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
};

// Python ==, as Jinja's `==` and `in` use it (1 == 1.0 == True, lists element-wise).
bool equals(const Value& a, const Value& b);
// Python <: numbers with numbers, strings by code point, lists lexicographically; else throws.
bool less(const Value& a, const Value& b);

// Context values; ordered_json keeps object keys in document order as Python's dicts do
// (nlohmann::json sorts them, so a template iterating a dict or calling tojson sees sorted keys).
// A value nested deeper than kMaxValueDepth throws RenderError: the engine's operations on values
// (repr, tojson, ==, destruction) recurse once per level, so the bound keeps them off the stack's end.
inline constexpr int kMaxValueDepth = 256;
Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);
// Python's float repr: shortest round trip, exponent outside [1e-4, 1e16).
std::string float_repr(double d);

struct JsonOptions {
  std::string indent;  // used when has_indent
  bool has_indent = false;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
// json.dumps(x, ensure_ascii=False, ...) as transformers' tojson filter calls it.
std::string to_json(const Value& v, const JsonOptions& options);

// UTF-8 helpers: Python strings index code points.
std::vector<char32_t> decode_utf8(const std::string& s);
std::string encode_utf8(const std::vector<char32_t>& cps);
void append_utf8(std::string& out, char32_t cp);
bool is_py_space(char32_t c);

}  // namespace met::jinja

// Jinja's built-in behaviour over values: sandboxed attribute and item access, Python methods
// of str/dict/list, the filters and tests chat templates use, and the globals transformers adds.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "text/jinja_value.hpp"

namespace met::jinja {

// obj.name as ImmutableSandboxedEnvironment.getattr: Python attribute (method) first, then item;
// mutating methods (list.append, dict.update, ...) come back as an undefined that raises when called.
Value get_attr(const Value& obj, const std::string& name);
// obj[key] as the sandbox's getitem: item first, then attribute for string keys.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] on lists, tuples and strings (code points).
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Python iteration: list items, dict keys, string characters; undefined iterates as empty.
std::vector<Value> iterate(const Value& v);
// Python `item in container`.
bool contains(const Value& container, const Value& item);
// Arithmetic and `~` with Python semantics; op is one of + - * / // % ** ~.
Value binary_op(const std::string& op, const Value& a, const Value& b);
Value call_value(const Value& callee, Args& args);
// Throws for undefined values with their hint (jinja2's UndefinedError).
void require_defined(const Value& v);

bool has_filter(const std::string& name);
bool has_test(const std::string& name);
Value apply_filter(const std::string& name, const Value& subject, Args& args);
bool apply_test(const std::string& name, const Value& subject, Args& args);

// range, dict, namespace, raise_exception, strftime_now.
std::map<std::string, Value> make_globals();

// Message prefix raise_exception's errors carry, so callers can tell a template's own refusal.
inline constexpr const char* kRaisedPrefix = "raise_exception: ";

}  // namespace met::jinja

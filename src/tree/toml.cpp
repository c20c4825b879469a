#include "tree/toml.hpp"

#include <fmt/format.h>

#include <sstream>

namespace met {

Expected<TomlDoc> parse_toml_text(const std::string& text, const std::string& file) {
  try {
    TomlDoc doc{file, toml::parse(text, file)};
    return doc;
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    return fail(fmt::format("{}:{}:{}: {}", file, b.line, b.column, e.description()));
  }
}

Expected<TomlDoc> parse_toml(const KernelTree& tree, const std::string& path) {
  MET_TRY(std::string text, tree.read(path));
  return parse_toml_text(text, tree.display(path));
}

std::string where(const std::string& file, const toml::node& node) {
  const auto line = node.source().begin.line;
  return line ? fmt::format("{}:{}", file, line) : file;
}

Fields::Fields(const std::string& file, const toml::table& table, std::string what)
    : file_(file), table_(table), what_(std::move(what)) {}

bool Fields::has(const std::string& key) const { return table_.contains(key); }

const toml::node* Fields::get(const std::string& key) {
  seen_.insert(key);
  return table_.get(key);
}

const toml::node* Fields::raw(const std::string& key) { return get(key); }

Error Fields::error(const std::string& message) const {
  const std::string head = where(file_, table_);
  return fail(what_.empty() ? fmt::format("{}: {}", head, message) : fmt::format("{}: {}: {}", head, what_, message));
}

Error Fields::error_at(const std::string& key, const std::string& message) const {
  const toml::node* node = table_.get(key);
  const std::string head = node ? where(file_, *node) : where(file_, table_);
  const std::string body = fmt::format("'{}': {}", key, message);
  return fail(what_.empty() ? fmt::format("{}: {}", head, body) : fmt::format("{}: {}: {}", head, what_, body));
}

namespace {
const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    default: return "a date or time";
  }
}
}  // namespace

Expected<std::optional<std::string>> Fields::opt_str(const std::string& key) {
  const toml::node* n = get(key);
  if (!n) return std::optional<std::string>{};
  if (!n->is_string()) return error_at(key, fmt::format("expected a string, found {}", type_name(*n)));
  return std::optional<std::string>{n->as_string()->get()};
}

Expected<std::string> Fields::str(const std::string& key) {
  MET_TRY(auto v, opt_str(key));
  if (!v) return error(fmt::format("missing key '{}'", key));
  return *v;
}

Expected<std::optional<std::int64_t>> Fields::opt_integer(const std::string& key) {
  const toml::node* n = get(key);
  if (!n) return std::optional<std::int64_t>{};
  if (!n->is_integer()) return error_at(key, fmt::format("expected an integer, found {}", type_name(*n)));
  return std::optional<std::int64_t>{n->as_integer()->get()};
}

Expected<std::int64_t> Fields::integer(const std::string& key) {
  MET_TRY(auto v, opt_integer(key));
  if (!v) return error(fmt::format("missing key '{}'", key));
  return *v;
}

Expected<std::optional<double>> Fields::opt_number(const std::string& key) {
  const toml::node* n = get(key);
  if (!n) return std::optional<double>{};
  if (n->is_integer()) return std::optional<double>{static_cast<double>(n->as_integer()->get())};
  if (n->is_floating_point()) return std::optional<double>{n->as_floating_point()->get()};
  return error_at(key, fmt::format("expected a number, found {}", type_name(*n)));
}

Expected<double> Fields::number(const std::string& key) {
  MET_TRY(auto v, opt_number(key));
  if (!v) return error(fmt::format("missing key '{}'", key));
  return *v;
}

Expected<std::optional<bool>> Fields::opt_boolean(const std::string& key) {
  const toml::node* n = get(key);
  if (!n) return std::optional<bool>{};
  if (!n->is_boolean()) return error_at(key, fmt::format("expected a boolean, found {}", type_name(*n)));
  return std::optional<bool>{n->as_boolean()->get()};
}

Expected<bool> Fields::boolean(const std::string& key) {
  MET_TRY(auto v, opt_boolean(key));
  if (!v) return error(fmt::format("missing key '{}'", key));
  return *v;
}

Expected<std::vector<std::string>> Fields::str_list(const std::string& key) {
  const toml::node* n = get(key);
  std::vector<std::string> out;
  if (!n) return out;
  if (!n->is_array()) return error_at(key, fmt::format("expected an array of strings, found {}", type_name(*n)));
  for (const auto& e : *n->as_array()) {
    if (!e.is_string()) return error_at(key, fmt::format("expected an array of strings, found {} in it", type_name(e)));
    out.push_back(e.as_string()->get());
  }
  return out;
}

Expected<std::vector<std::int64_t>> Fields::int_list(const std::string& key) {
  const toml::node* n = get(key);
  std::vector<std::int64_t> out;
  if (!n) return out;
  if (!n->is_array()) return error_at(key, fmt::format("expected an array of integers, found {}", type_name(*n)));
  for (const auto& e : *n->as_array()) {
    if (!e.is_integer()) return error_at(key, fmt::format("expected an array of integers, found {} in it", type_name(e)));
    out.push_back(e.as_integer()->get());
  }
  return out;
}

Expected<std::vector<std::string>> Fields::str_or_list(const std::string& key) {
  const toml::node* n = table_.get(key);
  if (n && n->is_string()) {
    seen_.insert(key);
    return std::vector<std::string>{n->as_string()->get()};
  }
  return str_list(key);
}

Expected<const toml::table*> Fields::table(const std::string& key) {
  const toml::node* n = get(key);
  if (!n) return static_cast<const toml::table*>(nullptr);
  if (!n->is_table()) return error_at(key, fmt::format("expected a table, found {}", type_name(*n)));
  return n->as_table();
}

Expected<const toml::array*> Fields::array(const std::string& key) {
  const toml::node* n = get(key);
  if (!n) return static_cast<const toml::array*>(nullptr);
  if (!n->is_array()) return error_at(key, fmt::format("expected an array, found {}", type_name(*n)));
  return n->as_array();
}

Expected<void> Fields::done() const {
  for (const auto& [key, node] : table_) {
    const std::string k(key.str());
    if (!seen_.count(k)) return error_at(k, "unknown key");
  }
  return {};
}

}  // namespace met

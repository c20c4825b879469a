// Strict TOML access with located errors. Every loader of the kernel tree reads tables through
// Fields, which remembers the keys it was asked for and rejects the rest (unknown keys are errors,
// never ignored), and checks types (an integer where a string is expected is an error).
#pragma once

#include <toml++/toml.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "tree/kernel_tree.hpp"

namespace met {

struct TomlDoc {
  std::string file;  // display name, "kernels/hopper/FUSIONS.toml"
  toml::table root;
};

// Parses a tree file; a syntax error is "kernels/x.toml:LINE:COL: <parser message>".
Expected<TomlDoc> parse_toml(const KernelTree& tree, const std::string& path);
// Parses bytes that came from elsewhere, naming them `file` in errors.
Expected<TomlDoc> parse_toml_text(const std::string& text, const std::string& file);

// "file:line" of a node (or of the table when the node has no source position).
std::string where(const std::string& file, const toml::node& node);

class Fields {
 public:
  // what: how errors name this table ("device 'h200-sxm'"); may be empty.
  Fields(const std::string& file, const toml::table& table, std::string what);

  bool has(const std::string& key) const;
  Expected<std::string> str(const std::string& key);
  Expected<std::optional<std::string>> opt_str(const std::string& key);
  Expected<std::int64_t> integer(const std::string& key);
  Expected<std::optional<std::int64_t>> opt_integer(const std::string& key);
  // A number: integer or float.
  Expected<double> number(const std::string& key);
  Expected<std::optional<double>> opt_number(const std::string& key);
  Expected<bool> boolean(const std::string& key);
  Expected<std::optional<bool>> opt_boolean(const std::string& key);
  Expected<std::vector<std::string>> str_list(const std::string& key);  // absent = empty
  Expected<std::vector<std::int64_t>> int_list(const std::string& key);  // absent = empty
  // A string or a list of strings (config key lists); absent = empty.
  Expected<std::vector<std::string>> str_or_list(const std::string& key);
  Expected<const toml::table*> table(const std::string& key);      // absent = nullptr
  Expected<const toml::array*> array(const std::string& key);      // absent = nullptr
  const toml::node* raw(const std::string& key);                   // marks the key as read

  // Error naming this table's location: "file:line: what: message".
  Error error(const std::string& message) const;
  Error error_at(const std::string& key, const std::string& message) const;
  // Fails on the first key that was never asked for.
  Expected<void> done() const;

  const std::string& file() const { return file_; }
  const toml::table& table_ref() const { return table_; }

 private:
  const toml::node* get(const std::string& key);
  std::string file_;
  const toml::table& table_;
  std::string what_;
  std::set<std::string> seen_;
};

}  // namespace met

// A Jinja template engine that agrees byte for byte with Python jinja2 configured as Hugging Face
// transformers configures it for chat templates (ImmutableSandboxedEnvironment, trim_blocks,
// lstrip_blocks, loopcontrols, raise_exception/strftime_now globals, tojson(ensure_ascii=False)).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/expected.hpp"

namespace met::jinja {
struct Stmt;
}

namespace met {

class Template {
 public:
  // Parses `source`; errors read "<display>:<line>:<col>: <what>".
  static Expected<Template> parse(std::string_view source, const std::string& display);
  // Renders with the context's keys as variables; errors are located like parse errors. An error
  // from the template's own raise_exception(msg) reads "<display>:<line>:<col>: raise_exception: msg".
  // Use ordered_json where key order matters (tojson, iterating a dict): Python keeps document order.
  Expected<std::string> render(const nlohmann::ordered_json& context) const;
  Expected<std::string> render(const nlohmann::json& context) const;
  const std::string& display() const { return *display_; }

 private:
  struct Parsed;
  Expected<std::string> render_scope(const std::shared_ptr<void>& root) const;
  std::shared_ptr<const Parsed> parsed_;
  std::shared_ptr<const std::string> display_;
};

}  // namespace met

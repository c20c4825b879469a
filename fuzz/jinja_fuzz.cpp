// Fuzzes the Jinja engine: the input up to its first NUL byte is a template, the rest a JSON render
// context (an empty context when it is not a JSON object). Parse errors and render errors are
// fine; a crash, a hang or a leak is not.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "text/jinja.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const auto nul = bytes.find('\0');
  const std::string source = bytes.substr(0, nul);
  auto t = met::Template::parse(source, "jinja_fuzz");
  if (!t) return 0;
  auto context = nlohmann::ordered_json::object();
  if (nul != std::string::npos) {
    auto j = nlohmann::ordered_json::parse(bytes.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) context = std::move(j);
  }
  (void)t->render(context);
  return 0;
}

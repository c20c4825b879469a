// Fuzzes an HTTP request body through what serve does with it before the engine: the strict
// parsers of the four JSON routes, then a chat body's messages through a chat template (the
// json -> jinja conversion and rendering a hostile body reaches). Any body may be refused; none may
// crash, hang or leak.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <variant>

#include "serve/openai.hpp"
#include "text/chat_template.hpp"

namespace {

// Touches every message field the way real templates do: iteration, attribute access, tojson.
constexpr const char* kTemplate =
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %}"
    "{% endfor %}{{ messages | tojson }}{% if add_generation_prompt %}<|assistant|>{% endif %}";

const met::Template& chat_template() {
  static const met::Template t = [] {
    auto parsed = met::Template::parse(kTemplate, "request_fuzz");
    if (!parsed) std::abort();
    return std::move(*parsed);
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  using namespace met::serve;
  for (Endpoint e : {Endpoint::chat, Endpoint::completion}) {
    auto r = parse_generation(e, body);
    if (auto* g = std::get_if<GenerationRequest>(&r); g && e == Endpoint::chat)
      (void)met::apply_chat_template(chat_template(), g->messages, nlohmann::ordered_json(nullptr),
                                     /*add_generation_prompt=*/true, nlohmann::ordered_json::object());
  }
  auto t = parse_tokenize(body);
  if (auto* r = std::get_if<TokenizeRequest>(&t); r && !r->prompt)
    (void)met::apply_chat_template(chat_template(), r->messages, nlohmann::ordered_json(nullptr), r->add_generation_prompt,
                                   nlohmann::ordered_json::object());
  (void)parse_detokenize(body);
  return 0;
}

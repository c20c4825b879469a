// One served model: an assets directory (from `met circuit emit`) loaded with everything the HTTP
// layer needs around the interpreter: id (the network slug), tokenizer, chat template, EOS ids.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "core/expected.hpp"
#include "interp/assets.hpp"
#include "interp/backend.hpp"
#include "serve/tool_calls.hpp"
#include "text/jinja.hpp"
#include "text/tokenizer.hpp"

namespace met::serve {

struct ServedModel {
  std::string id;  // build.json's network slug (weights.json's when build.json lacks it)
  interp::Assets assets;
  std::unique_ptr<interp::Backend> backend;
  std::optional<text::Tokenizer> tokenizer;
  std::optional<Template> chat_template;  // absent: chat completions are refused for this model
  std::string chat_template_error;        // why it is absent
  nlohmann::ordered_json template_extra;  // bos_token, eos_token, ... for the template
  ToolFormat tool_format = ToolFormat::none;  // how the template asks for tool calls (tool_calls.hpp)
  std::set<std::int32_t> eos;             // generation_config, config and tokenizer_config, united
  std::int64_t max_ctx = 0;
  std::int64_t vocab = 0;                 // rows of the model's logits (ids at or past it are refused)
  std::int64_t created = 0;               // unix seconds when loaded (/v1/models)
};

// Loads the assets, a backend for them ("cpu", or "cuda": the hopper interpreter), tokenizer.json (the assets' link, else the
// checkpoint's), the checkpoint's chat template and EOS ids. Every error names its file.
Expected<std::unique_ptr<ServedModel>> load_served_model(const std::string& assets_dir, const std::string& backend = "cpu");

}  // namespace met::serve

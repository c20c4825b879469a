// Chat prompts from a checkpoint's own Jinja template (DESIGN.md section 6): finds the template
// (chat_template.jinja, else tokenizer_config.json's chat_template) and renders a conversation
// with the variables transformers' apply_chat_template passes.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/expected.hpp"
#include "text/jinja.hpp"

namespace met {

struct ChatTemplateSource {
  std::string source;             // the Jinja text
  std::string display;            // where it came from, for error locations
  nlohmann::json special_tokens;  // {"bos_token": "...", ...} from tokenizer_config.json (strings only)
};

// The template of checkpoint directory `dir`: chat_template.jinja if present (as transformers
// prefers it), else tokenizer_config.json's `chat_template`, a string or a list of
// {"name", "template"} from which `name` is picked.
Expected<ChatTemplateSource> load_chat_template(const std::filesystem::path& dir, const std::string& name = "default");

// bos/eos/unk/pad tokens of a tokenizer_config.json object (a string or an {"content": ...} object each).
nlohmann::json special_tokens_of(const nlohmann::json& tokenizer_config);

// Renders `messages` (a list) with `tools` (null or a list), `add_generation_prompt`, and every key
// of `extra` (bos_token, eos_token, enable_thinking, ...) as template variables; `documents` is none.
// Prefer the ordered_json form: Python keeps a tool schema's keys in document order and tojson
// prints them so; nlohmann::json has already sorted them.
Expected<std::string> apply_chat_template(const Template& tmpl, const nlohmann::ordered_json& messages,
                                          const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                          const nlohmann::ordered_json& extra);
Expected<std::string> apply_chat_template(const Template& tmpl, const nlohmann::json& messages,
                                          const nlohmann::json& tools, bool add_generation_prompt,
                                          const nlohmann::json& extra);

}  // namespace met

// Loading a checkpoint's chat template and rendering conversations with it.
#include "text/chat_template.hpp"

#include <fstream>
#include <sstream>

namespace met {

namespace {

Expected<std::string> read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return fail(p.string() + ": cannot read file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

nlohmann::json special_tokens_of(const nlohmann::json& config) {
  nlohmann::json out = nlohmann::json::object();
  if (!config.is_object()) return out;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    auto it = config.find(key);
    if (it == config.end()) continue;
    if (it->is_string()) out[key] = *it;
    else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) out[key] = (*it)["content"];
  }
  return out;
}

Expected<ChatTemplateSource> load_chat_template(const std::filesystem::path& dir, const std::string& name) {
  ChatTemplateSource out;
  auto config_path = dir / "tokenizer_config.json";
  nlohmann::json config = nlohmann::json::object();
  if (std::filesystem::exists(config_path)) {
    MET_TRY(std::string text, read_file(config_path));
    config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object())
      return fail(config_path.string() + ": not a json object");
    out.special_tokens = special_tokens_of(config);
  } else {
    out.special_tokens = nlohmann::json::object();
  }
  auto jinja_path = dir / "chat_template.jinja";
  if (std::filesystem::exists(jinja_path)) {
    MET_TRY(out.source, read_file(jinja_path));
    out.display = jinja_path.string();
    return out;
  }
  if (!config.contains("chat_template"))
    return fail(dir.string() + ": no chat template (neither chat_template.jinja nor tokenizer_config.json's chat_template)");
  const auto& t = config["chat_template"];
  out.display = config_path.string() + ":chat_template";
  if (t.is_string()) {
    out.source = t.get<std::string>();
    return out;
  }
  if (!t.is_array()) return fail(config_path.string() + ": chat_template must be a string or a list of {name, template}");
  std::string names;
  for (const auto& entry : t) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") || !entry["name"].is_string() ||
        !entry["template"].is_string())
      return fail(config_path.string() + ": chat_template list entries must be {\"name\": str, \"template\": str}");
    const std::string entry_name = entry["name"].get<std::string>();
    if (entry_name == name) {
      out.source = entry["template"].get<std::string>();
      out.display = config_path.string() + ":chat_template[" + name + "]";
      return out;
    }
    names += (names.empty() ? "'" : ", '") + entry_name + "'";
  }
  return fail(config_path.string() + ": no chat template named '" + name + "' (have " + names + ")");
}

namespace {

template <class Json>
Expected<std::string> apply(const Template& tmpl, const Json& messages, const Json& tools, bool add_generation_prompt,
                            const Json& extra) {
  if (!messages.is_array()) return fail(tmpl.display() + ": messages must be a list");
  if (!tools.is_null() && !tools.is_array()) return fail(tmpl.display() + ": tools must be null or a list");
  if (!extra.is_null() && !extra.is_object()) return fail(tmpl.display() + ": extra variables must be an object");
  Json context = Json::object();
  context["messages"] = messages;
  context["tools"] = tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  if (extra.is_object()) {
    for (const auto& [k, v] : extra.items()) {
      if (context.contains(k)) return fail(tmpl.display() + ": extra variable '" + k + "' collides with a chat template argument");
      context[k] = v;
    }
  }
  return tmpl.render(context);
}

}  // namespace

Expected<std::string> apply_chat_template(const Template& tmpl, const nlohmann::ordered_json& messages,
                                          const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                          const nlohmann::ordered_json& extra) {
  return apply(tmpl, messages, tools, add_generation_prompt, extra);
}

Expected<std::string> apply_chat_template(const Template& tmpl, const nlohmann::json& messages,
                                          const nlohmann::json& tools, bool add_generation_prompt,
                                          const nlohmann::json& extra) {
  return apply(tmpl, messages, tools, add_generation_prompt, extra);
}

}  // namespace met

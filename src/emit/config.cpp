// Reading config.json: rms_norm_eps and the rotary embedding (rope_theta plus rope_scaling or a
// flat rope_parameters). Unknown scaling types and unknown keys of a known type are refused, never
// defaulted.
#include "emit/config.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace met::emit {
namespace {

// Shapes of the scaling blocks: the keys each type needs (all numbers); "rope_type"/"type" name it.
struct ScalingKeys {
  const char* type;
  std::vector<const char*> keys;
};
const ScalingKeys kScalingTypes[] = {
    {"default", {}},
    {"linear", {"factor"}},
    {"llama3", {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}},
};

// The language model's settings: a multimodal config nests them in text_config.
const nlohmann::json& language_model(const nlohmann::json& j) {
  auto it = j.find("text_config");
  return it != j.end() && it->is_object() ? *it : j;
}

}  // namespace

namespace detail {

std::int64_t param(const model::Node& n, const char* key) {
  auto it = n.params.find(key);
  return it == n.params.end() ? 0 : static_cast<std::int64_t>(std::llround(it->second));
}

std::string for_layer(const std::string& name, int first, int layer) {
  const std::string from = "." + std::to_string(first) + ".";
  const auto at = name.find(from);
  if (at == std::string::npos || first == layer) return name;
  return name.substr(0, at) + "." + std::to_string(layer) + "." + name.substr(at + from.size());
}

Expected<Config> read_config(const std::string& text) {
  Config c;
  if (text.empty()) return c;
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return fail("config.json: not a json object");
  const auto& lm = language_model(j);
  if (lm.contains("rms_norm_eps") && lm["rms_norm_eps"].is_number()) c.eps = lm["rms_norm_eps"].get<float>();
  MET_TRY(c.rope, parse_rope(text, "config.json"));
  c.theta = static_cast<float>(c.rope.theta);
  return c;
}

RopeConfig node_rope(const Config& cfg, const model::Node& rope) {
  RopeConfig r = cfg.rope;
  if (auto it = rope.params.find("theta"); it != rope.params.end() && it->second > 0) r.theta = it->second;
  if (auto it = rope.params.find("scaled"); it != rope.params.end() && it->second == 0) {
    RopeConfig plain;
    plain.theta = r.theta;
    return plain;
  }
  return r;
}

}  // namespace detail

Expected<RopeConfig> parse_rope(const std::string& config_json, const std::string& display) {
  RopeConfig r;
  const auto top = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (top.is_discarded() || !top.is_object()) return fail(display + ": not a json object");
  const auto& j = language_model(top);
  // transformers 5 writes rope_parameters (theta inside); older configs rope_theta + rope_scaling.
  // A rope_parameters keyed by layer type (Gemma) is a circuit's business, not read here.
  const nlohmann::json* block = nullptr;
  std::string where = "rope_scaling";
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    block = &j["rope_scaling"];
  } else if (j.contains("rope_parameters") && j["rope_parameters"].is_object() && j["rope_parameters"].contains("rope_type")) {
    block = &j["rope_parameters"];
    where = "rope_parameters";
  }
  const nlohmann::json* theta = j.contains("rope_theta") ? &j["rope_theta"] : nullptr;
  if (block && block->is_object() && block->contains("rope_theta")) theta = &(*block)["rope_theta"];
  if (theta && !theta->is_null()) {
    if (!theta->is_number() || theta->get<double>() <= 0) return fail(display + ": rope_theta: not a positive number");
    r.theta = theta->get<double>();
  }
  if (!block) return r;
  const std::string at = display + ": " + where;
  if (!block->is_object()) return fail(at + ": not an object");
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (!block->contains(key)) continue;
    if (!(*block)[key].is_string()) return fail(at + ": " + key + ": not a string");
    const std::string t = (*block)[key].get<std::string>();
    if (!type.empty() && t != type) return fail(at + ": rope_type '" + type + "' and type '" + t + "' disagree");
    type = t;
  }
  if (type.empty()) return fail(at + ": no rope_type");
  const ScalingKeys* shape = nullptr;
  for (const auto& k : kScalingTypes)
    if (type == k.type) shape = &k;
  if (!shape) return fail(at + ": rope type '" + type + "' is not implemented (met runs default, linear and llama3 rope)");
  for (const auto& item : block->items()) {
    const std::string& key = item.key();
    if (key == "rope_type" || key == "type" || key == "rope_theta") continue;
    const bool known = std::any_of(shape->keys.begin(), shape->keys.end(), [&](const char* k) { return key == k; });
    if (!known) return fail(at + ": unknown key '" + key + "' for rope type '" + type + "'");
  }
  std::map<std::string, double> v;
  for (const char* key : shape->keys) {
    if (!block->contains(key)) return fail(at + ": rope type '" + type + "' needs '" + key + "'");
    const auto& x = (*block)[key];
    if (!x.is_number() || !(x.get<double>() > 0)) return fail(at + ": " + key + ": not a positive number");
    v[key] = x.get<double>();
  }
  r.type = type;
  if (type == "default") return r;
  r.factor = v.at("factor");
  if (type == "llama3") {
    r.low_freq_factor = v.at("low_freq_factor");
    r.high_freq_factor = v.at("high_freq_factor");
    r.original_max_position_embeddings = v.at("original_max_position_embeddings");
    if (!(r.high_freq_factor > r.low_freq_factor))
      return fail(at + ": high_freq_factor " + std::to_string(r.high_freq_factor) + " must exceed low_freq_factor " +
                  std::to_string(r.low_freq_factor));
  }
  return r;
}

}  // namespace met::emit

// Reading config.json: rms_norm_eps and the rotary embedding (rope_theta plus rope_scaling, a flat
// rope_parameters, or one keyed by layer type). Unknown scaling types and unknown keys of a known
// type are refused, never defaulted.
#include "emit/config.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace met::emit {
namespace {

// Shapes of the scaling blocks: the keys each type needs (all numbers); "rope_type"/"type" name it.
// optional: keys a type takes when present (proportional's factor, 1 when absent as transformers
// reads it).
struct ScalingKeys {
  const char* type;
  std::vector<const char*> keys;
  std::vector<const char*> optional = {};
};
const ScalingKeys kScalingTypes[] = {
    {"default", {}},
    {"linear", {"factor"}},
    {"llama3", {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"}},
    {"proportional", {"partial_rotary_factor"}, {"factor"}},
    // truncate is a boolean, read apart from the numbers.
    {"yarn", {"factor"}, {"beta_fast", "beta_slow", "original_max_position_embeddings", "attention_factor", "mscale", "mscale_all_dim", "truncate"}},
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

double param_f(const model::Node& n, const char* key) {
  auto it = n.params.find(key);
  return it == n.params.end() ? 0 : it->second;
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

namespace {

// One rope block (rope_scaling, a flat rope_parameters or one layer type's entry) into r: its type,
// the keys that type needs and the optional ones it takes; anything else is refused.
Expected<void> parse_block(const nlohmann::json& block, const std::string& at, RopeConfig& r) {
  if (!block.is_object()) return fail(at + ": not an object");
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (!block.contains(key)) continue;
    if (!block[key].is_string()) return fail(at + ": " + key + ": not a string");
    const std::string t = block[key].get<std::string>();
    if (!type.empty() && t != type) return fail(at + ": rope_type '" + type + "' and type '" + t + "' disagree");
    type = t;
  }
  if (type.empty()) return fail(at + ": no rope_type");
  const ScalingKeys* shape = nullptr;
  for (const auto& k : kScalingTypes)
    if (type == k.type) shape = &k;
  if (!shape)
    return fail(at + ": rope type '" + type + "' is not implemented (met runs default, linear, llama3, proportional and yarn rope)");
  auto listed = [](const std::vector<const char*>& keys, const std::string& key) {
    return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; });
  };
  for (const auto& item : block.items()) {
    const std::string& key = item.key();
    if (key == "rope_type" || key == "type" || key == "rope_theta") continue;
    if (!listed(shape->keys, key) && !listed(shape->optional, key))
      return fail(at + ": unknown key '" + key + "' for rope type '" + type + "'");
  }
  std::map<std::string, double> v;
  for (const auto* keys : {&shape->keys, &shape->optional})
    for (const char* key : *keys) {
      if (!block.contains(key)) {
        if (keys == &shape->keys) return fail(at + ": rope type '" + type + "' needs '" + key + "'");
        continue;
      }
      const auto& x = block[key];
      if (std::string_view(key) == "truncate") {
        if (!x.is_boolean()) return fail(at + ": truncate: not a boolean");
        r.truncate = x.get<bool>();
        continue;
      }
      if (!x.is_number() || !(x.get<double>() > 0)) return fail(at + ": " + key + ": not a positive number");
      v[key] = x.get<double>();
    }
  if (block.contains("rope_theta")) {
    const auto& t = block["rope_theta"];
    if (!t.is_number() || !(t.get<double>() > 0)) return fail(at + ": rope_theta: not a positive number");
    r.theta = t.get<double>();
  }
  r.type = type;
  if (type == "default") return {};
  r.factor = v.count("factor") ? v.at("factor") : 1.0;
  if (type == "proportional") {
    r.partial_rotary_factor = v.at("partial_rotary_factor");
    if (r.partial_rotary_factor > 1)
      return fail(at + ": partial_rotary_factor " + std::to_string(r.partial_rotary_factor) + " is above 1");
  }
  if (type == "yarn") {
    r.beta_fast = v.count("beta_fast") ? v.at("beta_fast") : r.beta_fast;
    r.beta_slow = v.count("beta_slow") ? v.at("beta_slow") : r.beta_slow;
    r.original_max_position_embeddings = v.count("original_max_position_embeddings") ? v.at("original_max_position_embeddings") : 0;
    // A negative attention factor marks "not named": finish_yarn derives it once the factor is final.
    r.attention_factor = v.count("attention_factor") ? v.at("attention_factor") : -1;
    if (v.count("mscale") && v.count("mscale_all_dim")) {
      r.mscale = v.at("mscale");
      r.mscale_all_dim = v.at("mscale_all_dim");
    }
  }
  if (type == "llama3") {
    r.low_freq_factor = v.at("low_freq_factor");
    r.high_freq_factor = v.at("high_freq_factor");
    r.original_max_position_embeddings = v.at("original_max_position_embeddings");
    if (!(r.high_freq_factor > r.low_freq_factor))
      return fail(at + ": high_freq_factor " + std::to_string(r.high_freq_factor) + " must exceed low_freq_factor " +
                  std::to_string(r.low_freq_factor));
  }
  return {};
}

// YaRN's final factor and attention factor, as transformers derives them: with
// original_max_position_embeddings named, the factor is max_position_embeddings / it (when
// config.json gives max_position_embeddings); the attention factor, unless named, is
// m(factor, mscale) / m(factor, mscale_all_dim) with both mscales, else m(factor, 1), where
// m(s, k) = 0.1 k ln(s) + 1 for s > 1 and 1 otherwise.
Expected<void> finish_yarn(RopeConfig& r, double max_position_embeddings, const std::string& at) {
  if (r.type != "yarn") return {};
  if (r.original_max_position_embeddings > 0 && max_position_embeddings > 0)
    r.factor = max_position_embeddings / r.original_max_position_embeddings;
  else if (r.original_max_position_embeddings <= 0)
    r.original_max_position_embeddings = max_position_embeddings;
  if (!(r.original_max_position_embeddings > 0))
    return fail(at + ": yarn needs original_max_position_embeddings or a max_position_embeddings");
  if (r.attention_factor >= 0) return {};
  auto m = [&](double k) { return r.factor <= 1 ? 1.0 : 0.1 * k * std::log(r.factor) + 1.0; };
  r.attention_factor = r.mscale > 0 && r.mscale_all_dim > 0 ? m(r.mscale) / m(r.mscale_all_dim) : m(1.0);
  return {};
}

bool same_rope(const RopeConfig& a, const RopeConfig& b) {
  return a.theta == b.theta && a.type == b.type && a.factor == b.factor && a.low_freq_factor == b.low_freq_factor &&
         a.high_freq_factor == b.high_freq_factor && a.original_max_position_embeddings == b.original_max_position_embeddings &&
         a.partial_rotary_factor == b.partial_rotary_factor && a.beta_fast == b.beta_fast && a.beta_slow == b.beta_slow &&
         a.truncate == b.truncate && a.attention_factor == b.attention_factor;
}

}  // namespace

Expected<RopeConfig> parse_rope(const std::string& config_json, const std::string& display) {
  RopeConfig r;
  const auto top = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (top.is_discarded() || !top.is_object()) return fail(display + ": not a json object");
  const auto& j = language_model(top);
  // transformers 5 writes rope_parameters (theta inside); older configs rope_theta + rope_scaling.
  const nlohmann::json* theta = j.contains("rope_theta") ? &j["rope_theta"] : nullptr;
  if (theta && !theta->is_null()) {
    if (!theta->is_number() || theta->get<double>() <= 0) return fail(display + ": rope_theta: not a positive number");
    r.theta = theta->get<double>();
  }
  const double max_pos = j.contains("max_position_embeddings") && j["max_position_embeddings"].is_number()
                             ? j["max_position_embeddings"].get<double>()
                             : 0.0;
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    MET_CHECK(parse_block(j["rope_scaling"], display + ": rope_scaling", r));
    MET_CHECK(finish_yarn(r, max_pos, display + ": rope_scaling"));
    return r;
  }
  if (!j.contains("rope_parameters") || !j["rope_parameters"].is_object()) return r;
  const auto& params = j["rope_parameters"];
  if (params.contains("rope_type")) {
    MET_CHECK(parse_block(params, display + ": rope_parameters", r));
    MET_CHECK(finish_yarn(r, max_pos, display + ": rope_parameters"));
    return r;
  }
  // Keyed by layer type (Gemma): each layer kind's rope node names its own base and whether it is
  // scaled; the table a scaled node reads is computed from the one scaled entry.
  RopeConfig scaled;
  std::string scaled_key;
  for (const auto& item : params.items()) {
    RopeConfig e;
    MET_CHECK(parse_block(item.value(), display + ": rope_parameters." + item.key(), e));
    MET_CHECK(finish_yarn(e, max_pos, display + ": rope_parameters." + item.key()));
    if (!e.scaled()) continue;
    // The Gemma circuits run their sliding layers' rope unscaled (scaled = 0), as the models do.
    if (item.key() == "sliding_attention")
      return fail(display + ": rope_parameters.sliding_attention: rope type '" + e.type +
                  "' on the sliding layers is not emitted (their rope runs unscaled)");
    if (!scaled_key.empty() && !same_rope(scaled, e))
      return fail(display + ": rope_parameters: layer types '" + scaled_key + "' and '" + item.key() +
                  "' scale their ropes differently; met carries one scaled rope per emit");
    scaled = e;
    scaled_key = item.key();
  }
  return scaled_key.empty() ? r : scaled;
}

}  // namespace met::emit

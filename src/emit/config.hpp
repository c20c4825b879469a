// The model settings the emitter reads from config.json (rms_norm_eps and the rope) and the small
// readers of a graph node it shares across its rooms. Internal to src/emit.
#pragma once

#include <cstdint>
#include <string>

#include "core/expected.hpp"
#include "emit/emit.hpp"
#include "model/graph.hpp"

namespace met::emit::detail {

struct Config {
  float eps = 1e-6f;
  float theta = 10000.0f;
  RopeConfig rope;
};

// The settings of a config.json text; an empty text gives the defaults.
Expected<Config> read_config(const std::string& text);

// The rope a rope node runs: config.json's, with the node's own base (theta > 0) and without the
// scaling where the node says scaled = 0 (Gemma-3's local layers).
RopeConfig node_rope(const Config& cfg, const model::Node& rope);

// A node's integer parameter (0 when it has none).
std::int64_t param(const model::Node& n, const char* key);
// A node's parameter as it is (0 when it has none): swiglu_clamp's limit and alpha.
double param_f(const model::Node& n, const char* key);

// "model.layers.0.mlp" -> "model.layers.7.mlp" (first layer of the kind -> layer L).
std::string for_layer(const std::string& name, int first, int layer);

}  // namespace met::emit::detail

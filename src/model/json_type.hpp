// How error messages name a JSON value's type ("expected an integer, found a string"): one
// wording for config.json, safetensors headers and weights.json alike.
#pragma once

#include <nlohmann/json.hpp>

namespace met::model {

const char* json_type(const nlohmann::json& j);

}  // namespace met::model

#include "model/json_type.hpp"

namespace met::model {

const char* json_type(const nlohmann::json& j) {
  using nlohmann::json;
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a float";
    default: return "a binary value";
  }
}

}  // namespace met::model

#include "planner/units.hpp"

namespace met::planner {

std::string unit_name(const std::string& unit, const std::string& vendor, bool plural) {
  if (vendor == "amd") {
    if (unit == "tensor_core") return plural ? "matrix cores" : "matrix core";
    if (unit == "cuda_core") return plural ? "vector ALUs" : "vector ALU";
    return unit;
  }
  if (!plural) return unit;
  if (unit == "tensor_core") return "tensor cores";
  if (unit == "cuda_core") return "CUDA cores";
  return unit;
}

}  // namespace met::planner

// The units a family runs on (tensor_core, cuda_core, memory) as a device's vendor names them:
// everything a person reads says "matrix cores" and "vector ALUs" on AMD, never CUDA wording.
#pragma once

#include <string>

namespace met::planner {

// The unit id itself for NVIDIA and the host (or "tensor cores" / "CUDA cores" with `plural`, for
// running text); AMD's matrix core and vector ALU.
std::string unit_name(const std::string& unit, const std::string& vendor, bool plural = false);

}  // namespace met::planner

// Ops whose weight is a matrix read by the matmul units: their declared format decides how a
// kernel runs them (native, exact emulation, no path). Norm scales, conv taps and sinks are small
// parameters kept in their own precision and never decide a format path.
#pragma once

#include <string_view>

namespace met::planner {

inline bool is_matrix_op(std::string_view op) {
  return op == "linear" || op == "embed" || op == "moe_router" || op == "moe_gate_up" || op == "moe_down";
}

}  // namespace met::planner

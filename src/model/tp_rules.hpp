// The split rules of tensor parallelism, one table by (op, role): what a node becomes on one of N
// ranks. The emit's rank graph and weight windows (src/emit/tensor_parallel.cpp) and the planner's
// per-rank costs (src/estimate/cost.cpp) read the same table, so the TP table a plan prints is the
// split the packets carry. docs/arch/interpreter.md, Tensor parallelism.
#pragma once

#include "model/graph.hpp"

namespace met::model {

enum class TpRule {
  replicate,      // whole on every rank
  heads,          // the rank's attention heads (and KV heads)
  column,         // the rank's output rows of the weight (qkv, gate_up, lm_head)
  row,            // the rank's input columns: fp32 partial sums, all-reduced
  inter_width,    // a gated activation over the rank's slice of the intermediate size
  expert_column,  // each expert's gate/up rows of the rank's slice
  expert_row,     // each expert's down columns of that slice: fp32 partials, all-reduced
  once,           // a row-parallel projection's bias: added once, by the first rank, to its partial sums
};

// The node's rule, or nullptr when the table names none (the emit refuses such a node by name).
const TpRule* tp_rule(const Node& n);

}  // namespace met::model

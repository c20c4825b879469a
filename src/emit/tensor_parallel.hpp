// Tensor parallelism (emit --tp N): the graph one rank runs and how each weight is split. Column-
// parallel qkv, gate/up and lm_head (each rank its rows: whole q heads, whole KV heads, a slice of
// the intermediate size, a slice of the vocabulary), row-parallel o and down (each rank its
// columns; the residual after them becomes an all-reduce), everything else replicated. Internal to
// src/emit; docs/arch/interpreter.md, Tensor parallelism.
#pragma once

#include <string>

#include "core/expected.hpp"
#include "model/graph.hpp"

namespace met::emit::detail {

// The graph rank r of `ranks` runs: the split nodes' heads, KV heads and widths divided by ranks.
// Refuses a node with no split rule (naming it and its template) and a count that ranks does not
// divide: attention heads, KV heads (fewer KV heads than ranks are refused, not replicated),
// intermediate size and vocabulary. display names the checkpoint in errors.
Expected<model::ModelGraph> rank_graph(const model::ModelGraph& g, int ranks, const std::string& display);

// How a node's weight is split: -1 replicated, 0 by rows (column-parallel), 1 by columns
// (row-parallel).
int weight_split_dim(const model::Node& n);

}  // namespace met::emit::detail

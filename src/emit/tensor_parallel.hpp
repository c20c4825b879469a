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

// The graph rank r of `ranks` runs: the split nodes' heads, KV heads and widths divided by ranks;
// with fewer KV heads than ranks, one KV head per rank (kv_groups). Refuses a node with no split
// rule (naming it and its template) and a count that ranks does not divide: attention heads, KV
// heads (unless ranks is a multiple of them), intermediate sizes and vocabulary. display names the
// checkpoint in errors.
Expected<model::ModelGraph> rank_graph(const model::ModelGraph& g, int ranks, const std::string& display);

// How many distinct slices of the KV heads the ranks hold: ranks when every rank has KV heads of its
// own, else the KV heads (rank r holds KV head r * kv_heads / ranks, shared with the ranks beside
// it).
int kv_groups(const model::ModelGraph& g, int ranks);

// How a node's weight is split: -1 replicated, 0 by rows (column-parallel), 1 by columns
// (row-parallel).
int weight_split_dim(const model::Node& n);

}  // namespace met::emit::detail

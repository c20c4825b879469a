// Mixture-of-experts weights stored one tensor per expert (Hugging Face's `experts.N.` modules):
// a circuit template names expert 0's tensors, and the node's weight stacks every expert's along
// the first dimension, expert major (expert 0's gate and up, then expert 1's, ...).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/graph.hpp"

namespace met::model {

// The path component that marks expert 0 in a template's tensor name.
inline constexpr std::string_view kExpertZero = "experts.0.";

// True when the node's weight is stacked over experts ([experts, rows, cols]) and every template
// name holds kExpertZero: its checkpoint has one tensor per expert and name.
bool per_expert(const Node& node, const std::vector<std::string>& names);

// The names of expert 0's tensors for experts 0..experts-1, expert major.
std::vector<std::string> expert_tensors(const std::vector<std::string>& names, int experts);

// The experts of a per-expert node (its `experts` param).
int expert_count(const Node& node);

}  // namespace met::model

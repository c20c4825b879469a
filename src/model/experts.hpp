// Mixture-of-experts weights stored one tensor per expert (Hugging Face's `experts.N.` modules):
// a circuit template names expert 0's tensors, and the node's weight stacks every expert's along
// the first dimension, expert major (expert 0's gate and up, then expert 1's, ...). Or one tensor
// over every expert (gpt-oss, the node's `layout` 1): bf16 [experts, in, out], or MXFP4 blocks and
// scales with the output dimension first. Or (layout 2, Gemma-4) one bf16 tensor over every expert
// stored as the node's weight shape, [experts, out, in].
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

// The experts of a per-expert node (its `experts` param); 0 without one, -1 when it is no whole
// number in [0, INT_MAX].
int expert_count(const Node& node);

// MXFP4 checkpoints (gpt-oss) store a fused expert tensor `<name>` as `<name>_blocks` (U8: 16
// bytes of two e2m1 codes each, the low nibble first, per 32 elements along the input) and
// `<name>_scales` (U8 e8m0, 2^(code - 127), one per 32).
inline constexpr std::string_view kBlocksSuffix = "_blocks";
inline constexpr std::string_view kScalesSuffix = "_scales";
inline constexpr int kMxfp4Group = 32;

// True for an expert node whose checkpoint holds one tensor over every expert (layout 1).
bool fused_experts(const Node& node);
// True for an expert node whose checkpoint holds one bf16 tensor over every expert stored as its
// weight shape [experts, out, in] (layout 2, Gemma-4): the bytes of the per-expert stack.
bool whole_experts(const Node& node);
// The stored shapes of a fused expert node whose weight is [experts, out, in]: bf16 [experts, in,
// out]; MXFP4 blocks [experts, out, in / 32, 16] and scales [experts, out, in / 32].
std::vector<double> fused_bf16_shape(const Node& node);
std::vector<double> fused_blocks_shape(const Node& node);
std::vector<double> fused_scales_shape(const Node& node);

}  // namespace met::model

// Expanding expert 0's tensor names over every expert (experts.hpp).
#include "model/experts.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "model/ops.hpp"

namespace met::model {

int expert_count(const Node& node) {
  auto it = node.params.find("experts");
  if (it == node.params.end()) return 0;
  const double e = it->second;
  // A count that is no whole int is no expert count; make_node's shape check names it.
  if (!(e >= 0) || e > std::numeric_limits<int>::max() || e != std::floor(e)) return -1;
  return static_cast<int>(e);
}

bool per_expert(const Node& node, const std::vector<std::string>& names) {
  if (weight_shape(node).size() != 3 || expert_count(node) < 1 || names.empty()) return false;
  for (const auto& n : names)
    if (n.find(kExpertZero) == std::string::npos) return false;
  return true;
}

std::vector<std::string> expert_tensors(const std::vector<std::string>& names, int experts) {
  std::vector<std::string> out;
  out.reserve(names.size() * static_cast<std::size_t>(std::max(experts, 0)));
  for (int e = 0; e < experts; ++e)
    for (const auto& n : names) {
      const auto at = n.find(kExpertZero);
      out.push_back(n.substr(0, at) + "experts." + std::to_string(e) + "." + n.substr(at + kExpertZero.size()));
    }
  return out;
}

namespace {

bool expert_layout(const Node& node, double layout) {
  auto it = node.params.find("layout");
  return expert_count(node) > 0 && it != node.params.end() && it->second == layout && weight_shape(node).size() == 3;
}

}  // namespace

bool fused_experts(const Node& node) { return expert_layout(node, 1); }

bool whole_experts(const Node& node) { return expert_layout(node, 2); }

std::vector<double> fused_bf16_shape(const Node& node) {
  const auto w = weight_shape(node);
  return {w[0], w[2], w[1]};
}

std::vector<double> fused_blocks_shape(const Node& node) {
  const auto w = weight_shape(node);
  return {w[0], w[1], w[2] / kMxfp4Group, kMxfp4Group / 2};
}

std::vector<double> fused_scales_shape(const Node& node) {
  const auto w = weight_shape(node);
  return {w[0], w[1], w[2] / kMxfp4Group};
}

}  // namespace met::model

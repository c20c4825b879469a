// THE op table (docs/arch/kernel-tree.md "Op vocabulary"): one registry from which circuit
// validation, parameter defaults, weight shapes, KV bytes and recurrent state are all derived.
// Adding an op means adding one row in ops.cpp; nothing else switches on op names.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/graph.hpp"

namespace met::model {

using Params = std::map<std::string, double>;

struct OptionalParam {
  std::string name;
  double value = 0;         // default when same_as is empty
  std::string same_as;      // default is another param of the node ("head_dim")
  // In the plan's canonical text only when off its default: params added after plan format 2
  // (Gemma's), so the digests of plans that leave them at their defaults, and the campaigns
  // recorded against those digests, stay as they were.
  bool canonical_when_set = false;
};

struct OpInfo {
  std::string name;
  std::vector<std::string> required;
  std::vector<OptionalParam> optional;
  std::vector<std::string> roles;   // allowed roles; empty = any
  bool may_have_weight = false;     // a template may name a weight tensor
  bool quantizable = false;         // a Linear module: checkpoint quantizers store it in low precision
  int weight_tensors = 1;           // tensors of that shape behind one node (ssm_scan: A, D, dt bias)
  // Shape of the (first) weight tensor; empty = no weight for these params (attention without sinks).
  std::vector<double> (*weight_shape)(const Params&) = nullptr;
  double (*kv_elems)(const Params&) = nullptr;      // per token, per layer
  double (*state_elems)(const Params&) = nullptr;   // per sequence, per layer
  bool weight_required = true;      // with may_have_weight: a template must name it (attention: only with sinks)
  // With weight_required false: a template that names no weight must set this param (rmsnorm's
  // `weighted`: a weightless norm says so); empty: no such rule.
  std::string weight_switch = "";
};

const OpInfo* find_op(std::string_view name);
std::vector<std::string> op_names();

// Every param name the op accepts, required first.
std::vector<std::string> op_param_names(const OpInfo& op);
// Fills optional params that are absent with their defaults.
void fill_defaults(const OpInfo& op, Params& params);

bool has_weight(const Node& node);
std::vector<double> weight_shape(const Node& node);
double weight_elems(const Node& node);        // every tensor of the node (weight_tensors copies)
double kv_elems_per_token(const Node& node);  // kv_append: kv_heads*(head_dim+v_head_dim); kv_append_mla: kv_lora+rope_dim
double state_elems_per_seq(const Node& node); // conv1d, ssm_scan, gated_delta

}  // namespace met::model

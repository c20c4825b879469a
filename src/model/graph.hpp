// ModelGraph: a circuit instantiated with one model's parameters and formats. The planner fuses
// and costs these nodes; layers of one kind share one node list (they differ only in index).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/format.hpp"

namespace met::model {

struct Node {
  std::string op;                         // from the op table (model/ops.hpp)
  std::string role;                       // may be empty
  std::map<std::string, double> params;   // evaluated; optional params filled with defaults
  std::string weight;                     // checkpoint tensor name for the kind's first layer ("" = none)
  std::optional<Format> weight_format;    // set iff the op has a weight
  // The format the checkpoint fixes for this node's input activations (quantised with scales it
  // carries: W8A8, W4A4); a path must compute in it. Absent: the model's activation format.
  std::optional<Format> act_format;
  std::string format_source;              // where the format came from: "recipe", "config.json quantization_config", "safetensors header", ...
  std::vector<std::string> weights;       // every checkpoint tensor of a fused node (q, k, v), first layer; weights[0] == weight
  bool tied = false;                      // the weight is another node's tensor (tied lm_head): read each step, stored once
  std::string where;                      // the node template: "kernels/circuits/dense-gqa.toml:41"
};

struct LayerGroup {
  std::string kind;                 // "full", "sliding", "moe", "mamba", ...
  std::vector<int> layers;          // layer indices of this kind, ascending
  std::vector<Node> nodes;
};

struct ModelGraph {
  std::string id;                   // instance id, or the lower-cased checkpoint directory name
  std::string circuit;              // circuit id
  std::string architecture;         // config.json architectures[0]
  std::map<std::string, double> params;   // every circuit parameter, evaluated
  std::vector<Node> pre;            // before the layers (embedding)
  std::vector<LayerGroup> kinds;    // in order of first appearance
  std::vector<int> layer_kinds;     // per layer index: index into kinds
  // Per layer index, the layer whose KV caches its attention reads: itself, or for a layer that
  // shares KV (Gemma-4's num_kv_shared_layers) an earlier one. Empty when no layer shares.
  std::vector<int> kv_source;
  std::vector<Node> post;           // after the layers (final norm, lm head, sampling)
  Format activation = Format::bf16;
  Format kv = Format::bf16;
  std::string formats_basis;        // "recipe" | "declared"
  bool tied_embeddings = false;
  int default_context = 4096;       // serving policy (instance) or 4096
  std::vector<std::string> notes;   // facts the report should show (quantization exclusions, ...)
};

}  // namespace met::model

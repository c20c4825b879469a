// Circuits: model architectures as op-graph templates over config.json parameters
// (kernels/circuits/<id>.toml, docs/arch/kernel-tree.md). Loading validates every node against the
// op table and every expression's names against the circuit's parameters, so instantiation only
// meets errors that come from a checkpoint.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "model/expr.hpp"
#include "tree/kernel_tree.hpp"

namespace met::model {

struct ParamDef {
  std::string name;
  std::vector<std::string> keys;  // dotted config.json keys; first present non-null wins
  Expr default_value;             // when no key is present (may be empty: then the key is required)
  Expr value;                     // computed parameter (no keys)
  std::string where;
};

struct Selector {
  std::string kind;
  Expr when;                      // may read `i`; empty when index_key picks
  std::vector<std::string> index_key;  // or: dotted config keys of a list of layer indices (Qwen3-MoE's mlp_only_layers)
};

struct LayerSchedule {
  Expr count;
  std::string default_kind;       // may be empty
  std::vector<std::string> kinds_key;
  std::map<std::string, std::string> kinds_map;
  std::vector<std::string> pattern_key;
  std::map<std::string, std::string> pattern_map;  // one character -> kind
  std::vector<Selector> select;
  // Cross-layer KV sharing (Gemma-4's num_kv_shared_layers): the last `shared_count` layers take the
  // kind shared_map gives their own and read the caches of the last layer of their own kind before
  // them (ModelGraph::kv_source); empty: none.
  Expr shared_count;
  std::map<std::string, std::string> shared_map;
  std::string where;
};

struct NodeTemplate {
  std::string op;
  std::string role;
  std::vector<std::string> weight;          // tensor names with {i}; several for a fused node (q, k, v)
  std::string tied;                         // tensor used instead when tie_word_embeddings holds
  Expr when;                                // empty = always
  std::map<std::string, Expr> params;
  std::string where;                        // "kernels/circuits/dense-gqa.toml:41"
  std::string what;                         // "node 3 of kind 'full'"
};

struct Circuit {
  std::string id;
  std::vector<std::string> architectures;
  std::map<std::string, ParamDef> params;
  std::vector<std::string> param_order;     // dependencies before dependents
  LayerSchedule layers;
  std::vector<NodeTemplate> pre;
  std::map<std::string, std::vector<NodeTemplate>> kinds;
  std::vector<NodeTemplate> post;
  std::string file;                         // "kernels/circuits/dense-gqa.toml"
  // architecture -> a prefix its checkpoints leave off every tensor name the circuit writes, where
  // it starts a dotted component (Gemma3ForCausalLM and Gemma4ForCausalLM store the language model
  // at the top: "language_model." dropped from "language_model.model.*" and
  // "model.language_model.*").
  std::map<std::string, std::string> strip_prefix;
};

// The checkpoint's name for a circuit tensor name at `layer` (layer < 0: 0): {i} replaced, the
// architecture's strip_prefix dropped.
std::string tensor_name(const Circuit& circuit, const std::string& arch, const std::string& name, int layer);

// The parameter that says whether lm_head uses its `tied` tensor.
inline constexpr const char* kTieParam = "tie_word_embeddings";

// Parses one circuit file (path relative to the tree root).
Expected<Circuit> load_circuit(const KernelTree& tree, const std::string& path);
// Every circuits/*.toml except INSTANCES.toml, keyed by id; an architecture claimed twice is an error.
Expected<std::map<std::string, Circuit>> load_circuits(const KernelTree& tree);

}  // namespace met::model

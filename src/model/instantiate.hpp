// Circuit + config.json (+ quantization configs, safetensors headers) -> ModelGraph. Two sources
// of formats: a recipe (an instance's formats by role) or the checkpoint's declared formats.
#pragma once

#include <map>
#include <string>

#include "core/expected.hpp"
#include "core/format.hpp"
#include "model/checkpoint.hpp"
#include "model/circuit.hpp"
#include "model/graph.hpp"
#include "model/instance.hpp"
#include "tree/kernel_tree.hpp"

namespace met::model {

struct FormatChoice {
  enum class Basis { recipe, declared };
  Basis basis = Basis::declared;
  std::map<std::string, Format> weights;  // recipe: by role, then by op, then "default" (Linear-type ops)
  Format kv = Format::bf16;               // recipe only
  int context = 4096;                     // serving policy carried into the graph

  static FormatChoice declared() { return {}; }
  static FormatChoice recipe(std::map<std::string, Format> weights, Format kv) {
    return {Basis::recipe, std::move(weights), kv, 4096};
  }
};

Expected<ModelGraph> instantiate(const Circuit& circuit, const CheckpointSource& config_source,
                                 const FormatChoice& formats, const std::string& id);
// The circuit the instance names, or the one claiming its architecture; recipe formats unless declared.
Expected<ModelGraph> instantiate_instance(const KernelTree& tree, const std::map<std::string, Circuit>& circuits,
                                          const Instance& instance, bool declared);
// A checkpoint directory with declared formats; id = lower-cased directory name.
Expected<ModelGraph> instantiate_checkpoint(const KernelTree& tree, const std::map<std::string, Circuit>& circuits,
                                            const CheckpointSource& source);
// The circuit claiming `architecture`; the error lists every known architecture.
Expected<const Circuit*> circuit_for(const std::map<std::string, Circuit>& circuits, const std::string& architecture,
                                     const std::string& where);

}  // namespace met::model

// MODEL.toml: what a class says about one model (kernels/<class>/<model>/<quant>/MODEL.toml):
// kernels declared absent for it, with the reason. A target specialised for a model recomputes
// availability with those kernels marked absent, so their rules turn into gaps and port items.
#pragma once

#include <set>
#include <string>

#include "model/graph.hpp"
#include "planner/library.hpp"

namespace met::planner {

// The quantisation directory name of a model: the format of its first matrix weight in a layer.
std::string model_quant(const model::ModelGraph& m);

// Kernels declared absent by any MODEL.toml of the chain for this model (root first).
Expected<std::set<std::string>> declared_absent(const KernelTree& tree, const avail::ClassChain& chain, const model::ModelGraph& m);

// The target itself when no MODEL.toml speaks of the model; else a copy with availability redone.
Expected<Target> target_for_model(const Library& lib, const Target& target, const model::ModelGraph& m);

}  // namespace met::planner

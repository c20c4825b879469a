// `--model NAME`: what a user may type for a model, resolved in a fixed order: a golden instance
// id (any case); a Hugging Face id ORG/NAME of a golden instance's checkpoint; one whose
// config.json the kernel tree stores (kernels/circuits/configs/ORG--NAME/); then, only when a Hub
// endpoint is given (--hub URL or HF_ENDPOINT), the Hub itself (src/hub). Anything else is an
// error with the nearest names.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "hub/hub.hpp"
#include "model/graph.hpp"
#include "planner/library.hpp"

namespace met::cli {

struct HubFlags {
  std::string hub;       // --hub URL ("" = HF_ENDPOINT, else no Hub)
  std::string revision;  // --revision ("" = main)
};

struct ModelRef {
  enum class Kind { instance, stored_config, hub };
  Kind kind = Kind::instance;
  const model::Instance* instance = nullptr;  // instance
  std::string config_dir;                     // stored_config: "circuits/configs/ORG--NAME"
  std::string hub_dir;                        // hub: the cache directory
  std::string canonical;                      // what a regenerating command line names: instance id or ORG/NAME
};

// Hugging Face ids of the configs the tree stores ("Qwen/Qwen3-8B"), sorted.
std::vector<std::string> stored_hf_ids(const planner::Library& lib);

// The Hub options from the flags and the environment (HF_ENDPOINT, HF_TOKEN, XDG_CACHE_HOME, HOME);
// endpoint "" when neither --hub nor HF_ENDPOINT is set.
hub::HubOptions hub_options(const HubFlags& flags);

Expected<ModelRef> resolve_model(const planner::Library& lib, const std::string& name, const HubFlags& flags);

// The graph of a resolved model; `declared` asks an instance for its checkpoint's formats instead
// of its recipe (a stored config or a Hub model has declared formats only).
Expected<model::ModelGraph> instantiate_model(const planner::Library& lib, const ModelRef& ref, const std::string& repo,
                                              bool declared);

}  // namespace met::cli

// Named golden instances (kernels/circuits/INSTANCES.toml): a model config directory inside the
// kernel tree, an optional circuit, recipe formats by role and a serving policy.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "core/expected.hpp"
#include "core/format.hpp"
#include "tree/kernel_tree.hpp"

namespace met::model {

struct Instance {
  std::string id;
  std::string config_dir;                  // relative to the tree root: "circuits/configs/<dir>"
  std::optional<std::string> circuit;      // else chosen by config.json architectures
  std::map<std::string, Format> weights;   // "default", then overrides by role or op
  Format kv = Format::bf16;
  int context = 4096;
  std::string location;                    // "kernels/circuits/INSTANCES.toml:12"
};

inline constexpr const char* kInstancesPath = "circuits/INSTANCES.toml";

// Keyed by id. Every instance's config_dir must hold a config.json.
Expected<std::map<std::string, Instance>> load_instances(const KernelTree& tree);

}  // namespace met::model

// Library: everything the kernel tree says, loaded once (devices, classes, circuits, instances),
// and Target: one device resolved to its class chain, checked build, availability and rules.
// The CLI and the matrix load one Library and resolve each device once.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "avail/availability.hpp"
#include "avail/build_check.hpp"
#include "avail/classes.hpp"
#include "device/registry.hpp"
#include "model/circuit.hpp"
#include "model/instance.hpp"
#include "planner/rules.hpp"

namespace met::planner {

struct Library {
  const KernelTree* tree = nullptr;
  device::Registry registry;
  std::map<std::string, avail::ClassInfo> classes;
  std::map<std::string, model::Circuit> circuits;
  std::map<std::string, model::Instance> instances;  // by id

  const model::Instance* instance(const std::string& id) const;
  std::vector<std::string> instance_ids() const;
};

struct Target {
  const device::Device* device = nullptr;
  avail::ClassChain chain;
  avail::Availability availability;
  RuleSet rules;
};

Expected<Library> load_library(const KernelTree& tree);
// By id or alias (Registry::resolve). Unknown device: an error with the nearest names and every one. A device its class's build disagrees with is refused.
Expected<Target> resolve_target(const Library& lib, const std::string& device_id);

}  // namespace met::planner

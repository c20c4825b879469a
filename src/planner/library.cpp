#include "planner/library.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/strings.hpp"
#include "core/suggest.hpp"

namespace met::planner {

const model::Instance* Library::instance(const std::string& id) const {
  auto it = instances.find(id);
  return it == instances.end() ? nullptr : &it->second;
}

std::vector<std::string> Library::instance_ids() const {
  std::vector<std::string> ids;
  for (const auto& [id, i] : instances) ids.push_back(id);
  return ids;
}

Expected<Library> load_library(const KernelTree& tree) {
  Library lib;
  lib.tree = &tree;
  MET_TRY(lib.registry, device::load_registry(tree));
  MET_TRY(lib.classes, avail::load_classes(tree));
  MET_TRY(lib.circuits, model::load_circuits(tree));
  MET_TRY(lib.instances, model::load_instances(tree));
  for (const auto& d : lib.registry.devices) {
    if (!lib.classes.count(d.klass)) {
      std::vector<std::string> known;
      for (const auto& [id, c] : lib.classes) known.push_back(id);
      return fail(fmt::format("{}: device '{}': unknown class '{}' (known: {})", d.location, d.id, d.klass, join(known, ", ")));
    }
  }
  return lib;
}

Expected<Target> resolve_target(const Library& lib, const std::string& device_id) {
  Target t;
  t.device = lib.registry.resolve(device_id);
  if (!t.device) {
    // Near names are ids and aliases; each is suggested as its device's id ("mi355" and "mi355x" are one device).
    std::vector<std::string> near;
    for (const std::string& n : near_names(device_id, lib.registry.names())) {
      const std::string id = lib.registry.resolve(n)->id;
      if (std::find(near.begin(), near.end(), id) == near.end()) near.push_back(id);
    }
    return fail(fmt::format("unknown device '{}': {}", device_id, did_you_mean(near, lib.registry.ids())));
  }
  MET_TRY(t.chain, avail::resolve_chain(lib.classes, t.device->klass));
  MET_CHECK(avail::check_build_vs_device(t.chain, *t.device, lib.registry));
  MET_TRY(t.availability, avail::compute_availability(*lib.tree, t.chain, *t.device, lib.registry));
  MET_TRY(t.rules, load_rules(*lib.tree, t.chain));
  return t;
}

}  // namespace met::planner

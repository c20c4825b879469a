#include "cli/model_ref.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include "core/strings.hpp"
#include "core/suggest.hpp"
#include "model/checkpoint.hpp"
#include "model/instantiate.hpp"

namespace met::cli {

namespace {

constexpr const char* kConfigs = "circuits/configs/";

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// "Qwen--Qwen3-8B" <-> "Qwen/Qwen3-8B": the tree stores ORG/NAME as one directory name.
std::string hf_id_of(const std::string& dir_name) {
  const auto at = dir_name.find("--");
  return at == std::string::npos ? dir_name : dir_name.substr(0, at) + "/" + dir_name.substr(at + 2);
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

}  // namespace

std::vector<std::string> stored_hf_ids(const planner::Library& lib) {
  std::set<std::string> ids;
  for (std::string path : lib.tree->list("circuits/configs")) {
    const auto at = path.find(kConfigs);
    if (at != std::string::npos) path = path.substr(at + std::string(kConfigs).size());
    const auto slash = path.find('/');
    if (slash == std::string::npos || path.substr(slash + 1) != "config.json") continue;
    ids.insert(hf_id_of(path.substr(0, slash)));
  }
  return std::vector<std::string>(ids.begin(), ids.end());
}

hub::HubOptions hub_options(const HubFlags& flags) {
  hub::HubOptions o;
  o.endpoint = !flags.hub.empty() ? flags.hub : env("HF_ENDPOINT");
  while (!o.endpoint.empty() && o.endpoint.back() == '/') o.endpoint.pop_back();
  o.token = env("HF_TOKEN");
  const std::string xdg = env("XDG_CACHE_HOME"), home = env("HOME");
  o.cache_root = !xdg.empty() ? xdg : (!home.empty() ? home + "/.cache" : "");
  if (!flags.revision.empty()) o.revision = flags.revision;
  return o;
}

Expected<ModelRef> resolve_model(const planner::Library& lib, const std::string& name, const HubFlags& flags) {
  ModelRef ref;
  // 1. An instance id, in any case.
  for (const auto& [id, inst] : lib.instances) {
    if (lower(id) == lower(name)) {
      ref.instance = &inst;
      ref.canonical = id;
      return ref;
    }
  }
  const std::vector<std::string> stored = stored_hf_ids(lib);
  std::vector<std::string> known = lib.instance_ids();
  known.insert(known.end(), stored.begin(), stored.end());
  if (name.find('/') == std::string::npos) return fail(fmt::format("unknown model '{}': {}", name, suggest(name, known)));

  // 2. The Hugging Face id of a golden instance's checkpoint: the instance, recipe and all.
  const std::string wanted_dir =
      std::string(kConfigs) + lower(name.substr(0, name.find('/')) + "--" + name.substr(name.find('/') + 1));
  for (const auto& [id, inst] : lib.instances) {
    if (lower(inst.config_dir) == wanted_dir) {
      ref.instance = &inst;
      ref.canonical = id;
      return ref;
    }
  }
  // 3. A config the tree stores without an instance.
  for (const std::string& hf : stored) {
    if (lower(hf) == lower(name)) {
      ref.kind = ModelRef::Kind::stored_config;
      ref.config_dir = std::string(kConfigs) + hf.substr(0, hf.find('/')) + "--" + hf.substr(hf.find('/') + 1);
      ref.canonical = hf;
      return ref;
    }
  }
  // 4. The Hub, when the user named one.
  const hub::HubOptions options = hub_options(flags);
  if (options.endpoint.empty()) {
    const auto near = near_names(name, known);
    const std::string guess = near.empty() ? "" : fmt::format("did you mean '{}'? ", join(near, "' or '"));
    return fail(
        fmt::format("unknown model '{}': {}no golden instance or stored config has that id, and no Hub was named "
                    "(pass --hub https://huggingface.co or set HF_ENDPOINT to read its config and safetensors headers "
                    "from the Hub, or --checkpoint DIR for a local copy) (known: {})",
                    name, guess, join(known, ", ")));
  }
  MET_TRY(ref.hub_dir, hub::fetch_model(options, name));
  ref.kind = ModelRef::Kind::hub;
  ref.canonical = name;
  return ref;
}

Expected<model::ModelGraph> instantiate_model(const planner::Library& lib, const ModelRef& ref, const std::string& repo,
                                              bool declared) {
  switch (ref.kind) {
    case ModelRef::Kind::instance:
      return model::instantiate_instance(*lib.tree, lib.circuits, *ref.instance, declared);
    case ModelRef::Kind::stored_config: {
      model::TreeCheckpoint source(*lib.tree, ref.config_dir);
      return model::instantiate_checkpoint(*lib.tree, lib.circuits, source);
    }
    case ModelRef::Kind::hub: {
      MET_TRY(auto source, hub::HubCheckpoint::open(repo, ref.hub_dir));
      return model::instantiate_checkpoint(*lib.tree, lib.circuits, source);
    }
  }
  return fail("unreachable model kind");
}

}  // namespace met::cli

// Refuses a device whose class build disagrees with it, so availability never has to guess whether
// a guard is false because of the device or because of a mis-declared class.
#include "avail/build_check.hpp"

#include <fmt/format.h>

namespace met::avail {

Expected<void> check_build_vs_device(const ClassChain& chain, const device::Device& device, const device::Registry& registry) {
  const std::string at = device.location.empty() ? "" : device.location + ": ";
  if (chain.chain.empty()) return fail(fmt::format("{}device '{}': empty class chain", at, device.id));
  const ClassInfo& leaf = chain.leaf();
  if (device.klass != leaf.id) {
    return fail(fmt::format("{}device '{}' runs class '{}', not class '{}'", at, device.id, device.klass, leaf.id));
  }
  if (leaf.arch == "abstract") {
    return fail(fmt::format("{}device '{}' names class '{}', which is abstract (a shared base, never built for a device)", at,
                            device.id, leaf.id));
  }
  if (device.arch != leaf.arch) {
    return fail(fmt::format("{}device '{}' has arch '{}', but class '{}' is built for '{}' ({})", at, device.id, device.arch,
                            leaf.id, leaf.arch, leaf.location));
  }
  for (const auto& [macro, kind] : registry.guards) {
    auto it = chain.defines.find(macro);
    const long long value = it == chain.defines.end() ? 0 : it->second;
    const bool compiled_in = value != 0;
    const bool has = device.instructions.count(kind) != 0;
    if (has && !compiled_in) {
      return fail(fmt::format("{}device '{}' claims {}, which class '{}' compiles out ({} = {})", at, device.id, kind, leaf.id,
                              macro, value));
    }
    if (!has && compiled_in) {
      return fail(fmt::format("{}class '{}' compiles in {} ({} = {}), which device '{}' lacks", at, leaf.id, kind, macro, value,
                              device.id));
    }
  }
  return {};
}

}  // namespace met::avail

#include "device/identity.hpp"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "core/numfmt.hpp"

namespace met::device {

namespace {

constexpr double kMemoryTolerance = 0.05;  // the driver's total memory against visible_gib

// "sm_90a" -> 9.0, "sm_100a" -> 10.0; false for anything else.
bool compute_of_arch(const std::string& arch, int& major, int& minor) {
  if (arch.rfind("sm_", 0) != 0) return false;
  std::size_t i = 3;
  int n = 0;
  while (i < arch.size() && arch[i] >= '0' && arch[i] <= '9') n = n * 10 + (arch[i++] - '0');
  if (i == 3 || n < 10) return false;
  major = n / 10;
  minor = n % 10;
  return true;
}

}  // namespace

GpuIdentity gpu_identity(std::string name, int sm_count, int compute_major, int compute_minor, double total_bytes) {
  return {std::move(name), sm_count, compute_major, compute_minor, total_bytes / (1024.0 * 1024.0 * 1024.0)};
}

std::string describe(const GpuIdentity& g) {
  return fmt::format("{} ({} SMs, compute {}.{}, {} GiB)", g.name, g.sm_count, g.compute_major, g.compute_minor, fmt_fixed(g.memory_gib, 1));
}

Expected<void> check_gpu(const Device& d, const GpuIdentity& g) {
  const std::string at = d.location + ": device '" + d.id + "'";
  int major = 0, minor = 0;
  if (d.vendor != "nvidia" || !compute_of_arch(d.arch, major, minor))
    return fail(fmt::format("{} ({}) is not an NVIDIA GPU; {} is", at, d.arch, describe(g)));
  if (g.sm_count != d.units) return fail(fmt::format("{} has {} SMs; {} has {}", at, d.units, g.name, g.sm_count));
  if (g.compute_major != major || g.compute_minor != minor)
    return fail(fmt::format("{} is {} (compute {}.{}); {} is compute {}.{}", at, d.arch, major, minor, g.name, g.compute_major, g.compute_minor));
  if (std::fabs(g.memory_gib - d.visible_gib) > kMemoryTolerance * d.visible_gib)
    return fail(fmt::format("{} has {} GiB visible; {} has {} GiB", at, fmt_fixed(d.visible_gib, 1), g.name, fmt_fixed(g.memory_gib, 1)));
  return {};
}

std::vector<std::string> devices_matching(const Registry& r, const GpuIdentity& g) {
  std::vector<std::string> ids;
  for (const auto& d : r.devices)
    if (check_gpu(d, g)) ids.push_back(d.id);
  return ids;  // the registry keeps its devices sorted by id
}

}  // namespace met::device

// Which registry device a GPU is, from what its driver reports: SM count, compute capability and
// total memory against a DEVICES.toml entry's units, arch and visible_gib. The probe's write-back
// and the campaign hold a GPU to the device they speak for; `met circuit probe --identify` names it.
#pragma once

#include <string>
#include <vector>

#include "core/expected.hpp"
#include "device/registry.hpp"

namespace met::device {

// A GPU as its driver reports it.
struct GpuIdentity {
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int sm_count = 0;
  int compute_major = 0, compute_minor = 0;
  double memory_gib = 0;  // the driver's total memory, 2^30 bytes
};

// A GPU from the driver's figures: total memory in bytes.
GpuIdentity gpu_identity(std::string name, int sm_count, int compute_major, int compute_minor, double total_bytes);

// "NVIDIA H100 80GB HBM3 (132 SMs, compute 9.0, 79.1 GiB)"
std::string describe(const GpuIdentity& g);

// Ok when `g` is device `d`: an NVIDIA device whose arch is g's compute capability, with g's SM
// count, and a visible_gib within 5% of g's total memory. Otherwise the first difference, located
// at d's DEVICES.toml entry.
Expected<void> check_gpu(const Device& d, const GpuIdentity& g);

// The ids of every registry device `g` passes check_gpu against, sorted.
std::vector<std::string> devices_matching(const Registry& r, const GpuIdentity& g);

}  // namespace met::device

// Which entry points a device can run, read from the sources of its class chain: a kernel is
// available when one source defines it, every guard around the definition holds under the chain's
// defines, and no MODEL.toml declares it absent. Every unavailable kernel carries a why.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "avail/build_check.hpp"
#include "avail/classes.hpp"
#include "core/expected.hpp"
#include "device/registry.hpp"
#include "tree/kernel_tree.hpp"

namespace met::avail {

struct KernelStatus {
  std::string name;
  bool available = false;
  std::string file;                // display name of the defining source ("" when none)
  int line = 0;
  std::string why;                 // empty when available
  std::vector<std::string> needs;  // instruction kinds the failed guard needs and the device lacks
};

struct Availability {
  std::string klass;                            // leaf class id
  std::string device;                           // device id
  std::map<std::string, KernelStatus> kernels;  // every entry point of the chain's sources

  // A name no source defines: available false, why "not defined by any source of class 'x'".
  KernelStatus status(const std::string& name) const;
};

// Checks the build against the device first (check_build_vs_device). Entry points of the kind the
// leaf language builds are counted (__global__ for cuda/hip, plain for cpp). Errors: a source that
// cannot be read or scanned, a kernel defined (compiled) by two sources.
Expected<Availability> compute_availability(const KernelTree& tree, const ClassChain& chain, const device::Device& device,
                                            const device::Registry& registry,
                                            const std::set<std::string>& declared_absent = {});

}  // namespace met::avail

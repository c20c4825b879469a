// The class build agrees with the device: a device runs the leaf of its class chain, of the same
// arch, and the class compiles in exactly the guarded instruction kinds the device has natively.
#pragma once

#include "avail/classes.hpp"
#include "core/expected.hpp"
#include "device/registry.hpp"

namespace met::avail {

// Errors: the device's class is not the chain leaf, is abstract, or has another arch; a guard macro
// M -> kind K where (chain define M, absent = 0) != 0 differs from whether the device has K.
Expected<void> check_build_vs_device(const ClassChain& chain, const device::Device& device, const device::Registry& registry);

}  // namespace met::avail

// The scaled rope's inv_freq table as a packet tensor: emit adds one generated tensor per rotary
// width; the loader computes its bytes with generated_table() (emit.hpp). Internal to src/emit.
#pragma once

#include <cstdint>

#include "emit/builder.hpp"
#include "emit/emit.hpp"

namespace met::emit::detail {

// The inv_freq table the rope bodies read, or MET_NO_TENSOR for a plain (theta-based) rope.
std::uint32_t inv_freq_table(Shared& sh, const RopeConfig& rope, std::int64_t rotary_dim);

}  // namespace met::emit::detail

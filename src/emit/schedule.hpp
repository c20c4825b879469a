// Scheduling a sliced program: the counter waits of every instruction and the placement of its
// slices on the streams. Internal to src/emit.
#pragma once

#include <cstdint>

#include "emit/packet.hpp"

namespace met::emit::detail {

// Instruction i waits on every earlier j it conflicts with (RAW, WAR, WAW by tensor handle), minus
// the waits another kept wait already implies; slices go to the streams round-robin in order, or
// longest first onto the least-loaded stream where their costs differ (causal prefill attention).
void schedule(ProgramDesc& p, std::uint32_t sm_count);

}  // namespace met::emit::detail

// Slicing a built program: each instruction's rows (and, where its writes stay disjoint, its output
// columns) are cut into slices the streams run in parallel. Internal to src/emit.
#pragma once

#include <cstdint>

#include "emit/packet.hpp"

namespace met::emit::detail {

// Sets every instruction's slice count (and its col_slices int); a column-split lm_head leaves its
// tokens to an argmax instruction inserted right after it. `sm`: the streams; `gpu`: a GPU class.
void slice_program(ProgramDesc& p, const PacketFile& f, std::uint32_t sm, bool gpu);

}  // namespace met::emit::detail

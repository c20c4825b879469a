// Slicing a built program: each instruction's rows (and, where its writes stay disjoint, its output
// columns) are cut into slices the streams run in parallel. Internal to src/emit.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

#include "emit/packet.hpp"

namespace met::emit::detail {

// Before slicing, on a GPU whose class splits K (`split`: avail::ClassInfo::gemm_k_split): the bf16
// wgmma GEMMs whose tiles leave streams idle take K parts (their k_splits int and the program's part
// buffer, which `part_buffer(slices)` makes: fp32, `slices` rows of MET_GEMM_PART_FLOATS).
void split_gemms(ProgramDesc& p, const PacketFile& f, std::uint32_t sm, std::pair<std::int64_t, std::int64_t> split,
                 const std::function<std::uint32_t(std::uint64_t)>& part_buffer);

// Sets every instruction's slice count (and its col_slices int); a column-split lm_head leaves its
// tokens to an argmax instruction inserted right after it. `sm`: the streams; `gpu`: a GPU class.
void slice_program(ProgramDesc& p, const PacketFile& f, std::uint32_t sm, bool gpu);

}  // namespace met::emit::detail

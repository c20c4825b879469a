// The per-step IO the host fills, checked before every run of a program on any backend: a KV slot
// out of range would write outside the caches, and kv_append's by-slot writes (emit's
// OperandInfo::by_slot) are split across slices on the promise that no two rows share a slot.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/expected.hpp"
#include "emit/packet.hpp"

namespace met::interp {

// The rows each slots field of a program may name: the fewest rows among the caches its writers
// write (every instruction whose `slots` operand is that IO field writes its k_cache and v_cache
// there); -1 where no instruction writes through the field. A backend computes them once, at load.
struct SlotBounds {
  std::int64_t slots = -1, ring_slots = -1;
};
SlotBounds slot_bounds(const emit::PacketFile& packet, std::size_t program);

// Fails, naming the program and rows, when a row's slot is outside [0, bound) or two rows of the
// step name the same slot. `slots` is the program's slots field and `ring_slots` its ring caches'
// (nullptr: nothing to check).
Expected<void> check_step_io(const emit::ProgramDesc& program, const SlotBounds& bounds, const std::int64_t* slots,
                             const std::int64_t* ring_slots);

}  // namespace met::interp

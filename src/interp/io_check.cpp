#include "interp/io_check.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "emit/emit.hpp"
#include "emit/opcodes.hpp"

namespace met::interp {

namespace {

// One slots field against the caches it writes, `kv_slots` rows each.
Expected<void> check_slots(const emit::ProgramDesc& p, const char* field, const std::int64_t* slots,
                           std::int64_t kv_slots) {
  std::vector<std::pair<std::int64_t, std::int64_t>> by_slot;  // (slot, row)
  by_slot.reserve(static_cast<std::size_t>(p.rows));
  for (std::int64_t r = 0; r < p.rows; ++r) {
    if (slots[r] < 0 || slots[r] >= kv_slots)
      return fail(fmt::format("{}: row {} names {} {}, outside the {} rows of the caches it writes", p.name, r, field,
                              slots[r], kv_slots));
    by_slot.emplace_back(slots[r], r);
  }
  std::sort(by_slot.begin(), by_slot.end());
  for (std::size_t i = 1; i < by_slot.size(); ++i)
    if (by_slot[i].first == by_slot[i - 1].first)
      return fail(fmt::format("{}: rows {} and {} both name {} {}; every row of a step needs its own slot", p.name,
                              by_slot[i - 1].second, by_slot[i].second, field, by_slot[i].first));
  return {};
}

}  // namespace

SlotBounds slot_bounds(const emit::PacketFile& packet, std::size_t program) {
  SlotBounds out;
  if (program >= packet.programs.size()) return out;
  for (const auto& in : packet.programs[program].instrs) {
    const emit::OpcodeInfo* op = emit::find_opcode(in.opcode);
    if (!op) continue;
    const int s = emit::tensor_index(*op, "slots");
    if (s < 0 || static_cast<std::size_t>(s) >= in.tensors.size() || in.tensors[static_cast<std::size_t>(s)] >= packet.tensors.size())
      continue;
    const auto& field = packet.tensors[in.tensors[static_cast<std::size_t>(s)]];
    if (field.source != MET_SOURCE_IO) continue;
    std::int64_t* b = field.ref == static_cast<std::uint64_t>(emit::IoField::slots)        ? &out.slots
                      : field.ref == static_cast<std::uint64_t>(emit::IoField::ring_slots) ? &out.ring_slots
                                                                                            : nullptr;
    if (!b) continue;
    for (const char* cache : {"k_cache", "v_cache"}) {
      const int c = emit::tensor_index(*op, cache);
      if (c < 0 || static_cast<std::size_t>(c) >= in.tensors.size()) continue;
      const auto t = in.tensors[static_cast<std::size_t>(c)];
      if (t >= packet.tensors.size() || packet.tensors[t].shape.empty()) continue;
      const auto rows = static_cast<std::int64_t>(packet.tensors[t].shape[0]);
      *b = *b < 0 ? rows : std::min(*b, rows);
    }
  }
  return out;
}

Expected<void> check_step_io(const emit::ProgramDesc& p, const SlotBounds& bounds, const std::int64_t* slots,
                             const std::int64_t* ring_slots) {
  if (slots && bounds.slots >= 0) MET_CHECK(check_slots(p, "KV slot", slots, bounds.slots));
  if (ring_slots && bounds.ring_slots >= 0) MET_CHECK(check_slots(p, "ring slot", ring_slots, bounds.ring_slots));
  return {};
}

}  // namespace met::interp

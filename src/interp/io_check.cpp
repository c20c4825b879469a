#include "interp/io_check.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace met::interp {

namespace {

// One slots field against the caches it writes, `kv_slots` rows each.
Expected<void> check_slots(const emit::ProgramDesc& p, const std::int64_t* slots, std::int64_t kv_slots) {
  std::vector<std::pair<std::int64_t, std::int64_t>> by_slot;  // (slot, row)
  by_slot.reserve(static_cast<std::size_t>(p.rows));
  for (std::int64_t r = 0; r < p.rows; ++r) {
    if (slots[r] < 0 || slots[r] >= kv_slots)
      return fail(fmt::format("{}: row {} names KV slot {}, outside the caches' {} slots", p.name, r, slots[r], kv_slots));
    by_slot.emplace_back(slots[r], r);
  }
  std::sort(by_slot.begin(), by_slot.end());
  for (std::size_t i = 1; i < by_slot.size(); ++i)
    if (by_slot[i].first == by_slot[i - 1].first)
      return fail(fmt::format("{}: rows {} and {} both name KV slot {}; every row of a step needs its own slot", p.name,
                              by_slot[i - 1].second, by_slot[i].second, by_slot[i].first));
  return {};
}

}  // namespace

Expected<void> check_step_io(const emit::PacketFile& packet, std::size_t program, const std::int64_t* slots,
                             const std::int64_t* ring_slots) {
  if (program >= packet.programs.size()) return {};
  // The linear caches are the largest, the rings (emit.hpp, runtime contract) the smallest.
  std::int64_t most = -1, least = -1;
  for (const auto& t : packet.tensors)
    if (t.source == MET_SOURCE_KV && !t.shape.empty()) {
      const auto rows = static_cast<std::int64_t>(t.shape[0]);
      most = std::max(most, rows);
      least = least < 0 ? rows : std::min(least, rows);
    }
  if (most < 0) return {};
  const auto& p = packet.programs[program];
  if (slots) MET_CHECK(check_slots(p, slots, most));
  if (ring_slots) MET_CHECK(check_slots(p, ring_slots, least));
  return {};
}

}  // namespace met::interp

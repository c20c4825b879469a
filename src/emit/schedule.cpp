// The scheduler: dependencies by tensor handle (a conservative rule: any shared handle orders two
// instructions), reduced transitively so each instruction keeps only the waits no other kept wait
// implies; slices are dealt to the streams round-robin in instruction order.
#include "emit/schedule.hpp"

#include <algorithm>
#include <set>
#include <vector>

#include "emit/opcodes.hpp"

namespace met::emit::detail {

void schedule(ProgramDesc& p, std::uint32_t sm_count) {
  const std::size_t n = p.instrs.size();
  std::vector<std::set<std::uint32_t>> reads(n), writes(n);
  for (std::size_t i = 0; i < n; ++i) {
    const OpcodeInfo* op = find_opcode(p.instrs[i].opcode);
    for (std::size_t k = 0; k < p.instrs[i].tensors.size(); ++k) {
      const auto h = p.instrs[i].tensors[k];
      if (h == MET_NO_TENSOR) continue;
      (op->tensors[k].write ? writes[i] : reads[i]).insert(h);
    }
  }
  auto meets = [](const std::set<std::uint32_t>& a, const std::set<std::uint32_t>& b) {
    for (auto h : a)
      if (b.count(h)) return true;
    return false;
  };
  const std::size_t words = (n + 63) / 64;
  std::vector<std::vector<std::uint64_t>> reach(n, std::vector<std::uint64_t>(words, 0));
  std::vector<std::vector<WaitDesc>> waits(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t jj = i; jj-- > 0;) {
      const bool conflict = meets(writes[jj], reads[i]) || meets(writes[jj], writes[i]) || meets(reads[jj], writes[i]);
      if (!conflict) continue;
      if (reach[i][jj / 64] >> (jj % 64) & 1u) continue;  // implied by a later kept wait
      waits[i].push_back({static_cast<std::uint32_t>(jj), p.instrs[jj].slices});
      reach[i][jj / 64] |= std::uint64_t{1} << (jj % 64);
      for (std::size_t w = 0; w < words; ++w) reach[i][w] |= reach[jj][w];
    }
    std::reverse(waits[i].begin(), waits[i].end());
  }
  p.streams.assign(sm_count, {});
  std::size_t next = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::uint32_t s = 0; s < p.instrs[i].slices; ++s)
      p.streams[next++ % sm_count].push_back({static_cast<std::uint32_t>(i), s, waits[i]});
}

}  // namespace met::emit::detail

#include "interp/collective_plan.hpp"

#include <algorithm>

#include "emit/opcodes.hpp"
#include "interp/assets.hpp"
#include "interp/nccl.hpp"

namespace met::interp {

namespace {

int peers_operand(const emit::OpcodeInfo& op) {
  for (std::size_t t = 0; t < op.tensors.size(); ++t)
    if (op.tensors[t].kind == "peers") return static_cast<int>(t);
  return -1;
}

std::string rank_file(const std::string& dir, std::size_t r) {
  return dir + "/" + (r == 0 ? std::string("model.pkt") : rank_packet_name(static_cast<int>(r)));
}

std::string describe_tensor(const emit::TensorDesc& t) {
  return "'" + t.name + "' (source " + std::to_string(t.source) + ", ref " + std::to_string(t.ref) + ", " +
         std::to_string(t.bytes) + " bytes)";
}

}  // namespace

bool same_placement(const emit::ProgramDesc& a, const emit::ProgramDesc& b) {
  if (a.streams.size() != b.streams.size()) return false;
  for (std::size_t j = 0; j < a.streams.size(); ++j) {
    if (a.streams[j].size() != b.streams[j].size()) return false;
    for (std::size_t k = 0; k < a.streams[j].size(); ++k)
      if (a.streams[j][k].instr != b.streams[j][k].instr || a.streams[j][k].slice != b.streams[j][k].slice) return false;
  }
  return true;
}

bool is_collective(std::uint32_t opcode) {
  const emit::OpcodeInfo* op = emit::find_opcode(opcode);
  return op && peers_operand(*op) >= 0;
}

Expected<CollectivePlan> plan_collectives(const std::vector<const emit::PacketFile*>& ranks, const std::string& dir) {
  if (ranks.empty()) return fail(dir + ": no rank packets to plan collectives over");
  const emit::PacketFile& r0 = *ranks[0];
  CollectivePlan plan;
  std::uint64_t arena = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const emit::PacketFile& f = *ranks[r];
    if (f.programs.size() != r0.programs.size())
      return fail(rank_file(dir, r) + ": " + std::to_string(f.programs.size()) + " programs; model.pkt has " +
                  std::to_string(r0.programs.size()) + ": the ranks' collectives would not pair");
    for (const auto& t : f.tensors)
      if (t.source == MET_SOURCE_SCRATCH) arena = std::max(arena, t.ref + t.bytes);
  }
  static_assert(nccl::kWinGranularity % nccl::kWinAlign == 0);
  plan.window_bytes =
      std::max<std::uint64_t>(1, (arena + nccl::kWinGranularity - 1) / nccl::kWinGranularity) * nccl::kWinGranularity;
  plan.programs.resize(r0.programs.size());
  for (std::size_t p = 0; p < r0.programs.size(); ++p) {
    const auto& prog0 = r0.programs[p];
    std::uint32_t barriers = 0;
    for (std::size_t r = 1; r < ranks.size(); ++r) {
      const auto& other = ranks[r]->programs[p];
      if (other.name != prog0.name || other.instrs.size() != prog0.instrs.size())
        return fail(rank_file(dir, r) + ": program " + std::to_string(p) + " is " + other.name + " of " +
                    std::to_string(other.instrs.size()) + " instructions; model.pkt's is " + prog0.name + " of " +
                    std::to_string(prog0.instrs.size()) + ": the ranks' collectives would not pair");
      if (!same_placement(prog0, other))
        return fail(rank_file(dir, r) + ": program " + prog0.name +
                    " places its slices on other streams than rank 0's; the ranks' collectives would not pair");
    }
    for (std::size_t i = 0; i < prog0.instrs.size(); ++i) {
      const auto& d0 = prog0.instrs[i];
      const emit::OpcodeInfo* op = emit::find_opcode(d0.opcode);
      const std::string where = "program " + prog0.name + " instruction " + std::to_string(i);
      if (!op) return fail(rank_file(dir, 0) + ": " + where + ": unknown opcode " + std::to_string(d0.opcode));
      const int peers = peers_operand(*op);
      for (std::size_t r = 1; r < ranks.size(); ++r) {
        const auto& d = ranks[r]->programs[p].instrs[i];
        const std::string at = rank_file(dir, r) + ": " + where;
        if (d.opcode != d0.opcode || d.slices != d0.slices)
          return fail(at + ": " + std::to_string(d.slices) + " slice(s) of opcode " + std::to_string(d.opcode) +
                      "; model.pkt's has " + std::to_string(d0.slices) + " of " + op->name +
                      ": the ranks' collectives would not pair");
        if (peers < 0) continue;
        if (d.ints != d0.ints)
          return fail(at + ": " + op->name + "'s ints differ from model.pkt's: the ranks would exchange different rows");
        if (d.tensors.size() != d0.tensors.size())
          return fail(at + ": " + op->name + " has " + std::to_string(d.tensors.size()) + " operands; model.pkt's has " +
                      std::to_string(d0.tensors.size()));
        for (std::size_t t = 0; t < d0.tensors.size(); ++t) {
          const auto h0 = d0.tensors[t], h = d.tensors[t];
          const std::string name = t < op->tensors.size() ? op->tensors[t].name : std::to_string(t);
          if ((h0 == MET_NO_TENSOR) != (h == MET_NO_TENSOR))
            return fail(at + ": " + op->name + " operand " + name + " is present on one rank only");
          if (h0 == MET_NO_TENSOR) continue;
          if (h0 >= r0.tensors.size() || h >= ranks[r]->tensors.size())
            return fail(at + ": " + op->name + " operand " + name + " names a tensor past the table");
          const auto &a = r0.tensors[h0], &b = ranks[r]->tensors[h];
          if (a.source != b.source || a.ref != b.ref || a.bytes != b.bytes)
            return fail(at + ": " + op->name + " operand " + name + " is " + describe_tensor(b) + "; model.pkt's is " +
                        describe_tensor(a) + ": a collective's operands must lie at the same place on every rank");
        }
      }
      if (peers < 0) continue;
      const auto h =
          static_cast<std::size_t>(peers) < d0.tensors.size() ? d0.tensors[static_cast<std::size_t>(peers)] : MET_NO_TENSOR;
      if (h == MET_NO_TENSOR || h >= r0.tensors.size())
        return fail(rank_file(dir, 0) + ": " + where + ": " + op->name + " has no peers operand");
      const auto& t = r0.tensors[h];
      if (t.source != MET_SOURCE_SCRATCH)
        return fail(rank_file(dir, 0) + ": " + where + ": " + op->name + " peers operand " + describe_tensor(t) +
                    " is not scratch; only the arena is an NCCL window");
      if (d0.slices == 0) return fail(rank_file(dir, 0) + ": " + where + ": " + op->name + " has no slices");
      plan.programs[p].push_back({i, peers, t.ref, barriers, d0.slices});
      barriers += d0.slices;
    }
    plan.lsa_barriers = std::max(plan.lsa_barriers, barriers);
  }
  return plan;
}

std::vector<MetDevPeers> peers_records(const CollectivePlan& plan, std::size_t program, std::uint32_t ranks, std::uint32_t rank,
                                       std::uint64_t window, std::uint64_t comm) {
  std::vector<MetDevPeers> out;
  for (const auto& c : plan.programs.at(program)) {
    MetDevPeers rec{};
    rec.window = window;
    rec.offset = c.offset;
    rec.comm = comm;
    rec.ranks = ranks;
    rec.rank = rank;
    rec.barrier0 = c.barrier0;
    out.push_back(rec);
  }
  return out;
}

}  // namespace met::interp

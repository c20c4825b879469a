// The collectives of a tensor-parallel emit as the cuda backend wires them (docs/arch/interpreter.md,
// Tensor parallelism): from the ranks' packets alone, which instructions are collectives, the arena
// offset of each one's `peers` operand (its place in the symmetric NCCL window, equal on every rank),
// the LSA barriers its slices use, and the window's size. Pure: the backend builds the device
// records (kernels/common/interp/abi.h MetDevPeers) from this plan, and tests check it without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "emit/packet.hpp"
#include "kernels/common/interp/abi.h"

namespace met::interp {

struct CollectivePlan {
  struct Collective {
    std::size_t instr = 0;       // index in its program
    int peers_operand = -1;      // the instruction's operand of kind "peers"
    std::uint64_t offset = 0;    // that operand's arena offset, equal on every rank
    std::uint32_t barrier0 = 0;  // LSA barrier of slice 0; slice s uses barrier0 + s
    std::uint32_t slices = 0;
  };
  std::vector<std::vector<Collective>> programs;  // per program, in instruction order
  // The largest number of collective slices of any one program: the barriers each device
  // communicator needs (every slice of every collective of a launch has its own).
  std::uint32_t lsa_barriers = 0;
  // Bytes of each rank's arena window: the largest scratch arena of any rank, rounded up to the
  // window granularity (nccl::kWinGranularity), so the window is the same size on every rank.
  std::uint64_t window_bytes = 0;
};

// Whether two ranks' programs deal the same slices to the same streams in the same order (emit's
// schedule does, from identical instruction lists): a stream that reached collective slice s then
// finds slice s at the same place on every other rank's stream, which the per-slice rendezvous (the
// cpu backend's) and barriers (the hopper bodies') rely on to never wait on a slice that a peer's
// stream reaches only after it.
bool same_placement(const emit::ProgramDesc& a, const emit::ProgramDesc& b);

// Whether an opcode is a collective (its registry row has a `peers` operand).
bool is_collective(std::uint32_t opcode);

// Plans the collectives of `ranks` (rank r's packet at r; dir names the assets in errors). The
// ranks' programs must agree instruction by instruction (opcode, slices), place their slices alike
// (same_placement) and, for a collective,
// operand by operand (the same source, arena offset and bytes) and in its ints; a mismatch is
// refused with its rank file, program and instruction. A collective's peers operand must be scratch.
Expected<CollectivePlan> plan_collectives(const std::vector<const emit::PacketFile*>& ranks, const std::string& dir);

// The MetDevPeers records of one program on one rank, one per collective in plan order: window and
// comm are that rank's device handles (the NCCL window, the address of its ncclDevComm).
std::vector<MetDevPeers> peers_records(const CollectivePlan& plan, std::size_t program, std::uint32_t ranks, std::uint32_t rank,
                                       std::uint64_t window, std::uint64_t comm);

}  // namespace met::interp

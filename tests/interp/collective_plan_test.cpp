// The collective plan of a tensor-parallel emit (src/interp/collective_plan.cpp), what the cuda
// backend wires its ranks by: LSA barrier numbering, the peers operands' window offsets, the
// MetDevPeers records, and the refusal of ranks whose collectives would not pair. Pure: no GPU.
#include <doctest/doctest.h>

#include <functional>
#include <map>

#include "emit/opcodes.hpp"
#include "interp/collective_plan.hpp"
#include "interp/nccl.hpp"
#include "tp_assets.hpp"

namespace met {

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE(
    "every slice of every collective of a program gets its own LSA barrier: barrier0 is the running sum of the "
    "earlier collectives' slices, and the communicator has the most any one program needs (a reused barrier, a "
    "count short of the largest program or a plan that misses a collective fails)") {
  interp::Assets a = testing::tp_assets("collective-plan-2", 2);
  // Slices as a GPU emit may cut them: program 0's collectives 3 slices each, on every rank alike.
  for (auto* f : testing::mutable_files(a))
    for (auto& d : f->programs[0].instrs)
      if (interp::is_collective(d.opcode)) d.slices = 3;
  auto plan = interp::plan_collectives(testing::files_of(a), a.dir);
  REQUIRE_MESSAGE(plan.ok(), (plan.ok() ? "" : plan.error().message));
  REQUIRE(plan->programs.size() == a.packet.programs.size());
  std::uint32_t most = 0;
  for (std::size_t p = 0; p < a.packet.programs.size(); ++p) {
    const auto& prog = a.packet.programs[p];
    const std::string program = prog.name;
    CAPTURE(program);
    std::vector<std::size_t> expected;  // the collectives, by opcode name
    for (std::size_t i = 0; i < prog.instrs.size(); ++i) {
      const std::string name = emit::find_opcode(prog.instrs[i].opcode)->name;
      if (name == "allreduce_residual" || name == "allgather_cols") expected.push_back(i);
    }
    // tiny Llama-3: 2 all-reduces a layer and the logits gather.
    CHECK(expected.size() >= 3);
    const auto& plan_p = plan->programs[p];
    REQUIRE(plan_p.size() == expected.size());
    std::uint32_t next = 0;
    std::map<std::uint32_t, int> used;
    for (std::size_t c = 0; c < plan_p.size(); ++c) {
      const auto& col = plan_p[c];
      CHECK(col.instr == expected[c]);
      CHECK(col.slices == prog.instrs[col.instr].slices);
      CHECK(col.barrier0 == next);
      for (std::uint32_t s = 0; s < col.slices; ++s) ++used[col.barrier0 + s];
      next += col.slices;
      // The peers operand's window offset is its arena offset.
      const auto h = prog.instrs[col.instr].tensors[static_cast<std::size_t>(col.peers_operand)];
      CHECK(emit::find_opcode(prog.instrs[col.instr].opcode)->tensors[static_cast<std::size_t>(col.peers_operand)].kind ==
            "peers");
      CHECK(col.offset == a.packet.tensors[h].ref);
      CHECK(a.packet.tensors[h].source == MET_SOURCE_SCRATCH);
    }
    for (const auto& [barrier, uses] : used) CHECK(uses == 1);
    if (p == 0) CHECK(next == 3 * expected.size());
    most = std::max(most, next);
  }
  CHECK(plan->lsa_barriers == most);
  // The window: every rank's arena fits, and its size is a multiple of the window granularity (and so of NCCL's alignment).
  for (const auto* f : testing::files_of(a))
    for (const auto& t : f->tensors)
      if (t.source == MET_SOURCE_SCRATCH) CHECK(t.ref + t.bytes <= plan->window_bytes);
  CHECK(plan->window_bytes % interp::nccl::kWinGranularity == 0);
  CHECK(plan->window_bytes % interp::nccl::kWinAlign == 0);
}

TEST_CASE(
    "the MetDevPeers records of a rank carry its window, its device communicator, its rank of N and each "
    "collective's offset and first barrier, in instruction order (a record of another rank, collective or "
    "barrier fails)") {
  const interp::Assets a = testing::tp_assets("collective-plan-4", 4);
  auto plan = interp::plan_collectives(testing::files_of(a), a.dir);
  REQUIRE_MESSAGE(plan.ok(), (plan.ok() ? "" : plan.error().message));
  for (std::uint32_t rank = 0; rank < 4; ++rank) {
    CAPTURE(rank);
    const auto recs = interp::peers_records(*plan, 1, 4, rank, /*window=*/0x7000 + rank, /*comm=*/0x9000 + rank);
    REQUIRE(recs.size() == plan->programs[1].size());
    for (std::size_t c = 0; c < recs.size(); ++c) {
      CHECK(recs[c].window == 0x7000 + rank);
      CHECK(recs[c].comm == 0x9000 + rank);
      CHECK(recs[c].ranks == 4);
      CHECK(recs[c].rank == rank);
      CHECK(recs[c].offset == plan->programs[1][c].offset);
      CHECK(recs[c].barrier0 == plan->programs[1][c].barrier0);
      CHECK(recs[c].pad == 0);
    }
  }
  static_assert(sizeof(MetDevPeers) == 40, "MetDevPeers is the device ABI (kernels/common/interp/abi.h)");
}

TEST_CASE(
    "ranks whose collectives would not pair are refused with the rank's file, program and instruction: a peers "
    "buffer at another arena offset, another opcode or slice count, other ints, a missing instruction, or a "
    "peers operand outside the arena (a plan that pairs them anyway fails)") {
  const interp::Assets base = testing::tp_assets("collective-plan-bad", 2);
  // Named, not a structured binding: clang 14's lambdas cannot capture those.
  const std::pair<std::size_t, int> first = testing::first_collective(base.packet);
  const std::size_t ci = first.first;
  const int peers = first.second;
  const std::string prog = base.packet.programs[0].name;
  const std::string at = base.dir + "/model.rank1.pkt: program " + prog + " instruction " + std::to_string(ci);
  auto refused = [&](const std::function<void(interp::Assets&)>& mutate) {
    interp::Assets a = base;
    mutate(a);
    auto plan = interp::plan_collectives(testing::files_of(a), a.dir);
    REQUIRE_FALSE(plan.ok());
    return plan.error().message;
  };
  {  // rank 1's copy of the peers buffer at another offset: the window would read the wrong bytes
    const std::string m = refused([&](interp::Assets& a) {
      auto& f = a.other_ranks[0];
      emit::TensorDesc moved = f.tensors[f.programs[0].instrs[ci].tensors[static_cast<std::size_t>(peers)]];
      moved.ref += 256;
      f.tensors.push_back(moved);
      f.programs[0].instrs[ci].tensors[static_cast<std::size_t>(peers)] = static_cast<std::uint32_t>(f.tensors.size() - 1);
    });
    CAPTURE(m);
    CHECK(has(m, at + ": "));
    CHECK(has(m, "operand part is '"));
    CHECK(has(m, "a collective's operands must lie at the same place on every rank"));
  }
  {  // another slice count: the ranks' barriers would not meet
    const std::string m = refused([&](interp::Assets& a) { a.other_ranks[0].programs[0].instrs[ci].slices += 1; });
    CAPTURE(m);
    CHECK(has(m, at + ": 2 slice(s) of opcode "));
    CHECK(has(m, "the ranks' collectives would not pair"));
  }
  {  // another opcode at the collective's place
    const std::string m = refused(
        [&](interp::Assets& a) { a.other_ranks[0].programs[0].instrs[ci].opcode = a.packet.programs[0].instrs[0].opcode; });
    CAPTURE(m);
    CHECK(has(m, at + ": "));
    CHECK(has(m, "would not pair"));
  }
  {  // other ints (rows or width): the ranks would exchange different rows
    const std::string m = refused([&](interp::Assets& a) { a.other_ranks[0].programs[0].instrs[ci].ints[0] += 1; });
    CAPTURE(m);
    CHECK(has(m, at + ": "));
    CHECK(has(m, "ints differ from model.pkt's"));
  }
  {  // a rank with one instruction fewer
    const std::string m = refused([&](interp::Assets& a) { a.other_ranks[0].programs[0].instrs.pop_back(); });
    CAPTURE(m);
    CHECK(has(m, base.dir + "/model.rank1.pkt: program 0 is " + prog + " of "));
  }
  {  // the peers operand in IO on every rank: only the arena is a window
    const std::string m = refused([&](interp::Assets& a) {
      for (auto* f : testing::mutable_files(a))
        f->tensors[f->programs[0].instrs[ci].tensors[static_cast<std::size_t>(peers)]].source = MET_SOURCE_IO;
    });
    CAPTURE(m);
    CHECK(has(m, base.dir + "/model.pkt: program " + prog + " instruction " + std::to_string(ci) + ": "));
    CHECK(has(m, "is not scratch; only the arena is an NCCL window"));
  }
}

TEST_CASE(
    "an h200-sxm --tp 2 emit plans on the real packets: every collective's peers operand lies on a 16-byte boundary "
    "of the window (the bodies' vector loads), the communicator has as many LSA barriers as the largest program's "
    "collective slices summed, and the window holds every rank's arena (catches a slicing or arena layout the "
    "device bodies cannot read, or a barrier count short of a many-slice program)") {
  interp::Assets a = testing::tp_assets("collective-plan-h200", 2, "h200-sxm");
  auto plan = interp::plan_collectives(testing::files_of(a), a.dir);
  REQUIRE_MESSAGE(plan.ok(), (plan.ok() ? "" : plan.error().message));
  std::uint32_t most = 0, many = 0;
  for (std::size_t p = 0; p < a.packet.programs.size(); ++p) {
    std::uint32_t sum = 0;
    for (const auto& c : plan->programs[p]) {
      const std::uint64_t offset = c.offset;
      CAPTURE(offset);
      CHECK(offset % 16 == 0);
      CHECK(c.barrier0 == sum);
      sum += c.slices;
      many = std::max(many, c.slices);
    }
    CHECK(!plan->programs[p].empty());
    most = std::max(most, sum);
  }
  CHECK(plan->lsa_barriers == most);
  CHECK(many > 1);  // a GPU class cuts its collectives into many slices
  std::uint64_t arena = 0;
  for (const auto* f : testing::files_of(a))
    for (const auto& t : f->tensors)
      if (t.source == MET_SOURCE_SCRATCH) arena = std::max(arena, t.ref + t.bytes);
  CHECK(plan->window_bytes >= arena);
  CHECK(plan->window_bytes % interp::nccl::kWinGranularity == 0);
}

}  // namespace met

// The cuda backend's checks that run without a GPU: tensor-parallel assets are refused by class,
// by rank count and by collectives that do not pair, before NCCL or the driver is looked for.
#include <doctest/doctest.h>

#include "interp/cuda_backend.hpp"
#include "kernels/common/interp/abi.h"
#include "tp_assets.hpp"

namespace met {

namespace {
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE(
    "the cuda backend refuses TP ranks whose collectives do not pair before it looks for NCCL or a GPU, and TP assets "
    "of another class by their class (a backend that wires unpaired ranks, or still refuses every TP emit, fails)") {
  interp::Assets a = testing::tp_assets("collective-plan-cuda", 2);
  auto cpu_class = interp::CudaBackend::create(a);
  REQUIRE_FALSE(cpu_class.ok());
  CHECK(cpu_class.error().message == a.dir +
                                         " were emitted for class 'cpu'; the cuda backend runs the hopper interpreter (emit for "
                                         "h100-sxm or h200-sxm)");
  // As a hopper emit would say it (the GPU class's TP emit is the other half of the work).
  for (auto* f : testing::mutable_files(a)) f->target_class = "hopper";
  const std::size_t ci = testing::first_collective(a.packet).first;
  a.other_ranks[0].programs[0].instrs[ci].slices += 1;
  auto unpaired = interp::CudaBackend::create(a);
  REQUIRE_FALSE(unpaired.ok());
  CHECK(has(unpaired.error().message, a.dir + "/model.rank1.pkt: program " + a.packet.programs[0].name + " instruction " +
                                          std::to_string(ci) + ": 2 slice(s)"));
  // More ranks than the interpreter's MetDevPeers tables hold.
  a.packet.tp_ranks = MET_DEV_MAX_RANKS + 1;
  for (int r = 2; r <= MET_DEV_MAX_RANKS; ++r) a.other_ranks.push_back(a.other_ranks[0]);
  auto too_many = interp::CudaBackend::create(a);
  REQUIRE_FALSE(too_many.ok());
  CHECK(has(too_many.error().message, "emitted for 9 tensor-parallel ranks; the interpreter's collectives take at most 8"));
}

}  // namespace met

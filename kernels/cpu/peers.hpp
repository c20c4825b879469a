// The `peers` operand of the collectives (ops.def): every rank's copy of one buffer (fp32 for
// allreduce_residual, bf16 for allgather_cols), in rank order. Declarations only: the cpu backend builds the tables, kernels/cpu/collective.hpp reads them.
#pragma once

#include <cstdint>

// The most ranks a packet names (emit --tp takes 1, 2, 4 or 8; src/emit/packet.hpp kMaxTpRanks).
#define MET_MAX_RANKS 8

struct MetPeers {
  std::int32_t ranks;
  const void* part[MET_MAX_RANKS];  // each rank's copy of the same buffer
};

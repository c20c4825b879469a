// cpu reference bodies of the tensor-parallel collectives (emit --tp N). A `peers` operand is every
// rank's copy of one buffer, in rank order; the backend hands it over once every rank has written
// its copy and keeps the copies unchanged until every rank's body has returned. The sum runs in
// fp32 over the ranks in rank order, so every rank computes the same bits: the reference all-reduce.
// Definitions: include from one translation unit.
#pragma once

#include <cstdint>

#include "bf16.hpp"
#include "peers.hpp"

// x[r, i] = bf16(x[r, i] + bf16(sum over ranks of part[k][r, i])) for rows [row0, row1) and columns
// [col0, col1) of width: the fp32 partial sums of a row-parallel projection, rounded once as the
// unsplit projection's output is, then added as met_residual_add adds. accumulate 0: x[r, i] =
// bf16(sum), the projection's output itself.
extern "C" void met_allreduce_residual(std::uint16_t* x, const MetPeers* parts, std::int64_t width, std::int64_t row0,
                                       std::int64_t row1, std::int64_t col0, std::int64_t col1, std::int32_t accumulate) {
  for (std::int64_t r = row0; r < row1; ++r)
    for (std::int64_t i = col0; i < col1; ++i) {
      float sum = 0.0f;
      for (std::int32_t k = 0; k < parts->ranks; ++k) sum += static_cast<const float*>(parts->part[k])[r * width + i];
      const float y = met::cpu::round_bf16(sum);
      x[r * width + i] = accumulate ? met::cpu::f32_to_bf16(met::cpu::bf16_to_f32(x[r * width + i]) + y) : met::cpu::f32_to_bf16(y);
    }
}

// out[r, c] = part[c / width][r, c % width] for rows [row0, row1) and the columns [col0, col1) of
// the gathered ranks x width.
extern "C" void met_allgather_cols(const MetPeers* parts, std::uint16_t* out, std::int64_t width, std::int64_t row0,
                                   std::int64_t row1, std::int64_t col0, std::int64_t col1) {
  const std::int64_t stride = width * parts->ranks;
  for (std::int64_t r = row0; r < row1; ++r)
    for (std::int64_t c = col0; c < col1; ++c)
      out[r * stride + c] = static_cast<const std::uint16_t*>(parts->part[c / width])[r * width + c % width];
}

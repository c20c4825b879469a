// cpu reference bodies of the row gathers: embed (one table row per token, decoded exactly and
// stored as bf16) and gather_rows (rows of the activations, copied).
// Definitions: include from one translation unit.
#pragma once

#include <cstdint>
#include <vector>

#include "quant.hpp"

// table: [vocab, dim]; out: [rows, dim].
extern "C" void met_embed(const std::int32_t* tokens, const MetHostWeight* table, std::int64_t rows, std::uint16_t* out) {
  std::vector<float> row(static_cast<std::size_t>(table->cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    met::cpu::weight_row(*table, tokens[r], row.data());
    for (std::int64_t c = 0; c < table->cols; ++c) out[r * table->cols + c] = met::cpu::f32_to_bf16(row[static_cast<std::size_t>(c)]);
  }
}

// x: [src_rows, width]; out[r] = x[index[r]] (rows outside x read row 0), bit for bit.
extern "C" void met_gather_rows(const std::uint16_t* x, const std::int32_t* index, std::int64_t rows, std::int64_t src_rows,
                                std::int64_t width, std::uint16_t* out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t from = index[r] >= 0 && index[r] < src_rows ? index[r] : 0;
    for (std::int64_t c = 0; c < width; ++c) out[r * width + c] = x[from * width + c];
  }
}

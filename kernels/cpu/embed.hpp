// cpu reference body of embed: one table row per token, decoded exactly and stored as bf16.
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

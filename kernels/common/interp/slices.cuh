// Slice geometry of an instruction, the device twin of src/emit/opcodes.cpp slice_rows/slice_cols:
// slice s covers row part s / C of S / C parts and column part s % C of C (C = col_parts).
#pragma once
#include "common/interp/abi.h"

namespace met_interp {

struct SliceRange {
  int64_t begin, end;
};

__device__ __forceinline__ SliceRange slice_rows(const MetDevInstr& in, uint32_t s) {
  const int64_t rows = in.ints[0];
  const int64_t cols = in.col_parts > 0 ? in.col_parts : 1;
  int64_t n = static_cast<int64_t>(in.slices) / cols;
  if (n < 1) n = 1;
  const int64_t part = s / cols;
  const int64_t b = part * rows / n, e = (part + 1) * rows / n;
  return {b < rows ? b : rows, e < rows ? e : rows};
}

__device__ __forceinline__ SliceRange slice_cols(const MetDevInstr& in, uint32_t s, int64_t n) {
  const int64_t cols = in.col_parts > 0 ? in.col_parts : 1;
  const int64_t part = s % cols;
  return {part * n / cols, (part + 1) * n / cols};
}

}  // namespace met_interp

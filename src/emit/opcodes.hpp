// The opcode table, read from the op registry kernels/common/ops.def (name, number, operand
// meanings, cost family, the op whose CPU body is its oracle) plus the bytes each slice touches.
// The CPU and CUDA dispatch, the named operand structs of the bodies, the disassembler, the
// verifier, the ABI doc and the ABI hash all derive from the same registry. Numbers are stable:
// append, never renumber.
//
// Conventions every row follows (so the interpreter and the verifier need no per-op code):
//  - ints[0] is `rows`; slice s of S covers rows [s*rows/S, (s+1)*rows/S); rows are independent.
//  - an int named "col_slices" (C >= 1) splits each row part into C output column ranges as well:
//    slice s is row part s / C (of S / C parts) x column part s % C, columns [c*N/C, (c+1)*N/C) of
//    the N output columns (dim 1 of the operand OpcodeInfo::cols_operand names). Emit only splits
//    columns with one row per row part, so every slice's bytes stay one contiguous extent.
//  - an int named "in_row0" offsets the rows of tensors[0] (prefill reads the last row for the head).
//  - MET_NO_TENSOR marks an absent optional operand (attention sinks); its pointer is null.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "emit/packet.hpp"

namespace met::emit {

struct OperandInfo {
  std::string name;
  std::string kind;  // act, weight, vec, i32, i64, f32, table, peers (ops.def)
  bool write = false;
  bool optional = false;  // may be MET_NO_TENSOR (absent reads; lm_head's tokens when argmax runs apart)
  // A write that lands at slots[row] for each of the slice's rows (kv_append in prefill). Its
  // extent is the whole tensor (ordering against other instructions stays conservative); slices
  // with disjoint rows write disjoint bytes because the host gives every row of a step its own
  // slot, which check_step_io (interp/io_check.hpp) enforces before every run. Also the places
  // moe_group sorts the routed slots to (span `grouped`): disjoint by the body's construction.
  bool by_slot = false;
  // A GPU body's workspace (ops.def dir `work`): written and read within the instruction, its
  // contents after it undefined; ordered as a write, never compared against a reference.
  bool work = false;
};

// Bytes of a tensor a slice touches; empty = none. [begin, end) is the hull. A strided extent
// (count > 1) touches only `count` blocks of `len` bytes, block i at begin + i * stride (len <=
// stride): a column range of several rows, or a head range of several KV slots.
struct Extent {
  std::uint64_t begin = 0, end = 0;
  std::uint64_t stride = 0, len = 0, count = 1;
  bool strided() const { return count > 1; }
};
// An extent of `count` blocks of `len` bytes, `stride` apart, from `begin` (count 1: contiguous).
Extent strided_extent(std::uint64_t begin, std::uint64_t len, std::uint64_t stride, std::uint64_t count);
// Whether two extents share a byte: exact for contiguous pairs and for strided pairs of one stride,
// conservative (their hulls) otherwise.
bool extents_overlap(const Extent& a, const Extent& b);

struct OpcodeInfo {
  std::uint32_t number = 0;
  std::string name;                  // kernel name without the met_ prefix: "gemv_rmsnorm_qkv_rope"
  std::vector<OperandInfo> tensors;  // meaning of Instr.tensors[k]
  std::vector<std::string> ints;     // meaning of Instr.ints[k]
  std::vector<std::string> imms;     // meaning of Instr.imms[k]
  std::string family;
  int cols_operand = -1;             // tensor whose dim 1 a column split divides; -1: rows only
  Extent (*extent)(const InstrDesc&, const PacketFile&, std::size_t operand, std::uint32_t slice) = nullptr;
  std::string cpu_ref;               // the op whose CPU body computes this one (itself for cpu-class ops)
};

const std::vector<OpcodeInfo>& opcode_table();
const OpcodeInfo* find_opcode(std::uint32_t number);
const OpcodeInfo* find_opcode(std::string_view name);

// Rows [begin, end) slice `slice` of an instruction covers. A GEMM split in K (its "k_splits" int,
// kernels/common/ops.def) gives a tile's rows to the slice of its last K part only: the others
// leave fp32 parts that the last one to arrive sums (their rows are empty here).
struct RowRange {
  std::int64_t begin = 0, end = 0;
};
RowRange slice_rows(const InstrDesc& instr, std::uint32_t slice);
// K parts of an instruction (its "k_splits" int; 1 when the opcode has none or it is below 1).
std::int64_t k_parts(const InstrDesc& instr);
// Whether an opcode's GPU body takes a split K (the bf16 wgmma GEMMs, kernels/hopper/gemm_wgmma.cuh).
bool splits_k(const OpcodeInfo& op);
// Column parts of an instruction (its "col_slices" int; 1 when the opcode has none), and the range
// [begin, end) of n output columns slice `slice` covers.
std::int64_t col_parts(const InstrDesc& instr);
// A GEMM whose epilogue is a gated activation (its cpu reference is gemm_silu or gemm_gelu): its
// output has half the weight's rows, and a GPU tile's columns each read a gate and an up row.
bool gated_gemm(const OpcodeInfo& op);
RowRange slice_cols(const InstrDesc& instr, std::uint32_t slice, std::int64_t n);
// Index of an int / tensor operand by name in the opcode's row; -1 when the opcode has none.
int int_index(const OpcodeInfo& op, std::string_view name);
int tensor_index(const OpcodeInfo& op, std::string_view name);
// The int named `name` of an instruction (the registry's names; 0 when its opcode has none).
std::int64_t named_int(const OpcodeInfo& op, const InstrDesc& d, std::string_view name);

}  // namespace met::emit

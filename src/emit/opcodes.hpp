// THE opcode table: one row per op body (name, number, operand meanings, cost family, CPU body,
// bytes each slice touches). Dispatch (src/interp), the disassembler and the verifier derive from
// it; docs/arch/ lists it. Numbers are stable: append, never renumber.
//
// Conventions every row follows (so the interpreter and the verifier need no per-op code):
//  - ints[0] is `rows`; slice s of S covers rows [s*rows/S, (s+1)*rows/S); rows are independent.
//  - an int named "in_row0" offsets the rows of tensors[0] (prefill reads the last row for the head).
//  - operands[k] handed to a CPU body is the base of tensor k; a checkpoint tensor arrives as a
//    `const MetHostWeight*` (kernels/cpu/quant.hpp), whose data a vector weight (norms) reads as bf16.
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
  bool write = false;
};

struct Extent {  // bytes of a tensor a slice touches; empty = none
  std::uint64_t begin = 0, end = 0;
};

struct OpcodeInfo {
  std::uint32_t number = 0;
  std::string name;                  // kernel name without the met_ prefix: "gemv_rmsnorm_qkv_rope"
  std::vector<OperandInfo> tensors;  // meaning of Instr.tensors[k]
  std::vector<std::string> ints;     // meaning of Instr.ints[k]
  std::vector<std::string> imms;     // meaning of Instr.imms[k]
  std::string family;
  Extent (*extent)(const InstrDesc&, const PacketFile&, std::size_t operand, std::uint32_t slice) = nullptr;
  void (*cpu)(const InstrDesc&, std::uint32_t slice, void* const* operands) = nullptr;  // CPU body for one slice
};

const std::vector<OpcodeInfo>& opcode_table();
const OpcodeInfo* find_opcode(std::uint32_t number);
const OpcodeInfo* find_opcode(std::string_view name);

// Rows [begin, end) slice `slice` of an instruction covers.
struct RowRange {
  std::int64_t begin = 0, end = 0;
};
RowRange slice_rows(const InstrDesc& instr, std::uint32_t slice);
// Index of an int / tensor operand by name in the opcode's row; -1 when the opcode has none.
int int_index(const OpcodeInfo& op, std::string_view name);
int tensor_index(const OpcodeInfo& op, std::string_view name);

}  // namespace met::emit

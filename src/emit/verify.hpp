// Static checks of packet programs, against an opcode table (the real one, or a crafted one in
// tests): (a) every data dependency between slices is ordered by stream order or counter waits,
// (b) the streams cannot deadlock when every block is resident, and every (instruction, slice)
// runs exactly once, (c) every operand access is within its tensor, (d) no two unordered slices
// write overlapping bytes. Each problem names program, instruction (index and opcode) and slice.
#pragma once

#include <string>
#include <vector>

#include "emit/opcodes.hpp"
#include "emit/packet.hpp"

namespace met::emit {

// Empty when the file is sound. Deterministic: problems are sorted by program, check, instruction
// and slice (ties in the order found). Per program and check, at most kMaxProblemsPerCheck lines,
// then a "... more" line.
std::vector<std::string> verify(const PacketFile& file, const std::vector<OpcodeInfo>& table);

inline constexpr std::size_t kMaxProblemsPerCheck = 20;

}  // namespace met::emit

// The disassembler: a PacketFile as text for people. Header and tensor table, then per program
// one line per instruction with operands named by the opcode table, then a per-SM stream summary.
// Deterministic: the same file and table give the same bytes.
#pragma once

#include <string>
#include <vector>

#include "emit/opcodes.hpp"
#include "emit/packet.hpp"

namespace met::emit {

// program_filter: only the program of that name ("" = all).
std::string disassemble(const PacketFile& file, const std::vector<OpcodeInfo>& table, const std::string& program_filter = "");

}  // namespace met::emit

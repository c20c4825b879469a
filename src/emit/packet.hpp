// PacketFile: model.pkt as values. The emitter builds one, serialize() lays it out per the ABI
// (packet_abi.h), parse_packet() reads and validates one (magic, version, ABI hash, every offset
// and count in bounds, string references, handles, stream/wait indices) with located errors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/expected.hpp"
#include "emit/packet_abi.h"

namespace met::emit {

// The most tensor-parallel ranks a packet names (emit --tp 1, 2, 4 or 8).
inline constexpr std::uint32_t kMaxTpRanks = 8;

struct TensorDesc {
  std::string name;
  std::uint32_t dtype = MET_DTYPE_BF16;
  std::vector<std::uint64_t> shape;  // rank <= 4
  std::uint64_t bytes = 0;
  std::uint32_t source = MET_SOURCE_SCRATCH;
  std::uint64_t ref = 0;
};

struct WaitDesc {
  std::uint32_t counter = 0;  // producing instruction's index in the program
  std::uint32_t value = 0;    // slices of it that must have signalled
};

struct EntryDesc {
  std::uint32_t instr = 0;
  std::uint32_t slice = 0;
  std::vector<WaitDesc> waits;
};

struct InstrDesc {
  std::uint32_t opcode = 0;
  std::uint32_t slices = 1;
  std::uint32_t group = 0;
  std::string scope;                 // "layers:full L3" — for people reading the disassembly
  std::vector<std::uint32_t> tensors;  // <= 12 handles
  std::vector<std::int64_t> ints;      // <= 8
  std::vector<float> imms;             // <= 4
};

struct ProgramDesc {
  std::string name;                  // "prefill_512", "decode_4"
  std::uint32_t kind = MET_PROGRAM_DECODE;
  std::uint32_t rows = 1;
  std::uint32_t plan_group_count = 0;
  std::vector<InstrDesc> instrs;
  std::vector<std::vector<EntryDesc>> streams;  // sm_count of them
};

struct PacketFile {
  std::string target_class;          // <= 15 bytes
  std::uint32_t sm_count = 1;
  std::uint32_t tp_ranks = 1;        // tensor parallelism: ranks of the emit, one file each
  std::uint32_t tp_rank = 0;         // the rank of this file, < tp_ranks
  std::vector<TensorDesc> tensors;
  std::vector<ProgramDesc> programs;
};

// FNV-1a over the field list (names, types, counts in order) and then the opcode table (each
// row's number, name and operand meanings): what the header's abi_hash holds.
std::uint32_t abi_hash();

std::string serialize(const PacketFile& file);
// display names the file in errors ("assets/x/model.pkt").
Expected<PacketFile> parse_packet(const std::string& bytes, const std::string& display);

}  // namespace met::emit

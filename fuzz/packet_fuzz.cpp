// Fuzzes the packet reader with whole model.pkt files: parse_packet may refuse any input but must
// never crash, read out of bounds or allocate without bound; a file it accepts then goes through
// the verifier with the real opcode table (extent functions included), which must not crash either.
// Seeds: fuzz/seeds/packet/, emits of the tiny oracle models (fuzz/make_packet_seeds.sh; scripts/fuzz.sh
// refreshes them from the met it finds in build/, so they match the current packet ABI).
#include <cstddef>
#include <cstdint>
#include <string>

#include "emit/opcodes.hpp"
#include "emit/packet.hpp"
#include "emit/verify.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto file = met::emit::parse_packet(bytes, "fuzz/model.pkt");
  if (!file) return 0;
  const auto problems = met::emit::verify(*file, met::emit::opcode_table());
  (void)problems;
  return 0;
}

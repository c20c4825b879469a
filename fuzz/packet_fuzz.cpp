// Fuzzes the packet reader with whole model.pkt files: parse_packet may refuse any input but must
// never crash, read out of bounds or allocate without bound; a file it accepts then goes through
// the verifier with the real opcode table (extent functions included), which must not crash either.
// Seeds: fuzz/seeds/packet/ (a crafted two-program file and a tiny emitted model).
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
